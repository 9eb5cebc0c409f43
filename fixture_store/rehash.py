"""Recording BLAKE3 beside SHA-256 in existing records, after a SHA-256 check of the same bytes.

``fixture-store add`` records BLAKE3 as it ingests; this fills it in for records written before,
or by tools that only know SHA-256. Each object is read once, hashed with both functions; only an
object whose SHA-256 and size match its record gets a BLAKE3, so SHA-256 stays the identity and
BLAKE3 only ever vouches for bytes the identity vouched for first. The records are rewritten in
one registry transaction, and only those still as they were verified: a record another writer
changed meanwhile is left as it now is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store, holding_writer_lock
from fixture_store.registry import Record, Registry, family_of
from fixture_store.verify import Result, Verifier, verify_names


@dataclass(frozen=True)
class RehashReport:
    """What ``rehash`` did: records given BLAKE3, records already complete, and failures."""

    updated: tuple[str, ...]
    unchanged: tuple[str, ...]
    failed: tuple[Result, ...]


@holding_writer_lock
def record_blake3(
    store: Store,
    registry: Registry,
    names: Iterable[str],
    *,
    replace: bool = False,
    workers: int | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> RehashReport:
    """Hash the objects of ``names`` with SHA-256 and BLAKE3; write BLAKE3 into verified records.

    A record's existing BLAKE3 is kept unless ``replace`` is set (then a wrong one is corrected,
    again only after SHA-256 matched). Records that fail the SHA-256 check are left untouched.
    """
    verifier = Verifier(store, record_blake3=True)
    results = verify_names(
        store, registry, names, workers=workers, on_result=on_result, verifier=verifier
    )
    seen = verifier.seen_blake3
    order = {r.name: i for i, r in enumerate(results)}
    updated: dict[str, list[tuple[Record, Record]]] = {}
    unchanged: list[str] = []
    for result in results:
        if not result.ok:
            continue
        record = registry.get(result.name)
        new = _filled(record, seen, replace=replace)
        if new == record:
            unchanged.append(record.name)
            continue
        updated.setdefault(family_of(record.name), []).append((record, new))
    done: set[str] = set()
    if updated:
        with registry_mod.transaction(registry.root) as tx:
            for family, pairs in updated.items():
                current = tx.family(family, known=registry.families.get(family))
                by_name = dict(current.records) if current is not None else {}
                for verified, new in pairs:
                    if by_name.get(verified.name) == verified:
                        by_name[new.name] = new
                        done.add(new.name)
                    else:  # changed since it was verified: its new bytes were not hashed here
                        unchanged.append(verified.name)
                if current is not None:
                    tx.write(family, by_name.values())
    changed = [r.name for pairs in updated.values() for r, _ in pairs if r.name in done]
    changed.sort(key=order.__getitem__)
    failed = tuple(r for r in results if not r.ok and r.status.value != "gap")
    return RehashReport(tuple(changed), tuple(unchanged), failed)


def _filled(record: Record, seen: dict[str, str], *, replace: bool) -> Record:
    tree = record.tree
    if tree is not None:
        members = {
            m: (seen.get(d.hex) if replace else record.member_blake3.get(m) or seen.get(d.hex))
            for m, d in tree
        }
        clean = {m: b for m, b in members.items() if b is not None}
        if clean == dict(record.member_blake3):
            return record
        return dataclasses.replace(record, member_blake3=MappingProxyType(clean))
    hexpart = record.object.hex
    own = seen.get(hexpart) if replace else record.blake3 or seen.get(hexpart)
    if own == record.blake3 or own is None:
        return record
    return dataclasses.replace(record, blake3=own)
