"""Slack: inbox items as messages with buttons, edits in a modal, runs started from Slack,
and each person's inbox in the app's Home tab.

`SlackChannel` delivers and updates (the outbox's side); `build_app` makes the Bolt app whose
listeners hand clicks, modals, `/pizza`, DMs and mentions to `SlackInbound`, which turns them
into engine calls; `HomeTabs` publishes the Home tab; `blocks` and `home` render.
"""

from pizzabot.channels.slack.app import build_app
from pizzabot.channels.slack.channel import SlackChannel
from pizzabot.channels.slack.home import HomeTabs
from pizzabot.channels.slack.inbound import SlackInbound

__all__ = ["HomeTabs", "SlackChannel", "SlackInbound", "build_app"]
