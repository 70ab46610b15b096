"""A provider error that echoes the API key is stored and shown without it.

Providers answer a bad key with the key in the message ("Incorrect API key provided: …").
That text used to become the run's error as it was: in the API's answer, the event log (and
so the traces), the Unread note and every channel's copy of it. Here a local provider
answers 401 echoing the Authorization header it got, plus a Slack-shaped token and the
server's own API token (as a misbehaving proxy might), and nothing the server keeps — its
database, its log — may hold any of them.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers.server import TOKEN
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise

#: Shaped like no well-known key: only redaction by value can catch it.
KEY = "pz-live-7Qm2Xc9Lw4Rt8Vb1"
SLACKISH = "xoxb-1111-2222-abcdefghijkl"


class _EchoingProvider(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        message = (
            f"Incorrect API key provided: {key}. Header was '{auth}'. "
            f"Also tried {SLACKISH} and {TOKEN}."
        )
        body = json.dumps(
            {"error": {"message": message, "type": "invalid_request_error", "code": "bad_key"}}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        thread.join()


async def test_a_provider_error_echoing_the_key_is_stored_and_shown_redacted(
    tmp_path: Path, provider: str
) -> None:
    skill = {"model_options": {"api_base": provider, "api_key_env": "PIZZA_TEST_PROVIDER_KEY"}}
    env = {"PIZZA_TEST_PROVIDER_KEY": KEY}
    async with Stack(tmp_path, script=send_then_summarise, skill=skill, env=env) as st:
        run = await st.start_run("test", "mail Ann the quote")

        failed = await st.wait_run(run["id"], {"failed"})
        note = await st.wait_item(run["id"], box="unread")

        assert "401" in failed["error"] and "[redacted]" in failed["error"]
        shown = json.dumps([failed, note])
        for secret in (KEY, SLACKISH, TOKEN):
            assert secret not in shown
        async with st.client() as c:
            page = await c.get(f"/api/runs/{run['id']}")
        assert KEY not in page.text
        st.server.stop()
        kept = [p for p in st.server.data_dir.rglob("*") if p.is_file()]
        assert kept
        for path in kept:
            data = path.read_bytes()
            assert KEY.encode() not in data, path
            assert SLACKISH.encode() not in data, path
