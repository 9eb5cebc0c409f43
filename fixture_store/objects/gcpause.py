"""Pausing Python's cyclic garbage collector around work that makes many small objects and no
reference cycles (loading a registry, verifying it): each pass of the collector walks the whole
heap, and a heap holding a large registry made those passes a large share of the work.

Pausing alone only defers the walk: the objects made while paused all sit in the youngest
generation, and the first collection after it walks every one of them (0.3 s for the 1.3 x 10^6
objects of a registry of 10^5 records), the next middle-generation one walks them again (0.5 s),
and their number then sets off a full one. What the paused work made is what the command keeps
(a loaded registry, verify's results), so on leaving it goes straight to the oldest generation,
where a collection would move it after walking it twice: :func:`gc.freeze` then
:func:`gc.unfreeze`, two list splices that walk nothing. Objects are still freed by their
reference counts, and a cycle among them (there are none) would be found by the next full
collection. Where the process keeps a frozen generation of its own (``gc.freeze()`` before a
fork), it is left alone and nothing is promoted.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Verification and loading make many small objects and no reference cycles, and a
    cyclic-GC pass over a heap holding a loaded registry cost 10 ms of a 60 ms warm verify of
    the node corpus. Only re-enables what it disabled, so concurrent callers leave the
    collector on; what was made meanwhile is promoted to the oldest generation (see above)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            promote_to_oldest()
            gc.enable()


def promote_to_oldest() -> None:
    """Move every object the collector tracks into its oldest generation without walking them,
    unless the process froze some itself (its frozen generation is not ours to thaw)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
