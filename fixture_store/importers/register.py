"""Registering a checked :class:`~fixture_store.importers.plan.Plan`: every accepted file into
the store (checked again against its SHA-256 while copied), then every record in one registry
transaction: all of them, or none.

Records are registered by :func:`fixture_store.ingest.register`, as ``add`` registers them
(content manifests of archives and arrays from their bytes, BLAKE3 beside SHA-256), and merged
by its rule, the manifest's fields suggested: a record already there with the same bytes is
kept (BLAKE3 and content filled in), one with other bytes is refused unless ``replace``. What a
manifest says beyond identity is mapped onto record fields in :func:`_record_fields`, the one
place to re-point when records gain them.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fixture_store import ingest
from fixture_store.errors import FixtureStoreError, RegistryError, UsageError
from fixture_store.importers.entry import ManifestEntry, ManifestError
from fixture_store.importers.fields import MEAN_ABS, UNKNOWN_FIELDS
from fixture_store.importers.plan import Accepted, Origin, PackageOrigin, Plan
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import (
    Annotations,
    Gap,
    Kind,
    LocalSource,
    NoSource,
    Record,
    Registry,
    Source,
    Tolerance,
    UrlSource,
    Where,
    check_name,
    family_of,
)
from fixture_store.registry import files as registry_files
from fixture_store.registry.frozen import thaw

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
        thawed: dict[str, Any] = thaw(value)  # lists inside (checks, an order) as lists again
        return thawed
    return {"metric": MEAN_ABS, "max": value}


def _tolerance(entry: ManifestEntry, where: Where) -> Tolerance | None:
    """The record tolerance of the entry; a RegistryError names a tolerance that does not parse."""
    if entry.tolerance is None:
        return None
    return Tolerance.from_json(tolerance_json(entry.tolerance), where)


def _record_fields(entry: ManifestEntry, plan: Plan, where: Where) -> Annotations:
    """Everything the manifest says about a file beyond its identity, as record fields.

    ``arrays``, ``tolerance``, the pinned upstreams, ``seed``, ``input_shape`` and
    ``generator`` (as the command) become the record's fields; url, an upstream that is no pin,
    the named fields records have no field for yet, and the fields no table knows
    (``unknown_fields``, by JSON pointer, verbatim) go into metadata, with where they were
    imported from and which fields were read under another name.
    """
    if IMPORTED_FROM in entry.metadata:
        raise ManifestError(
            entry.where,
            f"{IMPORTED_FROM!r} is the field an import records itself in",
            fix="rename that field of the manifest",
        )
    described: dict[str, Any] = {
        "upstream": thaw(entry.stated_upstream),
        "url": entry.url,
        UNKNOWN_FIELDS: thaw(entry.unknown) or None,
    }
    imported: dict[str, Any] = {
        "format": plan.format,
        "manifest": plan.manifest,
        # a tuple, as the record parser reads it back: the two records compare equal
        "digests": tuple(str(d) for d in entry.digests),
    }
    if entry.mapped:
        imported["mapped"] = {m.pointer: m.lands for m in entry.mapped}
    metadata = {
        **entry.metadata,
        **{k: v for k, v in described.items() if v is not None},
        IMPORTED_FROM: imported,
    }
    arrays = dict(entry.arrays) if entry.arrays is not None else None
    return Annotations(
        arrays=arrays,
        tolerance=_tolerance(entry, where),
        metadata=metadata,
        upstream=entry.upstream or None,
        seed=entry.seed,
        input_shape=list(entry.input_shape) if entry.input_shape is not None else None,
        command=_command(entry),
    )


def _command(entry: ManifestEntry) -> tuple[str, ...] | None:
    """The generator's command line as the record's command, split as a shell would."""
    if not entry.generator:
        return None
    try:
        return tuple(shlex.split(entry.generator))
    except ValueError as e:  # an unclosed quote
        raise ManifestError(
            entry.where,
            f"field 'generator': {entry.generator!r} is not a command line: {e}",
            fix="close its quote, or quote it as a shell would",
        ) from e


def blamed(entry: ManifestEntry, e: RegistryError) -> ManifestError:
    """A registry refusal of what ``entry`` makes, as the manifest's: it names the manifest and
    the entry, and its fix never points at the registry file, which is not written."""
    field = f"field {e.field!r}: " if e.field else ""
    fix = None if e.file is not None and e.fix == f"edit {e.file}" else e.fix
    return ManifestError(entry.where, f"{field}{e.reason}", fix=fix)


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


NAMED = 5  # files a report or a refusal names before "... and N more"


def named(paths: Sequence[str]) -> str:
    """The first :data:`NAMED` of ``paths``, and how many more there are."""
    more = len(paths) - NAMED
    return ", ".join(paths[:NAMED]) + (f", ... and {more} more" if more > 0 else "")


def registered_elsewhere(plan: Plan, origin: Origin, registry: Registry) -> Plan:
    """``plan`` without the orphans some record of the registry already has as its local
    source (a file of another family, another manifest): an orphan is a file no family
    registers."""
    if not plan.orphans:
        return plan
    local = {r.source.path for r in registry.records() if isinstance(r.source, LocalSource)}
    kept = []
    for path in plan.orphans:
        source = origin.source(path)
        if not (isinstance(source, LocalSource) and source.path in local):
            kept.append(path)
    return dataclasses.replace(plan, orphans=tuple(kept))


def refuse_unaccounted(plan: Plan, *, gaps: bool = False) -> None:
    """``--strict``: refuse a plan that would leave a file the manifest and its folders hold
    unregistered: a listed file absent (unless ``gaps`` declares it) or an orphan. Call it
    before :func:`register` (which it does not call), as the command does."""
    absent = [] if gaps else [e.path for e in plan.absent]
    parts = [
        f"{len(paths)} {label} ({named(paths)})"
        for label, paths in (
            ("listed but absent", absent),
            ("orphan(s) present but not listed", list(plan.orphans)),
            ("found but not verified", [u.path for u in plan.unverified]),
        )
        if paths
    ]
    if parts:
        raise ImportRefusedError(
            f"{plan.manifest} does not account for every file (--strict): "
            f"{'; '.join(parts)}; nothing was stored or registered",
            fix="restore the absent files (or pass --gaps to declare them), list the orphans in "
            "the manifest or remove them; or import without --strict",
        )


@dataclass(frozen=True)
class Prepared:
    """An import built and checked to its last record, nothing stored: what ``--dry-run``
    reports and the real import registers (the same value, by the same code). Declared gaps
    are kept by name: their registrations are made again from the plan when committed, so a
    listing of 300,000 absent files holds one copy of them, not two."""

    plan: Plan
    registrations: tuple[ingest.Registration, ...]
    gap_names: tuple[str, ...]
    records: tuple[Record, ...]  # each accepted file's record as far as the manifest makes it
    origin: Origin | None = None
    family: str = ""
    kind: Kind = Kind.FIXTURE

    @property
    def gaps(self) -> Iterator[ingest.Registration]:
        """The declared gaps' registrations, made from the plan as :func:`prepare` made them."""
        if not self.gap_names:
            return iter(())
        assert self.origin is not None
        origin, family, kind = self.origin, self.family, self.kind
        return (_gap(e, self.plan, origin, family=family, kind=kind) for e in self.plan.absent)

    def to_json(self) -> dict[str, Any]:
        return {
            "records": {r.name: r.to_json() for r in self.records},
            "gap_records": list(self.gap_names),
        }


def prepare(
    registry: Registry,
    plan: Plan,
    origin: Origin,
    *,
    family: str,
    kind: Kind = Kind.FIXTURE,
    gaps: bool = False,
) -> Prepared:
    """Refuse a plan with mismatches, then build every record the import will write (names,
    manifest fields, pins) and read each back through the registry's reader; nothing is
    stored. A refusal names the manifest and the entry."""
    refuse_mismatches(plan)
    file = f"provenance/{family}.json"
    absent = plan.absent if gaps else ()
    # Every name is checked (record_name) while the registrations are built, and every record
    # read back as the registry will read it, before any byte is stored.
    registrations = [_registration(a, plan, family=family, kind=kind) for a in plan.accepted]
    reader = _ReadBack(registry, file)
    records = tuple(
        reader.probe(reg, a.entry, digest=a.digest, source=a.located.source)
        for reg, a in zip(registrations, plan.accepted, strict=True)
    )
    gap_names = []
    for entry in absent:  # a declared gap's record too, made, read back and let go
        reg = _gap(entry, plan, origin, family=family, kind=kind)
        reader.probe(reg, entry, digest=reg.digest, source=reg.source or NoSource())
        gap_names.append(reg.name)
    reader.flush()
    return Prepared(plan, tuple(registrations), tuple(gap_names), records, origin, family, kind)


def commit(
    store: Store, registry: Registry, prepared: Prepared, *, replace: bool = False
) -> Imported:
    """Put the prepared import's files into the store and register them with their gaps:
    :func:`fixture_store.ingest.register` of its registrations, in one transaction."""
    done = ingest.register(
        store, registry, prepared.registrations, replace=replace, gaps=tuple(prepared.gaps)
    )
    written = tuple(
        d.record
        for d in done
        if d.record.gap is None and d.change in (ingest.Change.ADDED, ingest.Change.REPLACED)
    )
    kept = tuple(
        d.record.name for d in done if d.change in (ingest.Change.FILLED, ingest.Change.UNCHANGED)
    )
    declared = tuple(d.record for d in done if d.record.gap is not None)
    return Imported(written, kept, declared)


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
    """:func:`prepare` the plan, then :func:`commit` it."""
    prepared = prepare(registry, plan, origin, family=family, kind=kind, gaps=gaps)
    return commit(store, registry, prepared, replace=replace)


class _ReadBack:
    """Every record an import will write, as far as the manifest makes it (its identity and
    what the manifest states; the content manifest comes from its bytes later), written by the
    registry's writer and read back by its reader (:func:`.files.reads_back`) before any byte is
    stored, a refusal blamed on the manifest's entry. Records are read back in batches of
    :data:`BATCH`, the schema backstop once per record shape: an import of 300,000 lines costs
    one registry read per batch, not one per line. The registry write does the same for the
    whole record."""

    BATCH = 4096

    def __init__(self, registry: Registry, file: str) -> None:
        self.registry = registry
        self.file = file
        self.shapes: set[str] = set()
        self.pending: dict[str, tuple[Record, ManifestEntry]] = {}

    def probe(
        self,
        reg: ingest.Registration,
        entry: ManifestEntry,
        *,
        digest: Digest | None,
        source: Source,
    ) -> Record:
        try:
            record = ingest.build_record(
                reg.name,
                reg.kind,
                digest,
                source,
                annotations=reg.annotations,
                gap=reg.gap,
                file=self.file,
            )
        except RegistryError as e:
            raise blamed(entry, e) from e
        self.pending[record.name] = (record, entry)
        if len(self.pending) >= self.BATCH:
            self.flush()
        return record

    def flush(self) -> None:
        batch, self.pending = self.pending, {}
        if not batch:
            return
        family = family_of(next(iter(batch)))
        try:
            registry_files.reads_back(
                [record for record, _ in batch.values()],
                self.registry.directory / f"{family}.json",
                shapes=self.shapes,
            )
        except RegistryError as e:
            entry = batch[e.record][1] if e.record in batch else next(iter(batch.values()))[1]
            raise blamed(entry, e) from e


def _registration(
    accepted: Accepted, plan: Plan, *, family: str, kind: Kind
) -> ingest.Registration:
    """An accepted file as a registration: its bytes checked again against the manifest's
    digest as they are stored, the manifest's fields suggested (a reviewed record with the same
    bytes is kept as it is)."""
    name = record_name(family, accepted.entry)
    return ingest.Registration(
        name,
        kind,
        accepted.located.path,
        accepted.located.source,
        _fields(accepted.entry, plan, name),
        digest=accepted.digest,
        suggested=True,
    )


def _gap(
    entry: ManifestEntry, plan: Plan, origin: Origin, *, family: str, kind: Kind
) -> ingest.Registration:
    name = record_name(family, entry)
    reason = f"listed in {plan.manifest} but absent when it was imported"
    if entry.weak_only:
        algorithms = " and ".join(sorted({d.algorithm for d in entry.digests}))
        reason += (
            f"; weak: only its {algorithms} is known, which the first bytes to fill it are "
            "checked against before their sha256 is recorded"
        )
    # The digest the manifest states is kept: with its size, the record's digest (the bytes
    # that fill the gap must have it); without, the digest the gap awaits.
    known = entry.sha256
    sized = Digest(known, entry.size) if known is not None and entry.size is not None else None
    expected = f"sha256:{known}" if known is not None and sized is None else None
    return ingest.Registration(
        name,
        kind,
        source=gap_source(entry, origin),
        annotations=_fields(entry, plan, name),
        gap=Gap(reason, expected=expected),
        digest=sized,
    )


def gap_source(entry: ManifestEntry, origin: Origin) -> Source:
    """Where a gap's bytes will come from: the https URL the manifest lists with a SHA-256 (a
    ``url`` source pinned by that digest, so ``fetch`` fills the gap), else the origin's place
    for the file when the file can arrive there (a project folder), else no source (a pinned
    distribution does not hold a file it lacks)."""
    if entry.url is not None and entry.sha256 is not None:
        url = UrlSource(entry.url)
        try:
            url.check(Where(None, entry.path))
        except RegistryError:
            pass  # not https, or a branch of a Hub repository: kept as metadata.url only
        else:
            return url
    if isinstance(origin, PackageOrigin):
        return NoSource()
    return origin.source(entry.path)


def _fields(entry: ManifestEntry, plan: Plan, name: str) -> Annotations:
    """:func:`_record_fields` of ``entry``, a refusal blamed on the manifest's entry."""
    try:
        return _record_fields(entry, plan, Where(None, name))
    except RegistryError as e:
        raise blamed(entry, e) from e
