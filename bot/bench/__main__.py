"""`python -m bot.bench`: the same command as `pizzabot bench`, so the two never drift apart."""

import sys

from bot.cli import app

app(args=["bench", *sys.argv[1:]], prog_name="python -m bot.bench")
