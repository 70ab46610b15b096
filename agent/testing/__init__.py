"""Public test peers: fakes that stand in for the outside world over real sockets."""
