"""An OpenTelemetry collector's OTLP/HTTP logs and traces endpoints, on a real socket: it
decodes each protobuf request as a collector does and keeps the log records and the spans, or
refuses them all."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

PATHS = frozenset({"/v1/logs", "/v1/traces"})


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def _plain(v: AnyValue) -> Any:
    """A span attribute's value as Python has it: lists for arrays, dicts for key lists."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_plain(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return _value(v)


def _attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {a.key: _plain(a.value) for a in kvs}


def _spans(rs: ResourceSpans) -> Iterator[dict[str, Any]]:
    resource = _attributes(rs.resource.attributes)
    for ss in rs.scope_spans:
        for s in ss.spans:
            yield {
                "name": s.name,
                "kind": s.kind,
                "trace_id": s.trace_id.hex(),
                "span_id": s.span_id.hex(),
                "parent_span_id": s.parent_span_id.hex(),
                "start_time_unix_nano": s.start_time_unix_nano,
                "end_time_unix_nano": s.end_time_unix_nano,
                "attributes": _attributes(s.attributes),
                "events": [
                    {"name": e.name, "attributes": _attributes(e.attributes)} for e in s.events
                ],
                "status": {"code": s.status.code, "message": s.status.message},
                "scope": ss.scope.name,
                "resource": resource,
            }


@dataclass
class Collector:
    """What arrived: one dict per log record (body, attributes, scope, resource) and one per
    span (name, ids in hex, attributes, events, status, scope, resource)."""

    url: str
    refuse: bool = False
    records: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0


@contextmanager
def collector(*, refuse: bool = False) -> Iterator[Collector]:
    got = Collector(url="", refuse=refuse)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.requests += 1
            if self.path not in PATHS or got.refuse:
                self.send_response(404 if self.path not in PATHS else 400)
                self.end_headers()
                return
            if self.path == "/v1/traces":
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                    got.spans.extend(_spans(rs))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
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
