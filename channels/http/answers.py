"""What the API answers with, made from the engine's nouns: the response models of
`pizzabot.channels.http.schema` and nothing beside them, so `/openapi.json` and the server cannot say
two things.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.events import Event
from pizzabot.agent.model import AuditEntry, Item, ItemStatus, Run, Undo
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.timeline import entries
from pizzabot.channels.http import schema as out

__all__ = ["audit_out", "item_out", "run_detail", "run_out", "skills_out"]


def _at(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def run_out(run: Run) -> out.RunOut:
    return out.RunOut(
        id=run.id,
        skill=run.skill,
        status=str(run.status),
        input=run.input,
        trigger=run.trigger,
        created_at=run.created_at.isoformat(),
        updated_at=run.updated_at.isoformat(),
        started_at=_at(run.started_at),
        finished_at=_at(run.finished_at),
        result=run.result,
        error=run.error,
        usage=out.Usage(**asdict(run.usage)),
        killed_by=run.killed_by,
    )


def run_detail(run: Run, events: list[Event]) -> out.RunDetail:
    shown = [
        out.EventOut(seq=e.seq, kind=str(e.kind), at=e.at.isoformat(), data=e.data) for e in events
    ]
    worded = [
        out.TimelineEntry(
            seq=en.seq,
            tone=en.tone,
            title=en.title,
            at=en.at.isoformat(),
            offset=en.offset,
            facts=list(en.facts),
            blocks=[out.TimelineBlock(label=b.label, text=b.text, code=b.code) for b in en.blocks],
            item_id=en.item_id,
            failed=en.failed,
        )
        for en in entries(events)
    ]
    return out.RunDetail(**run_out(run).model_dump(), events=shown, timeline=worded)


def item_out(item: Item) -> out.ItemOut:
    _, server = item.tool_place
    return out.ItemOut(
        id=item.id,
        run_id=item.run_id,
        skill=item.skill,
        box=str(item.box),
        kind=str(item.kind),
        status=str(item.status),
        title=item.title,
        body=item.body,
        created_at=item.created_at.isoformat(),
        tool=item.tool,
        server=server or None,
        args=item.args,
        schema=item.schema,
        risk=out.Risk(**item.risk.as_dict()),
        decided_by=item.decided_by,
        decided_via=item.decided_via,
        decided_at=_at(item.decided_at),
        final_args=item.final_args,
        reason=item.reason,
        read_at=_at(item.read_at),
        grants=list(item.risk.grants) if item.status is ItemStatus.PENDING else [],
        version=item.version,
        digest=card_digest(item),
        requested_by=item.requested_by,
        requested=item.requested,
        undo=_undo_out(item.undo),
    )


def _undo_out(undo: Undo | None) -> out.UndoOut | None:
    if undo is None:
        return None
    said = {"by": undo.by, "via": undo.via, "at": _at(undo.at), "outcome": undo.outcome}
    return out.UndoOut(tool=undo.tool, args=undo.args, state=undo.state, **said)


def audit_out(entry: AuditEntry) -> out.AuditOut:
    return out.AuditOut(
        id=entry.id,
        at=entry.at.isoformat(),
        action=entry.action,
        actor=entry.actor,
        channel=entry.channel,
        run_id=entry.run_id,
        item_id=entry.item_id,
        detail=entry.detail,
    )


def skills_out(skills: SkillBook, *, watch_seconds: float) -> out.SkillList:
    """The skills loaded, and the files refused (each problem with its line)."""
    return out.SkillList(
        items=[
            out.SkillOut(
                name=s.name,
                description=s.description,
                model=s.model,
                servers=sorted(s.mcp_servers),
            )
            for s in skills.all()
        ],
        errors=[
            out.SkillError(
                path=r.error.path,
                line=r.error.line,
                message=r.error.message,
                name=r.error.name,
                problems=[
                    out.SkillProblem(line=p.line, message=p.message) for p in r.error.problems
                ],
                kept=r.kept,
            )
            for r in skills.refused()
        ],
        watch_seconds=watch_seconds,
    )
