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
from fixture_store.errors import EXIT_FAILED, FixtureStoreError, RegistryError, UsageError
from fixture_store.importers.entry import ManifestEntry, ManifestError, Refused
from fixture_store.importers.fields import MEAN_ABS, UNKNOWN_FIELDS
from fixture_store.importers.plan import Accepted, Origin, PackageOrigin, Plan
from fixture_store.objects import names
from fixture_store.objects.digests import Awaited, Digest
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
from fixture_store.registry.records import IMPORTED_FROM  # where a record says its manifest


class ImportRefusedError(FixtureStoreError):
    """Some listed bytes do not match their manifest: nothing was stored or registered."""


class EntriesRefusedError(ManifestError):
    """An all-or-nothing import (``--strict``) left entries out: nothing was stored or
    registered. Exit 1, as every refusal of an import that read its manifest."""

    exit_code = EXIT_FAILED


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


def record_name(family: str, entry: ManifestEntry, taken: Mapping[str, str] | None = None) -> str:
    """The record name of ``entry`` in ``family``; a ManifestError says why it cannot be one,
    or which registered name of the family (``taken``: by :func:`names.key`) it collides with."""
    try:
        name = check_name(f"{family}/{entry.path}")
    except UsageError as e:
        raise ManifestError(
            entry.where,
            f"{entry.path!r} cannot be an artifact name in family {family!r}: {e.message}",
            fix="leave it out (--exclude), or import it on its own with fixture-store add --name",
        ) from e
    other = (taken or {}).get(names.key(name))
    if other is not None and other != name:
        raise ManifestError(
            entry.where,
            f"{entry.path!r}: {name!r} {names.collision_reason(other)}",
            fix="leave it out (--exclude), or rename the record registered first",
        )
    return name


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
    # Every entry left out because it cannot be registered (the plan's refusals, its
    # mismatches, and the entries whose records could not be built), each with its reason.
    refused: tuple[Refused, ...] = ()
    origin: Origin | None = None
    family: str = ""
    kind: Kind = Kind.FIXTURE

    @property
    def gaps(self) -> Iterator[ingest.Registration]:
        """The declared gaps' registrations, made from the plan as :func:`prepare` made them
        (the refused ones left out)."""
        if not self.gap_names:
            return iter(())
        assert self.origin is not None
        origin, family, kind, kept = self.origin, self.family, self.kind, set(self.gap_names)
        made = (
            _gap(e, self.plan, origin, family=family, kind=kind, taken={})
            for e in self.plan.absent
            if e.refused is None
        )
        return (reg for reg in made if reg.name in kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "records": {r.name: r.to_json() for r in self.records},
            "gap_records": list(self.gap_names),
            "refused": [r.to_json() for r in self.refused],
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
    """Build every record the import will write (names, manifest fields, pins) and read each
    back through the registry's reader; nothing is stored. An entry that cannot be registered
    (its name, a field, a record the registry would call invalid, a name that collides with
    another record's) is refused by itself, with its reason, and left out (DESIGN 20); so is a
    file whose bytes do not match the manifest. An absent file is judged only with ``gaps``."""
    file = f"provenance/{family}.json"
    file = f"provenance/{family}.json"
    known = registry.families.get(family)
    taken = {names.key(n): n for n in (*known.records, *known.invalid)} if known else {}
    refused = [
        *plan.refused,
        *(Refused(m.entry.path, m.entry.where, m.reason) for m in plan.mismatched),
    ]
    reader = _ReadBack(registry, file)
    files: list[tuple[ingest.Registration, Record]] = []
    gap_names: list[str] = []
    for accepted in plan.accepted:
        try:
            reg = _registration(accepted, plan, family=family, kind=kind, taken=taken)
            record = reader.probe(
                reg, accepted.entry, digest=accepted.digest, source=accepted.located.source
            )
        except ManifestError as e:
            refused.append(_refused(accepted.entry, e))
            continue
        files.append((reg, record))
        taken.setdefault(names.key(reg.name), reg.name)  # a later spelling of it collides
    for entry in plan.absent if gaps else ():  # a declared gap's record too, read back, let go
        try:
            reg = _gap(entry, plan, origin, family=family, kind=kind, taken=taken)
            reader.probe(reg, entry, digest=reg.digest, source=reg.source or NoSource())
        except ManifestError as e:
            refused.append(_refused(entry, e))
            continue
        gap_names.append(reg.name)
        taken.setdefault(names.key(reg.name), reg.name)
    failed = reader.flush()  # the entries whose records the registry would not read back
    refused += [_refused(entry, e) for entry, e in failed.values()]
    return Prepared(
        plan,
        tuple(reg for reg, _ in files if reg.name not in failed),
        tuple(n for n in gap_names if n not in failed),
        tuple(record for reg, record in files if reg.name not in failed),
        tuple(refused),
        origin,
        family,
        kind,
    )


def _refused(entry: ManifestEntry, e: ManifestError) -> Refused:
    """A refusal of ``entry`` as the import reports it: the reason, without the place (the
    refusal names it)."""
    reason = e.message.removeprefix(f"{entry.where}: ")
    reason = reason.removeprefix(f"{entry.path!r}: ").removeprefix(f"{entry.path!r} ")
    return Refused(entry.path, entry.where, reason)


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


def register(  # noqa: PLR0913 - the import command's options, each keyword-only
    store: Store,
    registry: Registry,
    plan: Plan,
    origin: Origin,
    *,
    family: str,
    kind: Kind = Kind.FIXTURE,
    gaps: bool = False,
    replace: bool = False,
    partial: bool = False,
) -> Imported:
    """:func:`prepare` the plan, then :func:`commit` it: all of it, or (a mismatch or a refused
    entry) nothing; with ``partial``, what can be registered is, as the command does without
    ``--strict``, and :attr:`Prepared.refused` is what was left out."""
    if not partial:
        refuse_mismatches(plan)
    prepared = prepare(registry, plan, origin, family=family, kind=kind, gaps=gaps)
    if not partial:
        refuse_entries(prepared)
    return commit(store, registry, prepared, replace=replace)


def refuse_entries(prepared: Prepared) -> None:
    """Refuse a prepared import that leaves out an entry it cannot register (``--strict``, and
    :func:`register` unless ``partial``): an error naming each, nothing stored."""
    if prepared.refused:
        first, *more = prepared.refused
        also = "".join(f"\n  {r}" for r in more[:NAMED])
        rest = f"\n  ... and {len(more) - NAMED} more" if len(more) > NAMED else ""
        raise EntriesRefusedError(
            first.where,
            f"{str(first).removeprefix(first.where + ': ')}{also}{rest}\n"
            "nothing was stored or registered",
            fix="leave the entries out (--exclude GLOB) or fix the manifest; or import without "
            "--strict to register the rest",
        )


class _ReadBack:
    """Every record an import will write, as far as the manifest makes it (its identity and
    what the manifest states; the content manifest comes from its bytes later), written by the
    registry's writer and read back by its reader (:func:`.files.reads_back`) before any byte is
    stored. Records are read back in batches of :data:`BATCH`, the schema backstop once per
    record shape: an import of 300,000 lines costs one registry read per batch, not one per
    line. A batch the reader refuses is read again record by record, so that each refusal is
    blamed on its own entry and its neighbours are judged on their own (DESIGN 20)."""

    BATCH = 4096

    def __init__(self, registry: Registry, file: str) -> None:
        self.registry = registry
        self.file = file
        self.shapes: set[str] = set()
        self.pending: dict[str, tuple[Record, ManifestEntry]] = {}
        # Record name -> (its entry, why the registry would not read it back).
        self.failed: dict[str, tuple[ManifestEntry, ManifestError]] = {}

    def probe(
        self,
        reg: ingest.Registration,
        entry: ManifestEntry,
        *,
        digest: Digest | None,
        source: Source,
    ) -> Record:
        """The record ``reg`` makes, queued to be read back; a record that cannot even be built
        is refused here, blamed on ``entry``."""
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
            self._read_back()
        return record

    def flush(self) -> dict[str, tuple[ManifestEntry, ManifestError]]:
        """Read back what is queued; every record refused so far, by name."""
        self._read_back()
        return self.failed

    def _read_back(self) -> None:
        batch, self.pending = self.pending, {}
        if not batch:
            return
        try:
            self._reads_back([record for record, _ in batch.values()])
        except RegistryError:
            for record, entry in batch.values():  # blame each on its own entry
                try:
                    self._reads_back([record])
                except RegistryError as e:
                    self.failed[record.name] = (entry, blamed(entry, e))

    def _reads_back(self, records: list[Record]) -> None:
        family = family_of(records[0].name)
        registry_files.reads_back(
            records, self.registry.directory / f"{family}.json", shapes=self.shapes
        )


def _registration(
    accepted: Accepted, plan: Plan, *, family: str, kind: Kind, taken: Mapping[str, str]
) -> ingest.Registration:
    """An accepted file as a registration: its bytes checked again against the manifest's
    digest as they are stored, the manifest's fields suggested (a reviewed record with the same
    bytes is kept as it is)."""
    name = record_name(family, accepted.entry, taken)
    return ingest.Registration(
        name,
        kind,
        accepted.located.path,
        accepted.located.source,
        _fields(accepted.entry, plan, name),
        digest=accepted.digest,
        suggested=True,
        shown=accepted.located.shown,
    )


def _gap(
    entry: ManifestEntry,
    plan: Plan,
    origin: Origin,
    *,
    family: str,
    kind: Kind,
    taken: Mapping[str, str],
) -> ingest.Registration:
    name = record_name(family, entry, taken)
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
    expected = awaited(entry) if sized is None else None
    return ingest.Registration(
        name,
        kind,
        source=gap_source(entry, origin),
        annotations=_fields(entry, plan, name),
        gap=Gap(reason, expected=expected),
        digest=sized,
    )


def awaited(entry: ManifestEntry) -> Awaited | None:
    """The digest an absent entry's bytes can be checked by when they come: its SHA-256, else,
    known only by weak digests, the stronger of them (sha1 over md5; metadata keeps them all);
    ``None`` when the manifest states none a gap can await (a sha512 alone, say). Without a
    size it is what the gap awaits."""
    known = {d.algorithm: d.hex for d in entry.digests}
    for algorithm in ("sha256", "sha1", "md5"):
        if algorithm in known and (algorithm == "sha256" or entry.weak_only):
            return Awaited(algorithm, known[algorithm])
    return None


def gap_source(entry: ManifestEntry, origin: Origin) -> Source:
    """Where a gap's bytes will come from: the https URL the manifest lists with a digest the
    gap can check them by (its SHA-256, or a weak one it is known by alone: a ``url`` source,
    so ``fetch`` fills the gap and records their SHA-256), else the origin's place for the file
    when the file can arrive there (a project folder), else no source (a pinned distribution
    does not hold a file it lacks)."""
    if entry.url is not None and awaited(entry) is not None:
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


def outcome(prepared: Prepared, imported: Imported | None) -> str:
    """What the import did (``imported``), or would do (``None``: a dry run): both told from
    what was prepared, never from the flags, so that a dry run says what the import then does."""
    plan = prepared.plan
    origin = f"from {plan.manifest} ({plan.format})"
    if imported is not None:
        return (
            f"imported {len(imported.written)} new record(s), {len(imported.kept)} unchanged, "
            f"{len(imported.gaps)} gap(s) {origin}"
        )
    return (
        f"would import {len(prepared.registrations)} file(s) and declare "
        f"{len(prepared.gap_names)} gap(s) {origin}; nothing stored or registered (--dry-run)"
    )


def absent_fate(prepared: Prepared, imported: Imported | None) -> str:
    """What becomes of the listed files that are absent: declared as gaps when the import
    prepared their gap records, else not registered."""
    if not prepared.gap_names:
        return "not registered (--gaps declares them)"
    return "declared as gaps" if imported is not None else "would be declared as gaps (--gaps)"
