"""What a mail to the bot means: a decision, a follow-up, a new run, or nothing.

`MailHandler.handle` takes one raw message (from the IMAP receiver) and turns it into at
most one call of the engine's public functions:

    reply on an action's thread   -> Inbox.decide (approve / reject / edit)
    reply on an Unread's thread   -> Runs.follow_up
    new mail from an allowed sender -> Runs.start ([skill] tag in the subject, else default)

Every mail is handled once: its Message-ID is recorded in the `MailLog` first (a second
copy, or the same mail after a restart, is a "duplicate"). `trust` says whether a mail
really comes from its one sender (by default only a passing, aligned verdict of the
receiving server says so; `InboundConfig.trust`); the policy (`pizzabot.agent.policy.Access`) says what that sender
may do: decide the item, follow up the run, start a run. A mail that fails either decides
nothing, is written to the audit trail, and is answered only when the sender is someone
the policy knows (an approver or an allowed sender): strangers, and forged senders who are
strangers, get no mail back.
"""

from __future__ import annotations

import email
import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any, Protocol

from pizzabot.agent.batch import approve_all
from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.context import utcnow
from pizzabot.agent.errors import (
    AlreadyApproved,
    AlreadyDecided,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
)
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Box, Decision, Edit, Item, ItemKind, ItemStatus, Reject
from pizzabot.agent.policy import EMAIL, Access, Principal, Verdict, audit_refusal
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import SkillBook
from pizzabot.channels.email.compose import SUBJECT_TAG, MailIdentity, outcome_text
from pizzabot.channels.email.edits import edit_arguments, edit_errors
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.ports import MailLog, MailStore
from pizzabot.channels.email.questions import answer_errors, no_answer, read_answer
from pizzabot.channels.email.replies import UnreadableMail, body_text, read_reply, top_of_reply
from pizzabot.channels.email.trust import (
    MailTrust,
    authenticated,
    check_reply,
    is_automatic,
    plus_tokens,
    sender_of,
    split_address,
    thread_refs,
)
from pizzabot.channels.email.trust import Verdict as Authenticity

log = logging.getLogger(__name__)

_SKILL_TAG = re.compile(r"\[([a-z0-9][a-z0-9_-]*)\]", re.IGNORECASE)
_REPLY_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|wg|tr)\s*:\s*)+", re.IGNORECASE)
HOW_TO = (
    'Reply with "approve" (or yes, ok, lgtm), "reject" and a reason, or "edit" and one '
    '"name: value" line per field to change (or a JSON object), on the first line of '
    "your reply, above the quoted mail."
)


class Answerer(Protocol):
    async def answer(
        self, original: EmailMessage, *, to: str, text: str, token: str | None = None
    ) -> None: ...


@dataclass(frozen=True)
class InboundConfig:
    default_skill: str | None = None
    #: Which mail is believed to come from its From (`trust.MailTrust`); the default
    #: believes none until the receiving server's authserv-id is set.
    trust: MailTrust = field(default_factory=MailTrust)
    max_bytes: int = 5_000_000


def parse_message(raw: bytes) -> EmailMessage:
    msg: Any = email.message_from_bytes(raw, policy=default_policy)
    assert isinstance(msg, EmailMessage)
    return msg


def mail_key(msg: EmailMessage, fallback: str) -> str:
    """The key a mail is recorded under: its Message-ID (hashed when long), else `fallback`."""
    message_id = " ".join(str(msg.get("Message-ID", "")).split())
    if not message_id:
        return f"mail:{fallback}"
    if len(message_id) > 200:
        return "mail:sha256:" + hashlib.sha256(message_id.encode()).hexdigest()
    return f"mail:{message_id}"


class MailHandler:
    def __init__(
        self,
        *,
        store: MailStore,
        inbox: Inbox,
        runs: Runs,
        skills: SkillBook,
        access: Access,
        log: MailLog,
        answerer: Answerer,
        identity: MailIdentity,
        config: InboundConfig,
        key: MailKey,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.key = key
        self.store = store
        self.inbox = inbox
        self.runs = runs
        self.skills = skills
        self.access = access
        self.log = log
        self.answerer = answerer
        self.identity = identity
        self.config = config
        self.clock = clock

    async def handle(self, raw: bytes, *, size: int | None = None, fallback_id: str) -> str:
        """Handle one mail (or, when it is too large, its headers); return what happened."""
        msg = parse_message(raw)
        key = mail_key(msg, fallback_id)
        if not await self.log.record_once(key, kind="mail", now=self.clock()):
            return "duplicate"
        try:
            outcome = await self._handle(msg, size=len(raw) if size is None else size)
        except Exception:
            # Not handled: forget it, so the next pass tries again.
            await self.log.release(key)
            raise
        log.info("mail %s from %s: %s", key[:80], sender_of(msg)[0], outcome)
        return outcome

    # -- routing -------------------------------------------------------------------------

    async def _handle(self, msg: EmailMessage, *, size: int) -> str:
        sender, why = sender_of(msg)
        if sender is None:
            # Nobody to hold to it, and nobody to answer: an ambiguous From decides nothing.
            return await self._ignore(msg, "unknown", why)
        if self.identity.is_mine(sender):
            return await self._ignore(msg, sender, "sent by the bot itself")
        automatic = is_automatic(msg)
        if automatic:
            return await self._ignore(msg, sender, f"sent automatically ({automatic})")
        if size > self.config.max_bytes:
            return await self._refuse(
                msg,
                sender,
                f"the mail is too large ({size} bytes; the limit is {self.config.max_bytes})",
            )
        item, ref = await self._find_item(msg)
        if item is not None:
            return await self._reply(msg, sender, item, ref)
        if self._looks_like_reply(msg):
            return await self._refuse(
                msg,
                sender,
                "it is not on the thread of an item, or its token is wrong: "
                "reply to the item's own mail",
            )
        return await self._start(msg, sender)

    async def _find_item(self, msg: EmailMessage) -> tuple[Item | None, str | None]:
        suffix = "@" + self.identity.domain
        for ref in thread_refs(msg):
            if not (ref.startswith("pizzabot.") and ref.lower().endswith(suffix)):
                continue
            delivery = await self.store.find_delivery("email", f"<{ref}>")
            if delivery is None:
                continue
            try:
                return await self.store.get_item(delivery.item_id), ref
            except NotFound:
                continue
        return None, None

    def _looks_like_reply(self, msg: EmailMessage) -> bool:
        if plus_tokens(msg, bot_address=self.identity.address):
            return True
        if any(ref.startswith("pizzabot.") for ref in thread_refs(msg)):
            return True
        return SUBJECT_TAG in str(msg.get("Subject", "")).lower()

    # -- outcomes ------------------------------------------------------------------------

    def _detail(self, msg: EmailMessage, why: str | list[str]) -> dict[str, Any]:
        return {
            "why": why,
            "message_id": str(msg.get("Message-ID", ""))[:200],
            "subject": str(msg.get("Subject", ""))[:200],
        }

    async def _ignore(self, msg: EmailMessage, sender: str, why: str) -> str:
        await self.store.audit(
            action="email_ignored",
            actor=sender,
            channel="email",
            now=self.clock(),
            detail=self._detail(msg, why),
        )
        return f"ignored: {why}"

    async def _refuse(
        self,
        msg: EmailMessage,
        sender: str,
        why: str | list[str],
        *,
        item: Item | None = None,
    ) -> str:
        await self.store.audit(
            action="email_refused",
            actor=sender,
            channel="email",
            now=self.clock(),
            run_id=item.run_id if item else None,
            item_id=item.id if item else None,
            detail=self._detail(msg, why),
        )
        reasons = [why] if isinstance(why, str) else why
        if self.access.knows(Principal.of(EMAIL, sender)):
            text = "Your mail was not acted on: " + "; ".join(reasons) + "."
            await self.answerer.answer(msg, to=sender, text=text, token=None)
        return "refused: " + "; ".join(reasons)

    async def _say(self, msg: EmailMessage, sender: str, item: Item, text: str) -> None:
        """Answer an approver on the item's thread, with their own token: a reply to the
        answer works like a reply to the item's mail."""
        token = self.key.reply_token(item.id, sender, item.version)
        await self.answerer.answer(msg, to=sender, text=text, token=token)

    # -- replies -------------------------------------------------------------------------

    async def _policy_refused(self, msg: EmailMessage, verdict: Verdict, item: Item | None) -> None:
        """Audit what the policy refused, as every channel does (the mail's own refusal
        follows, with every reason it did not count)."""
        await audit_refusal(
            self.store,
            verdict,
            now=self.clock(),
            run_id=item.run_id if item else None,
            item_id=item.id if item else None,
            detail={"message_id": str(msg.get("Message-ID", ""))[:200]},
        )

    async def _reply(self, msg: EmailMessage, sender: str, item: Item, ref: str | None) -> str:
        # On an Unread's thread a reply follows the run up; on an action's, it decides.
        allowed = (
            self.access.may_follow_up(Principal.of(EMAIL, sender), item.skill)
            if item.box is Box.UNREAD
            else self.access.may_decide(Principal.of(EMAIL, sender), item)
        )
        authentic = self._check(msg, sender, item, ref, item.version)
        if authentic.problems and allowed and not item.decided:
            older = await self._from_an_older_card(msg, sender, item, ref)
            if older is not None:
                return older
        problems = list(authentic.problems)
        if not allowed:
            await self._policy_refused(msg, allowed, item)
            problems.insert(0, f"{sender} is not an email approver of this skill")
        if problems:
            return await self._refuse(msg, sender, problems, item=item)
        try:
            top, command = read_reply(msg)
        except UnreadableMail as exc:
            return await self._refuse(msg, sender, str(exc), item=item)
        if item.box is Box.UNREAD:
            return await self._follow_up(msg, sender, item, top)
        if item.kind is ItemKind.QUESTION:
            return await self._answer(msg, sender, item, top)
        if command is None:
            await self._say(
                msg, sender, item, f"No decision was found in your reply; nothing changed. {HOW_TO}"
            )
            return "no decision found"
        if command.all and item.kind is ItemKind.TOOL:
            return await self._approve_all(msg, sender, item)
        decision: Decision
        if command.kind == "approve":
            decision = Approve()
        elif command.kind == "reject":
            decision = Reject(command.reason)
        else:
            args, errors = edit_arguments(item, command)
            if errors:
                await self._say(msg, sender, item, edit_errors(errors))
                return "edit refused: " + ", ".join(sorted(errors))
            decision = Edit(args)
        return await self._decide(msg, sender, item, decision)

    def _check(
        self, msg: EmailMessage, sender: str, item: Item, ref: str | None, version: int
    ) -> Authenticity:
        return check_reply(
            msg,
            sender=sender,
            token=self.key.reply_token(item.id, sender, version),
            ref=ref,
            bot_address=self.identity.address,
            trust=self.config.trust,
        )

    async def _from_an_older_card(
        self, msg: EmailMessage, sender: str, item: Item, ref: str | None
    ) -> str | None:
        """An authentic reply to a mail that showed the item before its last edit decides
        nothing: the sender is told, the refusal audited, and every copy shown again (the
        thread gets the item as it is now). None: the reply is not one of those."""
        for version in range(item.version - 1, 0, -1):
            if not self._check(msg, sender, item, ref, version).problems:
                why = (
                    "the call was changed after the mail you answered, so your reply decides "
                    "nothing; the newest mail in this thread shows it as it is now"
                )
                await self.store.show_again(item.id, now=self.clock())
                await self._say(msg, sender, item, f"Nothing changed: {why}.")
                await self.store.audit(
                    action="decision_refused",
                    actor=sender,
                    channel=EMAIL,
                    now=self.clock(),
                    run_id=item.run_id,
                    item_id=item.id,
                    detail={"why": f"the card changed (now version {item.version})"},
                )
                return "card changed"
        return None

    async def _answer(self, msg: EmailMessage, sender: str, item: Item, top: str) -> str:
        """A reply on a question's thread: its answer, or what is wrong with it."""
        reading = read_answer(item, top)
        if reading.errors:
            await self._say(msg, sender, item, answer_errors(item, reading.errors))
            return "answer refused: " + ", ".join(sorted(reading.errors))
        if reading.decision is None:
            await self._say(msg, sender, item, no_answer(item))
            return "no answer found"
        return await self._decide(msg, sender, item, reading.decision)

    async def _decide(self, msg: EmailMessage, sender: str, item: Item, decision: Decision) -> str:
        """Decide as `sender`, answering what the inbox refuses."""
        try:
            await self.inbox.decide(
                item.id, decision, by=Principal.of(EMAIL, sender), seen=card_digest(item)
            )
        except AlreadyDecided as exc:
            await self._say(msg, sender, item, f"Nothing changed: {outcome_text(exc.item)}")
            return "already decided"
        except AlreadyApproved as exc:
            await self._say(msg, sender, item, f"Not counted: {exc}.")
            return "approved already"
        except NotAllowed as exc:  # the skill's approvers changed since the check above
            return await self._refuse(msg, sender, str(exc), item=item)
        except InvalidArguments as exc:
            question = item.kind is ItemKind.QUESTION
            text = answer_errors(item, exc.errors) if question else edit_errors(exc.errors)
            await self._say(msg, sender, item, text)
            return ("answer" if question else "edit") + " refused: " + ", ".join(sorted(exc.errors))
        return f"decided: {decision.kind}"

    async def _approve_all(self, msg: EmailMessage, sender: str, item: Item) -> str:
        """`approve all` on an action's thread: each call of its run's waiting turn that the
        sender may approve alone, one decision each; the answer says what was left out."""
        batch = await approve_all(self.inbox, item.run_id, by=Principal.of(EMAIL, sender))
        await self._say(msg, sender, item, batch.summary())
        return f"approved {len(batch.approved)} of {len(batch.outcomes)}"

    async def _follow_up(self, msg: EmailMessage, sender: str, item: Item, top: str) -> str:
        text = top.strip()
        if not text:
            await self._say(
                msg, sender, item, "Your reply had no text above the quote; nothing was sent."
            )
            return "empty follow-up"
        try:
            await self.runs.follow_up(item.run_id, text, by=Principal.of(EMAIL, sender))
        except Conflict as exc:
            await self._say(msg, sender, item, f"The follow-up was not sent: {exc}.")
            return f"follow-up refused: {exc}"
        if item.status is ItemStatus.UNREAD:
            await self.inbox.mark_read(item.id)
        return "follow-up"

    # -- new runs ------------------------------------------------------------------------

    def _skill_of(self, subject: str) -> tuple[str | None, str]:
        title = _REPLY_PREFIX.sub("", subject).strip()
        tag = _SKILL_TAG.search(title)
        if tag:
            title = (title[: tag.start()] + title[tag.end() :]).strip(" :-")
            return tag.group(1).lower(), title
        return self.config.default_skill, title

    async def _start(self, msg: EmailMessage, sender: str) -> str:
        allowed = self.access.may_start(Principal.of(EMAIL, sender))
        if not allowed:
            await self._policy_refused(msg, allowed, None)
            return await self._refuse(msg, sender, f"{sender} may not start runs by mail")
        unverified = authenticated(
            msg, from_domain=split_address(sender)[1], trust=self.config.trust
        )
        if unverified:
            return await self._refuse(msg, sender, unverified)
        try:
            top = top_of_reply(body_text(msg))
        except UnreadableMail as exc:
            return await self._refuse(msg, sender, str(exc))
        skill, title = self._skill_of(str(msg.get("Subject", "")))
        if skill is None:
            names = ", ".join(s.name for s in self.skills.all()) or "none"
            return await self._refuse(
                msg, sender, f"no skill was named: put one in the subject as [skill] ({names})"
            )
        text = "\n\n".join(part for part in (title, top) if part)
        if not text:
            return await self._refuse(msg, sender, "the mail has no subject and no text")
        message_id = str(msg.get("Message-ID", "")).strip()
        try:
            run = await self.runs.start(
                skill,
                text,
                trigger="email",
                by=Principal.of(EMAIL, sender),
                idempotency_key=f"email:{message_id}" if message_id else None,
            )
        except (NotFound, Conflict) as exc:
            return await self._refuse(msg, sender, str(exc))
        targets = self.skills.get(skill).deliver.email
        where = (
            f"Its questions and results are mailed to {', '.join(targets)}."
            if targets
            else "Its questions and results are on the web inbox."
        )
        await self.answerer.answer(
            msg, to=sender, text=f"Started run {run.id} of skill {skill}. {where}"
        )
        return f"started: {run.id}"
