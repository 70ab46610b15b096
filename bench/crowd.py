"""The crowd of `bench.requests_path`: its requests made, and its agents holding long-polls.

Neither is done by the measuring process through the API: at 10,000 the server would spend
many minutes filing them over HTTP, and one Python process holding thousands of connections is
slower than the server it measures. So:

- `fill` (`python -m bench.crowd fill CROWD SKILL`, with the server's environment) makes the
  requests straight in the server's database before the server starts, with the server's own
  services (`pizzabot.bot.server.build`) and the transaction the API runs (`Requests.create`,
  as the owner through the API): the same runs, items, deliveries and audit records a
  `POST /api/requests` leaves;
- `Crowd` starts `python -m bench.crowd hold HOST PORT WAIT` processes (`Holders`), each holding the
  long-polls of the request ids it reads on stdin, on raw asyncio streams, one kept-alive
  connection per request, asking again each time one ends pending (as an agent does). Each says
  `sent` once every first poll is written, `again` once every first poll has been answered and
  asked again, and on SIGTERM prints what happened as one JSON line: polls answered pending,
  connections the server closed (each asked again on a new one), and any crowd request found
  decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Connections opened at once by one holder: a burst larger than the server's listen backlog
#: only makes the kernel drop connects and the holders wait on their retries.
_OPENING = 64
#: Long-polls per holder process (at most 4 processes).
_PER_HOLDER = 250
HOLDERS_MAX = 4
#: Seconds an agent of the crowd waits on one long-poll (the API's longest).
WAIT_S = 60
#: Requests made at once by the fill.
_FILLING = 8
TOKEN_ENV = "BENCH_CROWD_TOKEN"


def holders_for(crowd: int) -> int:
    """How many holder processes share a crowd."""
    return max(1, min(HOLDERS_MAX, -(-crowd // _PER_HOLDER)))


async def _fill(crowd: int, skill: str) -> None:
    """`crowd` pending requests in the database the environment's settings name (the
    server's), made as the API makes them; their ids on stdout, one a line."""
    from pizzabot.agent.policy.principal import Principal
    from pizzabot.bot.server import build, shutdown
    from pizzabot.bot.settings import Settings
    from pizzabot.channels.requests_wire import new_request
    from pizzabot.client.wire import RequestBody

    svc = await build(Settings(), token="", with_worker=False)
    owner = Principal.owner("api")

    async def one(k: int) -> None:
        body = RequestBody(skill=skill, title=f"crowd {k}", tool="bench.deploy", args={"k": k})
        state, _ = await svc.requests.create(new_request(body), by=owner)
        sys.stdout.write(state.id + "\n")

    try:
        # A few at once: one's Python work overlaps another's turn in the database's thread.
        for start in range(0, crowd, _FILLING):
            await asyncio.gather(*(one(k) for k in range(start, min(crowd, start + _FILLING))))
    finally:
        await shutdown(svc)
    sys.stdout.flush()


async def fill(env: dict[str, str], crowd: int, skill: str, log: Path) -> list[str]:
    """`python -m bench.crowd fill`, with the server's environment `env`, before the server
    starts: the ids of the `crowd` requests it made."""
    proc = await _start(("fill", str(crowd), skill), env, log, stdin=subprocess.DEVNULL)
    out, _ = await proc.communicate()
    ids = out.decode().split()
    if proc.returncode != 0 or len(ids) != crowd:
        raise RuntimeError(
            f"the crowd's fill exited {proc.returncode}, {len(ids)} made:\n{_tail(log)}"
        )
    return ids


async def _start(
    args: tuple[str, ...], env: dict[str, str], log: Path, *, stdin: int
) -> asyncio.subprocess.Process:
    """`python -m bench.crowd ARGS`, its stderr appended to `log`."""
    err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bench.crowd", *args),
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    finally:
        os.close(err)  # the child has its own copy


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


class Holders:
    """The agents of one holder process."""

    def __init__(self, host: str, port: int, token: str, wait: float) -> None:
        self.host, self.port, self.wait = host, port, wait
        self.head = f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        self.opening = asyncio.Semaphore(_OPENING)
        self.counts = {"held": 0, "pending_answers": 0, "closed_by_server": 0, "decided": 0}
        self.errors: list[str] = []
        #: Agents whose first poll has been answered (they ask again at once).
        self.first_answered = 0

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with self.opening:
            return await asyncio.open_connection(self.host, self.port)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(v)
            for k, _, v in (h.partition(":") for h in lines[1:])
            if k.lower() == "content-length"
        )
        return status, json.loads(await reader.readexactly(length))

    async def hold(self, request_id: str, sent: asyncio.Queue[None], spread: float) -> None:
        """One agent: a long-poll on `request_id`, again whenever it ends pending or its
        connection is closed, until it is cancelled. The poll after the first waits `spread`
        seconds: the crowd's first polls were all sent at once, and agents that started at
        different moments ask again at different moments, not in one wave a minute."""
        polls = iter([self.wait, spread])
        first, answered = True, False
        while True:
            try:
                reader, writer = await self._connect()
            except OSError as exc:
                self.errors.append(f"{request_id}: connect: {exc!r}")
                await asyncio.sleep(0.5)
                continue
            try:
                while True:
                    wait = next(polls, self.wait)
                    line = f"GET /api/requests/{request_id}?wait={wait:g} HTTP/1.1\r\n"
                    writer.write(line.encode() + self.head)
                    await writer.drain()
                    if first:
                        first = False
                        sent.put_nowait(None)
                    status, body = await self._answer(reader)
                    if not answered:
                        answered = True
                        self.first_answered += 1
                    if status != 200:
                        self.errors.append(f"{request_id}: HTTP {status} {body}")
                    elif body["status"] != "pending":
                        self.counts["decided"] += 1
                        return
                    self.counts["pending_answers"] += 1
            except (OSError, asyncio.IncompleteReadError):
                self.counts["closed_by_server"] += 1
            finally:
                writer.close()


async def _hold_main(host: str, port: int, token: str, wait: float) -> None:
    ids = [line.strip() for line in sys.stdin if line.strip()]
    holders = Holders(host, port, token, wait)
    sent: asyncio.Queue[None] = asyncio.Queue()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    # Their second polls end evenly over a minute: the crowd then asks again at a steady
    # rate, as many agents that began at different moments do.
    spreads = [round(wait * (k + 1) / len(ids), 3) for k in range(len(ids))]
    tasks = [
        asyncio.create_task(holders.hold(i, sent, d)) for i, d in zip(ids, spreads, strict=True)
    ]
    for _ in ids:
        await sent.get()
    holders.counts["held"] = len(ids)
    print("sent", flush=True)
    while holders.first_answered < len(ids) and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)
    print("again", flush=True)
    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({**holders.counts, "errors": holders.errors[:20]}), flush=True)


class Crowd:
    """The holder processes of one crowd, used as `async with`: each gets its share of the
    ids, and the block begins once every first long-poll is written. `report` is theirs,
    added up, once the block ends."""

    def __init__(
        self, host: str, port: int, token: str, ids: list[str], log: Path, *, wait: float = WAIT_S
    ) -> None:
        self.args = ("hold", host, str(port), f"{wait:g}")
        self.env = {**os.environ, TOKEN_ENV: token}
        self.ids, self.log = ids, log
        self.procs: list[asyncio.subprocess.Process] = []
        self.report: dict[str, Any] = {}

    async def __aenter__(self) -> Crowd:
        n = holders_for(len(self.ids))
        try:
            for k in range(n):
                proc = await _start(self.args, self.env, self.log, stdin=subprocess.PIPE)
                self.procs.append(proc)
                assert proc.stdin is not None
                proc.stdin.write("".join(i + "\n" for i in self.ids[k::n]).encode())
                proc.stdin.close()
            for proc in self.procs:
                assert proc.stdout is not None
                if await proc.stdout.readline() != b"sent\n":
                    raise RuntimeError(f"a crowd holder stopped:\n{_tail(self.log)}")
        except BaseException:
            await self._stop()
            raise
        return self

    async def asked_again(self, within: float) -> None:
        """Once every agent's first poll has ended and been asked again: the crowd's first
        polls all end within the moments they were parked in, a burst the server works
        through before the crowd asks at its steady rate. `within`: seconds it may take."""
        async with asyncio.timeout(within):
            for proc in self.procs:
                assert proc.stdout is not None
                if await proc.stdout.readline() != b"again\n":
                    raise RuntimeError(f"a crowd holder stopped:\n{_tail(self.log)}")

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        totals: dict[str, Any] = {"errors": []}
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                async with asyncio.timeout(30):  # not `wait_for`: it can lose a cancel on 3.11
                    out, _ = await proc.communicate()
            except TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            for line in out.decode().splitlines():
                if line.startswith("{"):
                    for key, value in json.loads(line).items():
                        totals[key] = totals.get(key, 0 if key != "errors" else []) + value
        self.procs = []
        self.report = totals


def main() -> None:
    match sys.argv[1:]:
        case ["fill", crowd, skill]:
            asyncio.run(_fill(int(crowd), skill))
        case ["hold", host, port, wait]:
            # The token comes by the environment, never on a command line others can read.
            asyncio.run(_hold_main(host, int(port), os.environ[TOKEN_ENV], float(wait)))
        case _:
            raise SystemExit("usage: python -m bench.crowd fill CROWD SKILL | hold HOST PORT WAIT")


if __name__ == "__main__":
    main()
