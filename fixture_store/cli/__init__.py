"""The command line: one module per command group."""

from fixture_store.cli.app import main

__all__ = ["main"]
