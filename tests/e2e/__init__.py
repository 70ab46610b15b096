"""End to end: a served bot (`pizzabot serve` as its own process), the CLI and the client as
a user runs them, headless Chromium on the web page, wheels, the container and the bench."""
