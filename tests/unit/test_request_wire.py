"""A request's shape and state are written once, on the wire (`pizzabot.client.wire`): the
engine's own nouns carry the same fields under the same names, so the one translation
(`pizzabot.channels.requests_wire`) can never drop one, and the API's OpenAPI document is the
wire's models themselves."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from pizzabot.agent.request_state import NewRequest
from pizzabot.agent.request_state import RequestState as EngineState
from pizzabot.channels.http import requests_api
from pizzabot.client.wire import RequestBody, RequestState

#: On the wire only: its version, and what a reader learns from a POST's status code.
WIRE_ONLY = {"wire", "created"}


def _wire_fields(model: type) -> set[str]:
    return {name.rstrip("_") for name in model.model_fields}  # type: ignore[attr-defined]


def test_the_engine_asks_what_the_wire_carries() -> None:
    engine = {f.name for f in dataclasses.fields(NewRequest)}
    assert engine == _wire_fields(RequestBody) - WIRE_ONLY


def test_the_engine_answers_what_the_wire_carries() -> None:
    engine = {f.name for f in dataclasses.fields(EngineState)} - {"run_id", "skill"}
    assert engine == _wire_fields(RequestState) - WIRE_ONLY


def test_the_api_takes_and_answers_with_the_wire_models() -> None:
    app = FastAPI()
    app.include_router(requests_api.router)
    paths = app.openapi()["paths"]
    create, get = paths["/api/requests"]["post"], paths["/api/requests/{request_id}"]["get"]

    def ref(part: dict) -> str:  # type: ignore[type-arg]
        return str(part["content"]["application/json"]["schema"]["$ref"]).rsplit("/", 1)[1]

    assert ref(create["requestBody"]) == RequestBody.__name__
    assert ref(create["responses"]["201"]) == ref(create["responses"]["200"])
    assert ref(create["responses"]["201"]) == ref(get["responses"]["200"])
    assert ref(get["responses"]["200"]).startswith(RequestState.__name__)


def test_a_preview_is_part_of_the_request_and_goes_with_a_tool_only() -> None:
    plain = NewRequest(skill="deploys", title="Deploy", tool="deploy.prod", args={"env": "prod"})
    previewed = dataclasses.replace(plain, preview="Plan: 2 to change.")
    other = dataclasses.replace(plain, preview="Plan: 3 to change.")
    # Another preview under the same Idempotency-Key is another request (409).
    assert len({plain.body_hash(), previewed.body_hash(), other.body_hash()}) == 3
    # A request without one keeps the hash it is stored with: no field it never sent.
    fields = dataclasses.asdict(plain)
    del fields["preview"]
    canonical = json.dumps(
        fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    assert plain.body_hash() == hashlib.sha256(canonical.encode()).hexdigest()
    with pytest.raises(ValidationError, match="a question has no call to preview"):
        RequestBody(skill="deploys", title="Which day?", question="Which day?", preview="p")
    too_long = {"skill": "deploys", "title": "t", "tool": "x", "preview": "p" * 20_001}
    with pytest.raises(ValidationError, match="at most 20000 characters"):
        RequestBody.model_validate(too_long)
