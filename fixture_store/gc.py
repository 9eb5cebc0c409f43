"""Garbage collection: objects no record references. Dry run unless asked to delete."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    keep = referenced(registries)
    out = []
    for hexpart, path in store.iter_objects():
        if hexpart not in keep:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            out.append(Garbage(hexpart, path, size))
    return out


def collect(store: Store, garbage: Iterable[Garbage]) -> int:
    removed = 0
    for g in garbage:
        store.remove(g.hex)
        removed += 1
    return removed
