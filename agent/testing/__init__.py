"""Public test helpers: peers that stand in for the outside world over real sockets (a
scripted model provider, `model_server`), and a store kept in memory (`memory_store`)."""
