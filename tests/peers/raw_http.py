"""One HTTP exchange over a bare socket, for tests of what a server does before it reads a body.

An HTTP client library sends the whole body before it reads the answer; a server that refuses
a body early (401, 413) and closes may then reset the connection under the client, and the
answer is lost. Here only the head and the start of a body are sent, and the answer is read
until the server closes.
"""

from __future__ import annotations

import asyncio

#: How long an answer may take on a busy machine.
ANSWER_WITHIN = 30.0


async def exchange(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send a request's head (`\\n`-separated lines) and the start of a body, then read the
    whole answer until the server closes the connection: (status, raw answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        await writer.drain()
        async with asyncio.timeout(ANSWER_WITHIN):
            raw = await reader.read(-1)
    finally:
        writer.close()
    return int(raw.split(b" ", 2)[1]), raw
