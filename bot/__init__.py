"""The composition root: reads the settings (the only part that does), builds the engine,
the store and every configured channel, and starts `pizzabot serve` or `pizzabot worker`.

Nothing here decides anything: it wires the parts of `pizzabot.agent`, `pizzabot.store`
and `pizzabot.channels` together (`core.build`), says what it started, and keeps the logs
free of secrets.
"""
