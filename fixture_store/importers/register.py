"""Registering a checked :class:`~fixture_store.importers.plan.Plan`: every accepted file into
the store (checked again against its SHA-256 while copied), then every record in one registry
transaction: all of them, or none.

Records are built with :mod:`fixture_store.ingest`'s functions, as ``add`` builds them (content
manifests of archives and arrays from their bytes, BLAKE3 beside SHA-256), and merged by its
rule: a record already there with the same bytes is kept (BLAKE3 and content filled in), one
with other bytes is refused unless ``replace``. What a manifest says beyond identity is mapped
onto record fields in :func:`_record_fields`, the one place to re-point when records gain them.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store import ingest, limits
from fixture_store import registry as registry_mod
from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.importers.entry import ManifestEntry, ManifestError
from fixture_store.importers.plan import Accepted, Origin, Plan
from fixture_store.objects.store import Store, Stored, holding_writer_lock
from fixture_store.readers import content
from fixture_store.registry import (
    Annotations,
    Gap,
    Kind,
    Record,
    Registry,
    Tolerance,
    Where,
    check_name,
)
from fixture_store.registry import upstream as upstream_mod
from fixture_store.registry.upstream import Upstream

# The metric a bare tolerance number means in a hand-rolled manifest: the largest mean absolute
# error.
MEAN_ABS = "mean_abs"
IMPORTED_FROM = "imported_from"  # the metadata field saying which manifest a record came from


class ImportRefusedError(FixtureStoreError):
    """Some listed bytes do not match their manifest: nothing was stored or registered."""


@dataclass(frozen=True)
class Imported:
    """What an import registered: new or rewritten records, records kept as they were, and
    declared gaps."""

    written: tuple[Record, ...]
    kept: tuple[str, ...]
    gaps: tuple[Record, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "written": [r.name for r in self.written],
            "kept": list(self.kept),
            "gaps": [r.name for r in self.gaps],
        }


def tolerance_json(value: float | Mapping[str, Any]) -> dict[str, Any]:
    """A manifest's tolerance as a record's: a number is the largest mean absolute error."""
    if isinstance(value, Mapping):
        return dict(value)
    return {"metric": MEAN_ABS, "max": value}


def _tolerance(entry: ManifestEntry, where: Where) -> Tolerance | None:
    """The record tolerance of the entry; a RegistryError names a tolerance that does not parse."""
    if entry.tolerance is None:
        return None
    return Tolerance.from_json(tolerance_json(entry.tolerance), where)


def _record_fields(entry: ManifestEntry, plan: Plan, where: Where) -> Annotations:
    """Everything the manifest says about a file beyond its identity, as record fields.

    ``arrays``, ``tolerance``, a pinned ``upstream``, ``seed``, ``input_shape`` and
    ``generator`` (as the command) become the record's fields; url, an upstream that is no pin
    and the manifest's own extra fields go into metadata, with where they were imported from.
    """
    if IMPORTED_FROM in entry.metadata:
        raise ManifestError(
            entry.where,
            f"{IMPORTED_FROM!r} is the field an import records itself in",
            fix="rename that field of the manifest",
        )
    tolerance = _tolerance(entry, where)
    pinned = _upstream(entry, where)
    described: dict[str, Any] = {
        # an upstream without revision and checkpoint cannot be a pin: kept as stated
        "upstream": entry.upstream.to_json() if entry.upstream and not pinned else None,
        "url": entry.url,
    }
    metadata = {
        **entry.metadata,
        **{k: v for k, v in described.items() if v is not None},
        IMPORTED_FROM: {
            "format": plan.format,
            "manifest": plan.manifest,
            "digests": [str(d) for d in entry.digests],
        },
    }
    arrays = dict(entry.arrays) if entry.arrays is not None else None
    return Annotations(
        arrays=arrays,
        tolerance=tolerance,
        metadata=metadata,
        upstream=pinned,
        seed=entry.seed,
        input_shape=list(entry.input_shape) if entry.input_shape is not None else None,
        command=tuple(shlex.split(entry.generator)) if entry.generator else None,
    )


def _upstream(entry: ManifestEntry, where: Where) -> tuple[Upstream, ...] | None:
    """The manifest's upstream as a record's pinned upstream, by the pin rules of ``add
    --upstream``: a repository URL is a git upstream at that commit, anything else a Hub repo at
    that revision; the checkpoint is the path. ``None`` if it names no revision or checkpoint."""
    up = entry.upstream
    if up is None or up.revision is None or up.checkpoint is None:
        return None
    if "://" in up.repository:
        raw = {"type": "git", "url": up.repository, "commit": up.revision, "path": up.checkpoint}
    else:
        raw = {"type": "hub", "repo_id": up.repository, "revision": up.revision}
        raw["path"] = up.checkpoint
    return (upstream_mod.parse_one(raw, where, "upstream"),)


def record_name(family: str, entry: ManifestEntry) -> str:
    name = f"{family}/{entry.path}"
    try:
        return check_name(name)
    except UsageError as e:
        raise ManifestError(
            entry.where,
            f"{entry.path!r} cannot be an artifact name in family {family!r}: {e.message}",
            fix="rename the file, or import it on its own with fixture-store add --name",
        ) from e


def refuse_mismatches(plan: Plan) -> None:
    if plan.mismatched:
        lines = "\n  ".join(f"{m.entry.where}: {m.entry.path}: {m.reason}" for m in plan.mismatched)
        raise ImportRefusedError(
            f"{len(plan.mismatched)} file(s) do not match {plan.manifest}; nothing was stored "
            f"or registered:\n  {lines}",
            fix="restore the files the manifest describes, or fix the manifest (it is the "
            "claim the bytes are checked against)",
        )


@holding_writer_lock  # from the first object until the records are written: gc waits
def register(
    store: Store,
    registry: Registry,
    plan: Plan,
    origin: Origin,
    *,
    family: str,
    kind: Kind = Kind.FIXTURE,
    gaps: bool = False,
    replace: bool = False,
) -> Imported:
    """Put the plan's accepted files into the store and register them with their gaps."""
    refuse_mismatches(plan)
    file = f"provenance/{family}.json"
    absent = plan.absent if gaps else ()
    for entry in (*(a.entry for a in plan.accepted), *absent):
        record_name(family, entry)  # every name checked before any byte is stored
    records = _build_all(store, plan, family=family, kind=kind, file=file)
    declared = [_gap(e, plan, origin, family=family, kind=kind, file=file) for e in absent]
    return _write(registry, family, records, declared, replace=replace)


def _build_all(
    store: Store, plan: Plan, *, family: str, kind: Kind, file: str
) -> list[tuple[Record, content.Described]]:
    """Every accepted file read by the content readers first (a hostile archive or a pickle is
    refused before any byte is stored), then stored in one batch (one filesystem sync for all,
    where an fsync per file dominated), then each record built and its content confirmed."""
    profile = limits.profile(None)
    described = [
        ingest.describe_file(
            a.located.path, record_name(family, a.entry), kind, a.located.source, profile
        )
        for a in plan.accepted
    ]
    stored = store.write_files([a.located.path for a in plan.accepted])
    for accepted, got in zip(plan.accepted, stored, strict=True):
        if got.digest != accepted.digest:  # the bytes checked again, as they were copied
            raise ImportRefusedError(
                f"{accepted.entry.where}: {accepted.located.path} changed while it was "
                f"imported: it now has {got.digest}, it was checked as {accepted.digest}; "
                "nothing was registered",
                fix="import again once nothing writes to the files",
            )
    return [
        (_build(store, a, d, st, plan, family=family, kind=kind, file=file), d)
        for a, d, st in zip(plan.accepted, described, stored, strict=True)
    ]


def _build(
    store: Store,
    accepted: Accepted,
    described: content.Described,
    stored: Stored,
    plan: Plan,
    *,
    family: str,
    kind: Kind,
    file: str,
) -> Record:
    entry, path, source = accepted.entry, accepted.located.path, accepted.located.source
    name = record_name(family, entry)
    annotations = _record_fields(entry, plan, Where(file, name))
    record = ingest.build_record(
        name,
        kind,
        stored.digest,
        source,
        media_type=described.media_type or ingest.media_type_by_name(path),
        members=described.members,
        annotations=dataclasses.replace(annotations, arrays=annotations.arrays or described.arrays),
        file=file,
    )
    record = ingest.with_blake3(record, stored.blake3, {})
    failure = content.check(store, record, full=True)
    if failure is not None:
        raise ManifestError(
            entry.where,
            f"{entry.path} does not hold what the manifest says: {failure.message}",
            fix="the manifest's arrays must be the file's own (dtype and shape of each); fix "
            "the manifest, or the file",
        )
    return record


def _gap(
    entry: ManifestEntry, plan: Plan, origin: Origin, *, family: str, kind: Kind, file: str
) -> Record:
    name = record_name(family, entry)
    annotations = _record_fields(entry, plan, Where(file, name))
    gap = Gap(f"listed in {plan.manifest} but absent when it was imported")
    record = Record(name, kind, origin.source(entry.path), gap=gap)
    return registry_mod.check_record(annotations.apply(record), file=file)


def _write(
    registry: Registry,
    family: str,
    records: Iterable[tuple[Record, content.Described]],
    gaps: Iterable[Record],
    *,
    replace: bool,
) -> Imported:
    written: list[Record] = []
    kept: list[str] = []
    declared: list[Record] = []
    with registry_mod.transaction(registry.root) as tx:  # checked against the file as it is now
        existing = tx.family(family, known=registry.families.get(family))
        merged = dict(existing.records) if existing else {}
        invalid = set(existing.invalid) if existing else set()
        conflicts = []
        for record, described in records:
            old = merged.get(record.name)
            if (
                record.name in invalid or (old is not None and old.digest != record.digest)
            ) and not replace:
                conflicts.append(record.name)
            elif old is not None and old.digest == record.digest:
                # The reviewed record stays; only BLAKE3 and a content manifest it lacked are added.
                filled = ingest.with_blake3(old, record.blake3, record.member_blake3)
                merged[record.name] = ingest.with_content(filled, described)
                kept.append(record.name)
            else:
                merged[record.name] = record
                written.append(record)
        if conflicts:
            raise UsageError(
                f"{len(conflicts)} record(s) already registered with other bytes (or invalid), "
                f"e.g. {conflicts[0]}; nothing was registered",
                fix="compare first (fixture-store verify / regenerate), or pass --replace",
            )
        for gap in gaps:
            if gap.name not in merged and gap.name not in invalid:
                merged[gap.name] = gap
                declared.append(gap)
        if written or declared or kept:
            tx.write(family, merged.values())
    return Imported(tuple(written), tuple(kept), tuple(declared))
