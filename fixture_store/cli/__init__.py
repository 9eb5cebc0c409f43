"""The command line: the root group in ``app``, one module per command group, shared parts in
``_common``."""

from fixture_store.cli.app import main

__all__ = ["main"]
