"""Pausing Python's cyclic garbage collector around work that makes many small objects and no
reference cycles (loading a registry, verifying it): each pass of the collector walks the whole
heap, and a heap holding a large registry made those passes a large share of the work."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Verification and loading make many small objects and no reference cycles, and a
    cyclic-GC pass over a heap holding a loaded registry cost 10 ms of a 60 ms warm verify of
    the node corpus. Only re-enables what it disabled, so concurrent callers leave the
    collector on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
