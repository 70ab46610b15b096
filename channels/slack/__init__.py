"""Slack: inbox items as messages with buttons, edits in a modal, runs started from Slack.

`SlackChannel` delivers and updates (the outbox's side); `build_app` makes the Bolt app that
turns clicks, modals, `/pizza`, DMs and mentions into engine calls; `blocks` renders.
"""

from channels.slack.app import SlackInbound, build_app
from channels.slack.channel import SlackChannel

__all__ = ["SlackChannel", "SlackInbound", "build_app"]
