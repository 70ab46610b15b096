"""An OpenTelemetry collector's OTLP/HTTP logs endpoint, on a real socket: it decodes each
protobuf request as a collector does and keeps the log records, or refuses them all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


@dataclass
class Collector:
    """What arrived: one dict per log record (body, attributes, scope, resource)."""

    url: str
    refuse: bool = False
    records: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0


@contextmanager
def collector(*, refuse: bool = False) -> Iterator[Collector]:
    got = Collector(url="", refuse=refuse)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.requests += 1
            if self.path != "/v1/logs" or got.refuse:
                self.send_response(404 if self.path != "/v1/logs" else 400)
                self.end_headers()
                return
            request = ExportLogsServiceRequest.FromString(body)
            for rl in request.resource_logs:
                resource = {a.key: _value(a.value) for a in rl.resource.attributes}
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        got.records.append(
                            {
                                "body": _value(r.body),
                                "event_name": r.event_name,
                                "time_unix_nano": r.time_unix_nano,
                                "attributes": {a.key: _value(a.value) for a in r.attributes},
                                "scope": sl.scope.name,
                                "resource": resource,
                            }
                        )
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
