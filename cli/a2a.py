"""`pizzabot a2a watch URL`: a remote A2A agent's questions, answered from the inbox.

It starts a task on the agent at URL (`--say TEXT`) or follows one already started
(`--task ID`), and each time the task waits in `input-required` or `auth-required` it puts
the agent's question on a card in the inbox (`--skill`, default `approvals`) and sends the
answer back on the task (`pizzabot.client.a2a.follow`). When the task ends it prints it as
one line of JSON (A2A's own shape):

    0  completed
    1  failed, cancelled, rejected (a question declined or expired cancels the task)
    2  the agent or Pizza Bot could not be reached, or refused
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from pizzabot.cli.ask import TokenOpt, UrlOpt, warn_if_owner
from pizzabot.cli.client import CliError, connect
from pizzabot.cli.typer_app import App

if TYPE_CHECKING:
    from a2a.types import Task

__all__ = ["a2a_app"]

a2a_app = App(help="Remote A2A agents whose questions a person answers here.", no_args_is_help=True)


@a2a_app.command("watch")
def watch(
    agent_url: Annotated[str, typer.Argument(help="The remote agent's base URL (its card)")],
    say: Annotated[str | None, typer.Option("--say", help="Start a task with this text")] = None,
    task_id: Annotated[str | None, typer.Option("--task", help="Follow this task")] = None,
    skill: Annotated[str, typer.Option("--skill", help="The inbox-only skill")] = "approvals",
    bearer_env: Annotated[
        str | None,
        typer.Option("--bearer-env", help="An environment variable holding the agent's token"),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds each question waits for a person")
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Answer a remote A2A agent's questions from the inbox until its task ends."""
    if (say is None) == (task_id is None):
        raise CliError("give --say TEXT (a new task) or --task ID (one already started)", code=2)
    if not agent_url.startswith(("http://", "https://")):
        raise CliError("the agent's URL must start with http:// or https://", code=2)
    bearer = os.environ.get(bearer_env) if bearer_env else None
    if bearer_env and not bearer:
        raise CliError(f"{bearer_env} is not set", code=2)
    api = connect(url, token)
    warn_if_owner(api)
    try:
        task = asyncio.run(
            _watch(api.url, api.token, agent_url, say, task_id, skill, bearer, timeout)
        )
    except ImportError:
        raise CliError("A2A needs the a2a extra: pip install 'pizzabot[a2a]'", code=2) from None
    except Exception as exc:
        raise CliError(f"{type(exc).__name__}: {exc}", code=2) from None
    from a2a.types import TaskState
    from google.protobuf.json_format import MessageToDict

    sys.stdout.write(json.dumps(MessageToDict(task), ensure_ascii=False) + "\n")
    raise typer.Exit(0 if task.status.state == TaskState.TASK_STATE_COMPLETED else 1)


async def _watch(
    server: str,
    token: str,
    agent_url: str,
    say: str | None,
    task_id: str | None,
    skill: str,
    bearer: str | None,
    timeout: float | None,
) -> Task:
    from a2a.types import GetTaskRequest

    from pizzabot.client import AsyncInbox
    from pizzabot.client.a2a import capped_http, connect, follow, start

    async with capped_http(bearer=bearer) as http, AsyncInbox(server, token) as inbox:
        client, card = await connect(agent_url, http)
        name = card.name or "A2A agent"
        if say is not None:
            task = await start(client, say, message_id=uuid.uuid4().hex)
        else:
            assert task_id is not None
            task = await client.get_task(GetTaskRequest(id=task_id))
        return await follow(inbox, skill, client, task, agent=name[:80], timeout=timeout)
