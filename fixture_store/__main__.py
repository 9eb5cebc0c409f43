"""``python -m fixture_store``: the same command line as ``fixture-store``."""

from fixture_store.cli import main

main()
