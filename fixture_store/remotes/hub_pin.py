"""``push --pin``: the commit a Hub push made, written into the pushed records as their pinned Hub
source, so that a colleague's ``fetch`` reads the bytes at that commit with no remote configured.

A reviewed registry change like any other (DESIGN decision 3), made through the registry's one
write path, in a transaction (decision 10): each family is re-read under the lock, and a record
that changed since the push planned it is left as it is. Only a record of one object whose
source says where bytes sit on one machine (``local``) or on the Hub already (``hub``) is
pinned: a generator, URL or package source says how the bytes are made or where they come
from upstream, and is kept. A tree record is kept too: a Hub source names one file.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

from fixture_store import registry as registry_mod
from fixture_store.registry import HubSource, Record, Registry, family_of
from fixture_store.remotes.base import object_key
from fixture_store.remotes.hub import HubRemote
from fixture_store.remotes.sync import Outcome, SyncPlan, SyncReport

PINNABLE_SOURCES = ("local", "hub")


@dataclass(frozen=True)
class PinReport:
    """The records now pinned at ``commit``, and those kept as they were, with why."""

    commit: str
    pinned: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, object]:
        return {
            "commit": self.commit,
            "pinned": list(self.pinned),
            "kept": [{"name": n, "why": w} for n, w in self.kept],
        }


def hub_source(remote: HubRemote, record: Record, commit: str) -> HubSource:
    """The record's object in the remote's repo at ``commit``."""
    repo = remote.repo
    return HubSource(
        repo.repo_id,
        commit,
        object_key(record.object),
        None if repo.repo_type == "model" else repo.repo_type,
    )


def pin(registry: Registry, remote: HubRemote, the_plan: SyncPlan, report: SyncReport) -> PinReport:
    """Write ``report``'s commit into the records it pushed (see the module's docstring).

    Nothing is written unless every artifact of the push is on the remote: a push that failed
    anywhere claims nothing, and pins nothing."""
    if report.at is None:
        raise ValueError("pin needs the commit a Hub push checked its objects at")
    commit = report.at
    if any(not r.ok for r in report.results):
        failed = [r.name for r in report.results if not r.ok]
        return PinReport(commit, (), tuple((n, "the push did not complete") for n in failed))
    chosen: dict[str, list[Record]] = defaultdict(list)
    kept: list[tuple[str, str]] = []
    for result in report.results:
        if result.outcome not in (Outcome.PUSHED, Outcome.PRESENT):
            kept.append((result.name, f"{result.outcome}: nothing to pin"))
            continue
        record = registry.get(result.name)
        why = _unpinnable(record, the_plan)
        if why is not None:
            kept.append((record.name, why))
            continue
        chosen[family_of(record.name)].append(record)
    pinned: list[str] = []
    if chosen:
        with registry_mod.transaction(registry.root) as tx:
            for family, records in chosen.items():
                current = tx.family(family, known=registry.families.get(family))
                by_name = dict(current.records) if current is not None else {}
                for record in records:
                    if by_name.get(record.name) != record:
                        kept.append((record.name, "changed since the push: not pinned"))
                        continue
                    new = dataclasses.replace(record, source=hub_source(remote, record, commit))
                    by_name[record.name] = new
                    pinned.append(record.name)
                if current is not None:
                    tx.write(family, by_name.values())
    return PinReport(commit, tuple(pinned), tuple(kept))


def _unpinnable(record: Record, the_plan: SyncPlan) -> str | None:
    """Why ``record`` keeps its source, or ``None`` if it takes the Hub's."""
    if record.tree is not None or len(the_plan.wants.get(record.name, ())) != 1:
        return "a tree of several objects: a Hub source names one file"
    if record.source.type not in PINNABLE_SOURCES:
        return f"its {record.source.type} source says where the bytes come from: kept"
    return None
