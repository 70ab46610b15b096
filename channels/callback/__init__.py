"""The callback channel: a request's decision, posted to the URL the requester gave.

A request with a `callback_url` gets one delivery on this channel. Delivering it sends
nothing (the request is still pending, or the dispatcher's update follows at once); when the
item is decided (or expires), the outbox updates the copy, and that update is a signed POST of
the request's state, retried with the outbox's backoff until the receiver answers 2xx (or the
outbox gives it up as a dead letter). Its signature is a callback's own, never a webhook's.
"""

from pizzabot.channels.callback.channel import LABEL, CallbackChannel, sign, signed_bytes

__all__ = ["LABEL", "CallbackChannel", "sign", "signed_bytes"]
