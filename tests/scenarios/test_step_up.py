"""Step-up and passkeys in the engine, with a software passkey (`tests.peers.authenticator`):
which calls need a passkey, that no approval of one counts without a fresh assertion for its
card, and that a passkey's answer is refused when it is for another card, given twice, from
someone else's passkey, or from a clone whose counter did not move on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.context import Context
from pizzabot.agent.devices import OWNER
from pizzabot.agent.errors import PasskeyRefused, StepUpRequired
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Box, Item, ItemKind, ItemStatus, Reject, Risk
from pizzabot.agent.passkeys import Passkeys
from pizzabot.agent.policy import Principal, Scope
from pizzabot.agent.policy.grants import covering, make_grant, offered
from pizzabot.agent.policy.rules import judge
from pizzabot.agent.skills import SkillBook, parse_skill
from pizzabot.agent.step_up import Assertion, item_step_up, step_up_for
from pizzabot.store.migrate import upgrade
from pizzabot.store.phone import SqlPasskeys
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.tokens import SqlTokens
from tests.peers.authenticator import SoftPasskey

ORIGIN = "http://localhost:8787"
T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)

SKILL = """
name: bank
approvers: {email: [ann@example.com]}
step_up: {passkey: [irreversible]}
tools:
  bank.pay: {policy: ask, step_up: passkey}
  bank.refund:
    rules:
      - when: {amount: {gt: 1000}}
        policy: ask
        step_up: passkey
    policy: ask
  bank.close: {policy: ask, reversible: false}
  bank.balance: ask
"""


def test_a_skill_a_tool_a_rule_or_a_risk_asks_for_a_passkey() -> None:
    skill = parse_skill(SKILL, "bank.yaml")

    def needs(tool: str, args: dict[str, Any]) -> str | None:
        return step_up_for(skill, tool, judge(skill, tool, args), skill.rule(tool).risk)

    assert needs("bank.pay", {"amount": 1}) == "passkey"  # the tool's entry
    assert needs("bank.refund", {"amount": 5000}) == "passkey"  # the rule that asked
    assert needs("bank.refund", {"amount": 5}) is None
    assert needs("bank.close", {}) == "passkey"  # irreversible, by the skill's risk words
    assert needs("bank.balance", {}) is None
    # No grant would let a later call skip the passkey: none offered, none covers.
    assert offered(skill, "bank.pay") == () and offered(skill, "bank.close") == ()
    grant = make_grant(
        "1h",
        id="g1",
        skill="bank",
        tool="bank.refund",
        args={},
        run_id="r1",
        item_id="i0",
        granted_by="ann",
        granted_via="web",
        now=T0,
    )
    big, small = {"amount": 5000}, {"amount": 5}
    assert covering([grant], skill=skill, tool="bank.refund", run_id="r1", args=big, now=T0) is None
    assert covering([grant], skill=skill, tool="bank.refund", run_id="r1", args=small, now=T0)


def test_a_step_up_rule_must_be_an_ask() -> None:
    bad = SKILL.replace(
        "        policy: ask\n        step_up", "        policy: auto\n        step_up"
    )
    with pytest.raises(Exception, match="step_up applies to an approval"):
        parse_skill(bad, "bank.yaml")


@dataclass
class Bank:
    store: SqlStore
    passkeys: Passkeys
    inbox: Inbox
    tokens: SqlTokens

    async def item(self, item_id: str, tool: str = "bank.pay") -> Item:
        run_id = f"run-{item_id}"
        await self.store.create_run(run_id=run_id, skill="bank", input="", trigger="t", now=T0)
        item = Item(
            id=item_id,
            run_id=run_id,
            skill="bank",
            box=Box.ACTION,
            kind=ItemKind.TOOL,
            status=ItemStatus.PENDING,
            title=f"bank wants to run {tool}",
            body="",
            created_at=T0,
            call_id=f"call-{item_id}",
            tool=tool,
            args={"amount": 12},
            schema={"type": "object"},
            risk=Risk(step_up="passkey"),
        )
        return await self.store.create_item(item, targets=[], lease=None, now=T0)

    async def registered(self, who: Principal) -> SoftPasskey:
        key = SoftPasskey(origin=ORIGIN)
        opened = await self.passkeys.register_options(who)
        credential = key.create(opened["options"])
        await self.passkeys.register(who, nonce=opened["nonce"], credential=credential, name="k")
        return key

    async def answer(self, key: SoftPasskey, who: Principal, item: Item, **kw: Any) -> Assertion:
        digest = kw.pop("digest", card_digest(item))
        opened = await self.passkeys.step_up_options(who, item, digest=digest)
        return Assertion(nonce=opened["nonce"], credential=key.get(opened["options"], **kw))

    async def actions(self) -> list[str]:
        return [e.action for e in await self.store.audit_log()]


@pytest.fixture
async def bank(sqlite_url: str) -> AsyncIterator[Bank]:
    engine = connect(sqlite_url)
    await upgrade(engine)
    store = SqlStore(engine)
    tokens = SqlTokens(store.db)
    passkeys = Passkeys(
        store=SqlPasskeys(store.db), trail=store, tokens=tokens, rp_id="localhost", origins=[ORIGIN]
    )
    skills = SkillBook({"bank": parse_skill(SKILL, "bank.yaml")})
    inbox = Inbox(Context(store=store, skills=skills, step_up=passkeys))
    try:
        yield Bank(store, passkeys, inbox, tokens)
    finally:
        await store.aclose()


async def test_a_passkey_signs_its_owner_in_and_a_clone_or_a_replay_is_refused(bank: Bank) -> None:
    owner = Principal.owner("web")
    key = await bank.registered(owner)
    assert [k.principal for k in await bank.passkeys.store.list_passkeys(OWNER)] == [OWNER]

    opened = await bank.passkeys.login_options()
    answer = key.get(opened["options"])
    who = await bank.passkeys.login(nonce=opened["nonce"], credential=answer, client="t")
    assert who.kind == "owner" and who.channel == "web"
    with pytest.raises(PasskeyRefused, match="expired or was used"):  # the same answer again
        await bank.passkeys.login(nonce=opened["nonce"], credential=answer, client="t")

    clone = key.clone()
    opened = await bank.passkeys.login_options()  # the real one signs in again: counter 2
    real = key.get(opened["options"])
    await bank.passkeys.login(nonce=opened["nonce"], credential=real, client="t")
    opened = await bank.passkeys.login_options()
    stale = clone.get(opened["options"])  # the clone says 2 again
    with pytest.raises(PasskeyRefused, match="cloned authenticator"):
        await bank.passkeys.login(nonce=opened["nonce"], credential=stale, client="t")
    actions = await bank.actions()
    assert {"passkey_registered", "passkey_login", "passkey_counter_refused"} <= set(actions)
    assert actions.count("passkey_login_refused") == 2


async def test_a_step_up_card_is_approved_only_with_an_assertion_for_that_card(bank: Bank) -> None:
    owner = Principal.owner("web")
    key = await bank.registered(owner)
    item = await bank.item("i1")
    assert item_step_up(item, None) == "passkey"

    # A channel's button alone (Slack, a mail link, the API): refused, the item pending.
    for who in (Principal.of("email", "ann@example.com"), owner.via("api")):
        with pytest.raises(StepUpRequired, match="passkey"):
            await bank.inbox.decide(item.id, Approve(), by=who, seen=card_digest(item))
    assert (await bank.store.get_item(item.id)).status is ItemStatus.PENDING

    # An assertion made for another digest (the card as it was, or another card): refused.
    wrong = await bank.answer(key, owner, item, digest="0" * 32)
    with pytest.raises(StepUpRequired, match="not accepted"):
        await bank.inbox.decide(item.id, Approve(), by=owner, step_up=wrong)

    good = await bank.answer(key, owner, item)
    decided = await bank.inbox.decide(item.id, Approve(), by=owner, step_up=good)
    assert decided.status is ItemStatus.APPROVED

    # The same assertion replayed on another card that needs one: refused.
    other = await bank.item("i2")
    with pytest.raises(StepUpRequired, match="not accepted"):
        await bank.inbox.decide(other.id, Approve(), by=owner, step_up=good)
    # Someone else's confirmation does not count for the owner, nor the owner's for them.
    alice = Principal.token(token_id="t1", name="phone", scope=Scope.ADMIN, person="alice")
    theirs = await bank.answer(key, owner, other)
    with pytest.raises(StepUpRequired, match="another card"):
        await bank.inbox.decide(other.id, Approve(), by=alice, step_up=theirs)
    # Reject never needs a passkey.
    rejected = await bank.inbox.decide(other.id, Reject("no"), by=owner)
    assert rejected.status is ItemStatus.REJECTED
    actions = await bank.actions()
    assert actions.count("step_up_confirmed") == 1
    assert actions.count("decision_refused") == 5
