"""Installs the A2A face on the server: the agent card, the JSON-RPC endpoint and its token
gate. Nothing of the `a2a` SDK is imported unless a skill is named for A2A.

    GET  /.well-known/agent-card.json   the card (public: it says a bearer token is needed)
    POST /a2a                           JSON-RPC (SendMessage, GetTask, SubscribeToTask, …):
                                        401 without a token the server knows, before any byte
                                        of the body is read; the body limit is the server's
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pizzabot.agent.errors import UserError

if TYPE_CHECKING:
    from a2a.types import AgentCard
    from fastapi import FastAPI

    from pizzabot.agent.policy.principal import Principal
    from pizzabot.agent.requests import Requests

__all__ = ["A2A_PATH", "agent_card", "install"]

A2A_PATH = "/a2a"


def agent_card(*, skill: str, base_url: str, version: str) -> AgentCard:
    """The card another agent reads: one skill (asking a person), JSON-RPC at `/a2a`, a bearer
    token required."""
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    return AgentCard(
        name="Pizza Bot",
        description=(
            "Asks a person before an agent acts: a message becomes an approval card (a data "
            "part with tool and args) or a question (text); the task waits in input-required "
            "and completes with the person's decision."
        ),
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=base_url.rstrip("/") + A2A_PATH,
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description="A Pizza Bot token; an ask-scope one is enough",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id=skill,
                name=f"Ask a person ({skill})",
                description=(
                    "Send {tool, args, title?, schema?, risk?, description?, timeout?} as a "
                    "data part to ask for an approval of a tool call, or text to ask a "
                    "question. The decision arrives as the task's `decision` artifact."
                ),
                tags=["human-in-the-loop", "approval"],
                input_modes=["text/plain", "application/json"],
                output_modes=["application/json", "text/plain"],
            )
        ],
    )


def install(app: FastAPI, *, skill: str, base_url: str, owner_token: str) -> None:
    """Serve `skill` over A2A on `app` (the routes stay out of the API's OpenAPI document).
    Install it after the server's other guards, so that its token gate runs first."""
    try:
        from a2a.server.context import ServerCallContext
        from a2a.server.routes import (
            DefaultServerCallContextBuilder,
            create_agent_card_routes,
            create_jsonrpc_routes,
        )
    except ImportError:
        raise UserError(
            f"A2A is on (skill {skill!r}), but the a2a extra is not installed: "
            "pip install 'pizzabot[a2a]'"
        ) from None
    from starlette.requests import Request

    from pizzabot.agent.policy.tokens import principal_for
    from pizzabot.channels.a2a.agent import PRINCIPAL_KEY, PersonAgent
    from pizzabot.channels.http.deps import ApiDeps
    from pizzabot.channels.http.guard import PRINCIPAL, TokenGate

    def api() -> ApiDeps:
        deps = getattr(app.state, "api", None)
        if not isinstance(deps, ApiDeps):
            raise RuntimeError("the server is still starting")
        return deps

    def requests() -> Requests:
        return api().requests

    class WithPrincipal(DefaultServerCallContextBuilder):
        def build(self, request: Request) -> ServerCallContext:
            built = super().build(request)
            built.state[PRINCIPAL_KEY] = request.scope.get(PRINCIPAL)
            return built

    async def resolve(presented: str, channel: str) -> Principal | None:
        deps = getattr(app.state, "api", None)
        tokens = deps.tokens.tokens if isinstance(deps, ApiDeps) else None
        return await principal_for(
            presented, owner_secret=owner_token, tokens=tokens, channel=channel
        )

    card = agent_card(skill=skill, base_url=base_url, version=app.version)
    handler = PersonAgent(skill=skill, requests=requests)
    app.router.routes.extend(create_agent_card_routes(card))
    app.router.routes.extend(
        create_jsonrpc_routes(
            handler, rpc_url=A2A_PATH, context_builder=WithPrincipal(), enable_v0_3_compat=True
        )
    )
    app.add_middleware(TokenGate, resolve=resolve, prefix=A2A_PATH + "/", channel="a2a")
