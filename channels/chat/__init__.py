"""What Teams, Discord and Telegram share: a card's words apart from its markup (`card`), the
engine calls behind a click, a form or a message (`desk`), and edit forms read back the way
every channel reads them (`forms`).

Each platform's package (`pizzabot.channels.teams`, `pizzabot.channels.discord`,
`pizzabot.channels.telegram`) draws cards in its own format within its own limits, verifies
its own inbound requests, and delivers through the outbox; this package knows none of them.
What their routes and start-up share is `serving`.
"""

from pizzabot.channels.chat.card import Card, card_of, card_value, read_value
from pizzabot.channels.chat.desk import ChatDesk, ChatStore

__all__ = ["Card", "ChatDesk", "ChatStore", "card_of", "card_value", "read_value"]
