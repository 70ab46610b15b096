"""The A2A methods a person answers, over the requests of one inbox-only skill.

The SDK's default handler keeps tasks in a task store of its own and runs an executor in the
server's memory; here a task *is* a request, so the store is Pizza Bot's database and a
restart, another server process or a decision on Slack changes the task at once:

- `SendMessage` files the request (the message's ids make its idempotency key) and answers
  the task: `input-required` while a person is asked, `completed` when a rule decided it.
- `SendStreamingMessage` answers the same task as a stream, which ends there (input-required
  is where a stream stops in A2A).
- `GetTask` reads the request (an `ask` token sees only its own).
- `SubscribeToTask` sends the task, then waits on the decision and sends the decision
  artifact and the completed status.
- Cancel, push notifications, listing and the extended card are not offered.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, NoReturn

from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)

from pizzabot.agent.errors import Conflict, InvalidArguments, NotAllowed, NotFound
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.a2a.tasks import (
    MessageRefused,
    body_of,
    context_of,
    decision_artifact,
    key_for,
    task_of,
)
from pizzabot.channels.requests_wire import new_request, wire_state
from pizzabot.client.wire import RequestState

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events.event_queue import Event

    from pizzabot.agent.requests import Requests

__all__ = ["PRINCIPAL_KEY", "PersonAgent"]

#: Where the call's context carries who is calling (set from the token gate's principal).
PRINCIPAL_KEY = "pizzabot.principal"
#: Seconds one wait on the decision lasts before it is asked again (a subscriber's stream).
_WAIT = 55.0


def _who(context: ServerCallContext) -> Principal:
    who = context.state.get(PRINCIPAL_KEY)
    if not isinstance(who, Principal):  # the token gate lets nobody else through
        raise InvalidRequestError(message="this call carries no token the server knows")
    return who


def _refused(exc: Exception) -> NoReturn:
    """An engine refusal as the A2A error that says the same."""
    match exc:
        case NotFound():
            raise TaskNotFoundError(message=str(exc)) from None
        case InvalidArguments():
            detail = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
            raise InvalidParamsError(message=detail) from None
        case Conflict() | NotAllowed() | MessageRefused():
            raise InvalidParamsError(message=str(exc)) from None
    raise exc


class PersonAgent(RequestHandler):
    """Files each message as a request of `skill`; `requests` is found when the first call
    comes (the server builds it after the routes)."""

    def __init__(self, *, skill: str, requests: Callable[[], Requests]) -> None:
        self._skill = skill
        self._requests = requests

    async def _state(
        self, request_id: str, who: Principal, *, wait: float = 0
    ) -> tuple[RequestState, str]:
        """The request as it is sent, and its task's context id."""
        requests = self._requests()
        try:
            if wait > 0:
                state = await requests.wait(request_id, wait, by=who)
            else:
                state = await requests.get(request_id, by=who)
            stored = await requests.ctx.store.get_request(request_id)
        except (NotFound, NotAllowed) as exc:
            _refused(exc)
        return wire_state(state), context_of(stored.idempotency_key, state.id)

    async def _task(self, request_id: str, who: Principal) -> Task:
        state, context_id = await self._state(request_id, who)
        return task_of(state, context_id=context_id)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        who = _who(context)
        message = params.message
        if message.task_id:
            # The person answers on Pizza Bot's cards; a message on the task only reads it.
            return await self._task(message.task_id, who)
        try:
            key, context_id = key_for(message)
            body = body_of(message, skill=self._skill)
            state, _ = await self._requests().create(new_request(body), by=who, idempotency_key=key)
        except (MessageRefused, InvalidArguments, Conflict, NotAllowed, NotFound) as exc:
            _refused(exc)
        return task_of(wire_state(state), context_id=context_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        yield await self.on_message_send(params, context)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._task(params.id, _who(context))

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        who = _who(context)
        state, context_id = await self._state(params.id, who)
        yield task_of(state, context_id=context_id)
        while state.pending:
            state, _ = await self._state(params.id, who, wait=_WAIT)
        if state.status == "halted":
            return  # held by the kill switch: the subscriber asks again later
        task = task_of(state, context_id=context_id)
        yield TaskArtifactUpdateEvent(
            task_id=task.id, context_id=context_id, artifact=decision_artifact(state)
        )
        yield TaskStatusUpdateEvent(task_id=task.id, context_id=context_id, status=task.status)

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        raise TaskNotCancelableError(message="a person decides this task; it cannot be cancelled")

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="tasks are not listed; get one by its id")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(message="there is no extended card")
