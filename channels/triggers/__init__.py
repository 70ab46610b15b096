"""Runs that start without a person asking: on a schedule (`scheduler`, with the times it
fires at in `schedule_times` and how the API shows it in `schedule_json`) and from a signed
webhook (`hooks`). Both program against `pizzabot.agent.schedules`; `pizzabot.store.triggers` keeps them."""
