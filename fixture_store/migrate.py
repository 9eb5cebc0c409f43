"""Rewriting a family's records in the current form of the registry, in one transaction.

Today that is the arrays manifest (:mod:`fixture_store.registry.tensor_ranges`): each plain entry
written as one string (``"float64[1,12]"``) instead of an object, and the byte ranges and digests
of a reference whose arrays are too small for partial fetch to use them
(:func:`~fixture_store.readers.tensor_ranges.wants_ranges`) left out. Nothing a verification or
a comparison reads changes: names, dtypes, shapes, digests and tolerances stay as they are; a
record of a file that keeps its ranges keeps them. Old families read as they are, so migrating is
a choice: a reviewer sees one diff of the whole family, once.

The family is re-read and rewritten under the registry lock (DESIGN decision 10), so a record
another writer added meanwhile is migrated with the rest and nothing is lost.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.readers.tensor_ranges import wants_ranges
from fixture_store.registry import Record, Registry
from fixture_store.registry.frozen import freeze
from fixture_store.registry.tensor_ranges import PLAIN_KEYS


@dataclass(frozen=True)
class Migrated:
    """What migrating one family did: its file, its size before and after, how many records
    and arrays it holds, and the records whose ranges were left out."""

    family: str
    path: str
    before: int
    after: int
    records: int
    arrays: int
    unranged: tuple[str, ...]


def compact(record: Record) -> Record:
    """``record`` with its arrays manifest in the current form: one string per plain entry, and
    no ranges where its file would not get them today."""
    arrays = record.arrays
    if arrays is None:
        return record
    size = record.digest.size if record.digest is not None else 0
    if not wants_ranges(size, len(arrays)):
        arrays = freeze({n: {k: spec[k] for k in PLAIN_KEYS} for n, spec in arrays.items()})
    return dataclasses.replace(record, arrays=arrays, arrays_as_objects=False)


def _ranged(record: Record) -> bool:
    return any("offset" in spec for spec in (record.arrays or {}).values())


def migrate_family(registry: Registry, family: str) -> Migrated:
    """Rewrite ``family``'s records (:func:`compact`) in one registry transaction."""
    with registry_mod.transaction(registry.root) as tx:
        current = tx.family(family, known=registry.families.get(family))
        if current is None:
            raise UsageError(
                f"no family {family!r} in {registry.directory}",
                fix="name a family that 'fixture-store list' shows",
            )
        before = _bytes(tx.directory, family)
        records = [compact(r) for r in current.records.values()]
        unranged = tuple(
            r.name for r in current.records.values() if _ranged(r) and not _ranged(compact(r))
        )
        path = tx.write(family, records)
        return Migrated(
            family,
            str(path),
            before,
            _bytes(tx.directory, family),
            len(records),
            sum(len(r.arrays or ()) for r in records),
            unranged,
        )


def _bytes(directory: os.PathLike[str] | str, family: str) -> int:
    """The family's file and its shards, in bytes."""
    root = Path(directory)
    files = [root / f"{family}.json", *sorted((root / family).glob("[0-9a-f][0-9a-f].json"))]
    return sum(f.stat().st_size for f in files if f.is_file())
