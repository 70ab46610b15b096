"""The engine calls behind every chat channel's buttons, forms and messages (`ChatDesk`).

Teams, Discord and Telegram differ in how a click or a message reaches the bot, and not at
all in what it means: a decision is `Inbox.decide` as the person who clicked, on the card
they saw (`seen`); a message is `Runs.start` or `Runs.follow_up`. No rule lives here: the
policy (`pizzabot.agent.policy.Access`) says who may do what and the engine audits its refusals; the
inbox says whether the first decision already won. What comes back is the note to show the
person, in plain words, which the channel escapes and sends its own way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pizzabot.agent.card_digest import seen_matches
from pizzabot.agent.errors import (
    AlreadyDecided,
    CardChanged,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
    OwnRequest,
    StepUpRequired,
)
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Decision, Item
from pizzabot.agent.policy import Access, Principal, audit_refusal
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.store import AuditTrail, CardRefresh, DeliveryReader, ItemReader, RunReader
from pizzabot.channels.chat.card import run_url, stale_line

__all__ = ["CHANGED", "GONE", "ChatDesk", "ChatStore"]

GONE = "This item no longer exists."
CHANGED = (
    "This card changed after you saw it (someone edited the call), so nothing was decided. "
    "The card now shows the call as it is: look at it and decide again."
)


class ChatStore(ItemReader, RunReader, DeliveryReader, AuditTrail, CardRefresh, Protocol):
    """What a chat channel reads from the store, and where it audits."""


@dataclass
class ChatDesk:
    """One chat channel's way into the engine. `channel` names it ("discord"), `platform`
    is how people call it ("Discord"); `default_skill` runs when a message does not start
    with a skill's name; `command` is how a run is started there ("/pizza")."""

    channel: str
    platform: str
    inbox: Inbox
    runs: Runs
    store: ChatStore
    skills: SkillBook
    access: Access
    base_url: str
    default_skill: str | None = None
    command: str = "/pizza"

    def who(self, user: str) -> Principal:
        return Principal.of(self.channel, user)

    @property
    def not_approver(self) -> str:
        return (
            f"Only the approvers this skill names for {self.platform} "
            f"(approvers.{self.channel}) can decide here, so nothing was decided."
        )

    @property
    def not_starter(self) -> str:
        return (
            f"Only people listed as {self.platform} approvers of some skill "
            f"(approvers.{self.channel}) can start runs from {self.platform}."
        )

    @property
    def not_follower(self) -> str:
        return f"Only this skill's {self.platform} approvers can steer its runs, so the run did not get this."

    # -- decisions -----------------------------------------------------------------------

    async def decide(
        self, item_id: str, decision: Decision, *, user: str, seen: str | None
    ) -> str | None:
        """Decide as `user` on the card whose digest is `seen`; the note that explains a
        refusal (None: decided, and the outbox updates every copy, a changed card too)."""
        if not seen:
            # Every card these channels send carries its digest: a click without one is not
            # from a card as it is now.
            try:
                await self.store.show_again(item_id, now=self.inbox.ctx.clock())
            except NotFound:
                return GONE
            self.inbox.ctx.wake_outbox()
            return CHANGED
        try:
            await self.inbox.decide(item_id, decision, by=self.who(user), seen=seen)
        except (OwnRequest, StepUpRequired) as exc:  # StepUpRequired: says where to confirm
            return str(exc)
        except NotAllowed:
            return self.not_approver
        except CardChanged:
            return CHANGED
        except AlreadyDecided as exc:
            return stale_line(exc.item)
        except Conflict as exc:  # counted already (a person approves once), the kill switch
            return str(exc)
        except InvalidArguments as exc:
            return f"Nothing was decided: {exc}"
        except NotFound:
            return GONE
        return None

    async def openable(
        self, item_id: str, *, user: str, seen: str | None, decision: str
    ) -> Item | str:
        """The item whose edit (or reject) form `user` may open from the card `seen`, or the
        note that says why not. A refusal is audited as a refused decision; a card that no
        longer shows the item is shown anew instead of opened."""
        try:
            item = await self.store.get_item(item_id)
        except NotFound:
            return GONE
        verdict = self.access.may_decide(self.who(user), item)
        if not verdict:
            await audit_refusal(
                self.store,
                verdict,
                now=self.inbox.ctx.clock(),
                run_id=item.run_id,
                item_id=item.id,
                detail={"decision": decision},
            )
            return self.not_approver
        if item.decided:
            return stale_line(item)
        if not seen_matches(item, seen) or seen is None:
            await self.store.show_again(item.id, now=self.inbox.ctx.clock())
            self.inbox.ctx.wake_outbox()
            return CHANGED
        return item

    # -- starting and following up -------------------------------------------------------

    def parse(self, text: str) -> tuple[str, str] | str:
        """(skill, input) from "SKILL what to do", or from the default skill; else a hint."""
        text = text.strip()
        first, _, rest = text.partition(" ")
        if first in self.skills:
            return first, rest.strip()
        if self.default_skill:
            return self.default_skill, text
        names = ", ".join(s.name for s in self.skills.all()) or "none yet"
        return (
            f"Which skill? Start with its name: {self.command} SKILL what to do. Skills: {names}."
        )

    def help(self) -> str:
        lines = [f"{self.command} SKILL what to do starts a run. Skills:"]
        for skill in self.skills.all():
            lines.append(f"• {skill.name} {skill.description}".rstrip())
        if self.default_skill:
            lines.append(f"Without a skill name, {self.default_skill} runs.")
        return "\n".join(lines)

    async def start(self, text: str, *, user: str, key: str | None) -> str:
        """Start a run from what `user` wrote; the sentence to answer with. A stranger is
        refused (and the refusal audited) before the text is read."""
        verdict = self.access.may_start(self.who(user))
        if not verdict:
            await audit_refusal(self.store, verdict, now=self.inbox.ctx.clock())
            return self.not_starter
        if not text.strip() or text.strip() == "help":
            return self.help()
        parsed = self.parse(text)
        if isinstance(parsed, str):
            return parsed
        skill, given = parsed
        try:
            run = await self.runs.start(
                skill, given, trigger=self.channel, by=self.who(user), idempotency_key=key
            )
        except NotAllowed:
            return self.not_starter
        except (Conflict, NotFound) as exc:  # the kill switch, an inbox-only skill
            return str(exc)
        return f"Started run {run.id} of {skill}: {run_url(self.base_url, run.id)}"

    async def run_of(self, external_id: str | None) -> str | None:
        """The run whose card the channel's own reference `external_id` names, if any."""
        if not external_id:
            return None
        delivery = await self.store.find_delivery(self.channel, external_id)
        return delivery.run_id if delivery is not None else None

    async def follow_up(self, run_id: str, text: str, *, user: str) -> str | None:
        """Send `text` to the run as `user`; the note that explains a refusal (None: sent)."""
        try:
            await self.runs.follow_up(run_id, text, by=self.who(user))
        except NotAllowed:
            return self.not_follower
        except NotFound:
            return "That run no longer exists."
        except Conflict as exc:
            return f"The run did not get this: {exc}"
        return None
