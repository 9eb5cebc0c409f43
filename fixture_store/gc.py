"""Garbage collection: objects no record references. Dry run unless asked to delete.

Deleting runs under the store's writer lock held exclusively (see
:mod:`fixture_store.objects.store`, "Locks: writers and gc"): it waits for writers in flight,
then re-reads the registry under the registry lock, so an object whose record is about to land
is never taken for garbage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.registry import Registry


@dataclass(frozen=True)
class Garbage:
    hex: str
    path: Path
    size: int


def referenced(registries: Iterable[Registry]) -> set[str]:
    """Hex digests of every object any record references (see :meth:`Record.referenced`)."""
    keep: set[str] = set()
    for registry in registries:
        for record in registry.records():
            keep.update(record.referenced())
    return keep


def find_garbage(store: Store, registries: Iterable[Registry]) -> list[Garbage]:
    """Object entries no record references, and every entry that is not a regular file (a link
    is never an object, referenced or not: removing it removes only the link)."""
    keep = referenced(registries)
    out = []
    for hexpart, entry in store.object_entries():
        if hexpart in keep and entry.is_file(follow_symlinks=False):
            continue
        try:
            size = entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            continue
        out.append(Garbage(hexpart, Path(entry.path), size))
    return out


def collect(store: Store, garbage: Iterable[Garbage]) -> int:
    removed = 0
    for g in garbage:
        store.remove(g.hex)
        removed += 1
    return removed


@dataclass(frozen=True)
class Sweep:
    """What one gc run found and, if it was asked to delete, removed."""

    garbage: list[Garbage]
    removed: int = 0
    removed_tmp: int = 0

    @property
    def size(self) -> int:
        return sum(g.size for g in self.garbage)


def sweep(
    store: Store,
    registry: Registry,
    *,
    delete: bool,
    on_wait: Callable[[], None] | None = None,
) -> Sweep:
    """The objects ``registry`` does not reference; with ``delete``, remove them and the store's
    dead temporary files.

    Deleting waits for the store's writers (``on_wait`` is called first if there are any) and
    decides from the registry as it is once they are done, not from ``registry`` as loaded.
    It is refused while a record is invalid: the objects it would reference cannot be told
    apart from garbage.
    """
    store.check_plain()  # before anything is deleted: a linked folder is refused, never swept
    if not delete:
        return Sweep(find_garbage(store, [registry]))
    with store.collecting(on_wait), registry_mod.transaction(registry.root) as tx:
        current = tx.registry(known=registry)
        invalid = current.invalid_summary()
        if invalid:
            raise UsageError(
                f"the registry has {invalid}, so their objects cannot be told apart from "
                "garbage; refusing to delete",
                fix="fixture-store verify, fix the records, rerun gc",
            )
        garbage = find_garbage(store, [current])
        removed = collect(store, garbage)
        return Sweep(garbage, removed, store.clean_tmp())
