"""A request's state as a coding agent's allow or deny, in words a person and the agent read.

The command hook (`pizzabot hook HOST`) and the server's hook endpoint answer alike: rules
that decided say no one was asked; a person's decision names them and where they decided;
the kill switch, an expired card and anything unknown deny, saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pizzabot.client.hooks.hosts import Verdict

if TYPE_CHECKING:  # a state is handed in; the models load with the client that read it
    from pizzabot.client.wire import RequestState

__all__ = ["margin", "verdict_of"]


def margin(timeout: float) -> float:
    """How much sooner than the host's time-out the hook answers: enough to print a deny
    before the host kills it, at most a minute."""
    return min(60.0, max(5.0, timeout * 0.1))


def verdict_of(state: RequestState, wait: float) -> Verdict:
    """The host's allow or deny for a request's state."""
    who = state.decided_by or "a person"
    via = f" via {state.via}" if state.via else ""
    if state.via == "policy":  # the skill's rules decided: no one was asked
        if state.status == "approved":
            return Verdict(True, f"Allowed by {who} in Pizza Bot (no one was asked)")
        if state.status == "rejected":
            return Verdict(False, f"Denied by {who} in Pizza Bot: {state.reason or 'not allowed'}")
    match state.status:
        case "approved":
            return Verdict(True, f"Approved by {who}{via} in Pizza Bot")
        case "edited":
            return Verdict(True, f"Edited by {who}{via} in Pizza Bot", args=dict(state.args or {}))
        case "rejected":
            return Verdict(False, f"Rejected by {who}{via}: {state.reason or 'no reason given'}")
        case "halted":
            return Verdict(
                False,
                f"Pizza Bot's kill switch is on ({state.reason or 'no reason given'}): "
                "nothing may run until it is lifted.",
            )
        case "expired" | "pending":
            return Verdict(
                False,
                f"No one decided in Pizza Bot within {wait:.0f} s, so the call was not run; "
                "do not retry it unless asked.",
            )
    return Verdict(False, f"Pizza Bot answered {state.status!r}, so the call is blocked.")
