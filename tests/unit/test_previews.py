"""Previews in pieces: the diff the files server shows for a write (it reads, never writes),
a dry run's text made safe to show (capped, control characters out, secrets redacted), a
failure that says so, the skill's `preview:` entry, and the card's digest that covers it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.errors import SkillError
from pizzabot.agent.model import (
    PREVIEW_LABEL,
    REQUEST_CALL,
    Box,
    Item,
    ItemKind,
    ItemStatus,
    Preview,
    Risk,
)
from pizzabot.agent.preview import (
    FROM_THE_AGENT,
    PREVIEW_CAP,
    Previewer,
    edited_preview,
    preview_tool,
    requested_preview,
)
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import Skill, parse_skill
from pizzabot.agent.tools import AskFn, ToolOutcome, ToolSpec
from pizzabot.channels.chat.card import card_of
from pizzabot.channels.email.compose import outcome_text
from pizzabot.channels.email.previews import preview_lines
from pizzabot.channels.slack.previews import preview_blocks
from pizzabot.tools.files import FolderGrants, PathRefused
from pizzabot.tools.files.diffs import write_diff

HEAD = "name: x\ninstructions: hi\nmodel: openai/gpt-4o\n"


def skill(tail: str = "") -> Skill:
    return parse_skill(HEAD + tail, "skills/x.yaml")


PAY = (
    "mcp_servers:\n  pay: {command: pay}\ntools:\n"
    "  pay.transfer: {policy: ask, preview: pay.transfer_dry_run, preview_timeout: 1s}\n"
)


@pytest.fixture
def grants(tmp_path: Path) -> FolderGrants:
    (tmp_path / "drafts").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "drafts" / "a.md").write_text("one\ntwo\nthree\n")
    (tmp_path / "notes" / "n.md").write_text("keep\n")
    return FolderGrants([(tmp_path / "drafts", True), (tmp_path / "notes", False)])


def test_the_diff_of_a_write_shows_the_change_and_writes_nothing(
    grants: FolderGrants, tmp_path: Path
) -> None:
    out = write_diff(grants, "drafts/a.md", "one\n2\nthree\n")
    assert out.splitlines()[:3] == [
        "changes to drafts/a.md (12 bytes after the write)",
        "--- a/drafts/a.md",
        "+++ b/drafts/a.md",
    ]
    assert "-two\n+2\n" in out
    assert (tmp_path / "drafts" / "a.md").read_text() == "one\ntwo\nthree\n"


def test_the_diff_of_a_new_file_and_of_no_change(grants: FolderGrants, tmp_path: Path) -> None:
    out = write_diff(grants, "drafts/new/b.md", "hello\n")
    assert out.startswith("new file drafts/new/b.md") and "--- /dev/null" in out
    assert "+hello\n" in out and not (tmp_path / "drafts" / "new").exists()
    same = write_diff(grants, "drafts/a.md", "one\ntwo\nthree\n")
    assert same == "drafts/a.md: no change (the file already holds this content)"


def test_the_diff_refuses_what_the_write_would_refuse(grants: FolderGrants, tmp_path: Path) -> None:
    with pytest.raises(PathRefused, match="read-only"):
        write_diff(grants, "notes/n.md", "changed")
    with pytest.raises(PathRefused, match="outside the granted folders"):
        write_diff(grants, "drafts/../../etc/passwd", "x")
    (tmp_path / "drafts" / "link.md").symlink_to(tmp_path / "notes" / "n.md")
    with pytest.raises(PathRefused):
        write_diff(grants, "drafts/link.md", "x")


class FakeTools:
    """Answers every call with `answer` (or raises it), recording what was called."""

    def __init__(self, answer: ToolOutcome | BaseException, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.calls: list[tuple[str, str, dict[str, Any], AskFn | None]] = []

    async def list_tools(self, skill: Skill) -> Sequence[ToolSpec]:
        return []

    async def call(
        self,
        skill: Skill,
        server: str,
        tool: str,
        args: dict[str, Any],
        *,
        ask: AskFn | None = None,
    ) -> ToolOutcome:
        self.calls.append((server, tool, args, ask))
        await asyncio.sleep(self.delay)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    async def aclose(self) -> None:
        return None


async def test_a_dry_run_is_called_with_the_arguments_and_made_safe_to_show() -> None:
    text = "would pay\r\n\x1b[31mred\x1b[0m \u202eevil sk-live-XYZ123\n" + "x" * 3000
    tools = FakeTools(ToolOutcome(text, False, 1.0))
    redact = Redactor.of("sk-live-XYZ123")
    previewer = Previewer(tools, redact=redact.values_only, redact_error=redact)
    made = await previewer.preview(skill(PAY), "pay.transfer", {"amount": 5})
    assert tools.calls == [("pay", "transfer_dry_run", {"amount": 5}, None)]  # never asks
    assert made is not None and made.by == "pay.transfer_dry_run" and not made.failed
    assert made.text.startswith("would pay\n[31mred[0m evil ")
    assert "sk-live-XYZ123" not in made.text and "\x1b" not in made.text
    assert len(made.text) < PREVIEW_CAP + 60 and made.text.endswith("more characters]")


@pytest.mark.parametrize(
    ("answer", "delay", "says"),
    [
        (ToolOutcome("ledger closed", True, 1.0), 0.0, "pay.transfer_dry_run failed (ledger"),
        (ConnectionError("gone"), 0.0, "failed (ConnectionError: gone)"),
        (ToolOutcome("late", False, 1.0), 5.0, "did not answer within 1s"),
    ],
)
async def test_a_preview_that_fails_says_so(
    answer: ToolOutcome | BaseException, delay: float, says: str
) -> None:
    made = await Previewer(FakeTools(answer, delay)).preview(skill(PAY), "pay.transfer", {})
    assert made is not None and made.failed and says in made.text


def test_which_tool_previews_a_call() -> None:
    assert preview_tool(skill(PAY), "pay.transfer") == "pay.transfer_dry_run"
    assert preview_tool(skill(PAY), "pay.refund") is None
    # The files server's own preview of a write, where the skill grants folders.
    folders = skill("folders: [{path: /tmp, write: true}]\n")
    assert preview_tool(folders, "files.write_file") == "files.preview_write"
    assert preview_tool(skill(), "files.write_file") is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{policy: ask, preview: transfer_dry_run}", "preview: String should match"),
        ("{policy: ask, preview: 'pay.*'}", "preview: String should match"),
        ("{policy: ask, preview: pay.t, preview_timeout: 10m}", "between 1s and 2m"),
        ("{policy: ask, preview: bank.t}", "bank.t is on no server of this skill"),
    ],
)
def test_a_bad_preview_entry_is_refused(entry: str, says: str) -> None:
    with pytest.raises(SkillError, match=says) as caught:
        skill(f"mcp_servers:\n  pay: {{command: pay}}\ntools:\n  pay.transfer: {entry}\n")
    assert caught.value.line == 7


def _item(risk: Risk) -> Item:
    return Item(
        id="i1",
        run_id="r1",
        skill="x",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        tool="pay.transfer",
        args={"amount": 5},
        risk=risk,
    )


def test_the_digest_covers_the_preview_and_it_survives_storage() -> None:
    plain = _item(Risk())
    shown = _item(Risk(preview=Preview("would pay 5", "pay.transfer_dry_run")))
    other = _item(Risk(preview=Preview("would pay 6", "pay.transfer_dry_run")))
    assert len({card_digest(plain), card_digest(shown), card_digest(other)}) == 3
    stored = Risk(**shown.risk.as_dict())
    assert stored == shown.risk and card_digest(replace(shown, risk=stored)) == card_digest(shown)


async def test_an_edit_never_keeps_the_old_preview() -> None:
    item = _item(Risk(preview=Preview("would pay 5", "pay.transfer_dry_run")))
    answer = ToolOutcome("would pay 7", False, 1.0)
    made = await edited_preview(Previewer(FakeTools(answer)), skill(PAY), item, {"amount": 7})
    assert made == Preview("would pay 7", "pay.transfer_dry_run")
    # Where nothing can make it anew, the card says so instead of showing the old one.
    none = await edited_preview(None, skill(PAY), item, {"amount": 7})
    assert none is not None and none.failed and "no preview of the edited arguments" in none.text


def test_a_count_still_open_mails_the_edited_preview_with_the_arguments() -> None:
    # The notice of a new count carries a reply token for the card as it is now: it shows
    # what that card shows, preview included.
    preview = Preview("would pay 7 <b>now</b>", "pay.transfer_dry_run")
    item = _item(Risk(approvals_required=2, approved=("alice via Slack",), preview=preview))
    said = outcome_text(item)
    assert said.startswith("Waiting for more approvals (1 of 2 approved: alice via Slack).")
    assert f"{PREVIEW_LABEL} (by pay.transfer_dry_run):\n  | would pay 7 <b>now</b>" in said


def test_chat_cards_show_the_start_of_the_preview() -> None:
    # Teams, Discord and Telegram share this card; the whole preview is on the web page.
    preview = Preview("would pay 5 EUR to Ann", "pay.transfer_dry_run")
    card = card_of(_item(Risk(preview=preview)), base_url="http://pizza.example")
    assert f"🔍 {PREVIEW_LABEL} (by pay.transfer_dry_run): would pay 5 EUR to Ann" in card.facts
    assert not any(PREVIEW_LABEL in f for f in card_of(_item(Risk()), base_url="").facts)


def test_a_requests_preview_is_cleaned_capped_and_marked_as_the_agents() -> None:
    made = requested_preview("would deploy\x1b[31m v2\r\n\u202eto prod\n", "token:deploy-agent")
    assert made == Preview("would deploy[31m v2\nto prod", f"token:deploy-agent ({FROM_THE_AGENT})")
    long = requested_preview("x" * (PREVIEW_CAP + 50), "token:deploy-agent")
    assert long.text.endswith("[cut: 50 more characters]") and not long.failed
    assert requested_preview("\x00\x01", "owner").text == "(the agent's preview said nothing)"
    # Every card says who wrote it: the chat card as well as the web page, Slack and mail.
    card = card_of(_item(Risk(preview=made)), base_url="http://pizza.example")
    assert any(FROM_THE_AGENT in fact and "would deploy" in fact for fact in card.facts)
    said = f"{PREVIEW_LABEL} (by token:deploy-agent ({FROM_THE_AGENT}))"
    assert preview_lines(_item(Risk(preview=made)))[1:3] == [f"{said}:", "  | would deploy[31m v2"]
    [block] = preview_blocks(_item(Risk(preview=made)), url="http://pizza.example/items/i1")
    assert f"(by `token:deploy-agent ({FROM_THE_AGENT})`)" in block["text"]["text"]


async def test_an_edit_of_a_request_drops_the_agents_preview() -> None:
    made = requested_preview("would pay 5", "token:billing")
    item = replace(_item(Risk(preview=made)), requested_by="token:billing", call_id=REQUEST_CALL)
    assert item.requested
    answer = ToolOutcome("would pay 7", False, 1.0)
    assert (
        await edited_preview(Previewer(FakeTools(answer)), skill(PAY), item, {"amount": 7}) is None
    )
