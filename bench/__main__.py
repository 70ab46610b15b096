"""`python -m bench`: the benchmark (see `bench.cli`)."""

from bench.cli import main

main()
