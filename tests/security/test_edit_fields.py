"""An edit may set only the fields the tool declares.

``pizzabot edit ITEM --set copy=3`` (a typo for ``copies``) used to be accepted: the item
became "edited" and the tool ran with ``copies`` unchanged and an unknown ``copy``. Now the
API answers 422 naming the field and the known ones, the CLI prints that, nothing is
decided, and the corrected edit runs the tool as meant.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.test_cli import cli
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise


async def test_an_edit_with_an_unknown_field_is_refused_on_the_api_and_the_cli(
    tmp_path: Path,
) -> None:
    async with Stack(tmp_path, script=send_then_summarise) as st:
        run = await st.start_run("test", "mail Ann the quote")
        item = await st.wait_item(run["id"])

        r = await st.decide(item["id"], "edit", args={**item["args"], "copy": 3})

        assert r.status_code == 422
        errors = r.json()["detail"]["errors"]
        assert list(errors) == ["copy"]
        assert errors["copy"].startswith("unknown field; the fields of this tool are: ")
        assert "copies" in errors["copy"] and "subject" in errors["copy"]

        typo = await asyncio.to_thread(cli, st, "edit", item["id"], "--set", "copy=3")

        assert typo.returncode == 1
        assert "422" in typo.stderr and "copy: unknown field" in typo.stderr
        assert "copies" in typo.stderr
        pending = await st.wait_item(run["id"])
        assert pending["status"] == "pending" and pending["final_args"] is None

        nested = await st.decide(item["id"], "edit", args={**item["args"], "to": {"x": 1}})
        assert nested.status_code == 422  # a wrong type is still the schema's to refuse

        fixed = await asyncio.to_thread(cli, st, "edit", item["id"], "--set", "copies=3")

        assert fixed.returncode == 0, fixed.stderr
        await st.wait_run(run["id"], {"done"})
        [call] = [c for c in st.tool_calls() if c["tool"] == "send_email"]
        assert call["args"]["copies"] == 3
