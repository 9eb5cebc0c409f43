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

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fixture_store import ingest
from fixture_store.errors import EXIT_FAILED, FixtureStoreError, RegistryError, UsageError
from fixture_store.importers.entry import ManifestEntry, ManifestError, Refused
from fixture_store.importers.fields import MEAN_ABS, UNKNOWN_FIELDS
from fixture_store.importers.plan import Accepted, Origin, Plan
from fixture_store.objects import names
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import (
    Annotations,
    Gap,
    Kind,
    NoSource,
    Record,
    Registry,
    Source,
    Tolerance,
    Where,
    check_name,
    family_of,
)
from fixture_store.registry import files as registry_files
from fixture_store.registry.frozen import thaw

IMPORTED_FROM = "imported_from"  # the metadata field saying which manifest a record came from


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
        "digests": [str(d) for d in entry.digests],
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
    reports and the real import registers (the same value, by the same code)."""

    plan: Plan
    registrations: tuple[ingest.Registration, ...]
    gaps: tuple[ingest.Registration, ...]
    records: tuple[Record, ...]  # each accepted file's record as far as the manifest makes it
    # Every entry left out because it cannot be registered (the plan's refusals, its
    # mismatches, and the entries whose records could not be built), each with its reason.
    refused: tuple[Refused, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "records": {r.name: r.to_json() for r in self.records},
            "gap_records": [g.name for g in self.gaps],
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
    known = registry.families.get(family)
    taken = {names.key(n): n for n in (*known.records, *known.invalid)} if known else {}
    refused = [
        *plan.refused,
        *(Refused(m.entry.path, m.entry.where, m.reason) for m in plan.mismatched),
    ]
    registrations: list[ingest.Registration] = []
    stated_gaps: list[ingest.Registration] = []
    records: list[Record] = []
    for accepted in plan.accepted:
        try:
            reg = _registration(accepted, plan, family=family, kind=kind, taken=taken)
            record = _probe(
                reg,
                accepted.entry,
                registry,
                file,
                digest=accepted.digest,
                source=accepted.located.source,
            )
        except ManifestError as e:
            refused.append(_refused(accepted.entry, e))
            continue
        registrations.append(reg)
        records.append(record)
        taken.setdefault(names.key(reg.name), reg.name)  # a later spelling of it collides
    for entry in plan.absent if gaps else ():
        try:
            reg = _gap(entry, plan, origin, family=family, kind=kind, taken=taken)
            _probe(reg, entry, registry, file, digest=reg.digest, source=reg.source or NoSource())
        except ManifestError as e:
            refused.append(_refused(entry, e))
            continue
        stated_gaps.append(reg)
        taken.setdefault(names.key(reg.name), reg.name)
    return Prepared(plan, tuple(registrations), tuple(stated_gaps), tuple(records), tuple(refused))


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
        store, registry, prepared.registrations, replace=replace, gaps=prepared.gaps
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


def _probe(
    reg: ingest.Registration,
    entry: ManifestEntry,
    registry: Registry,
    file: str,
    *,
    digest: Digest | None,
    source: Source,
) -> Record:
    """The record ``reg`` makes, read back as the registry reads it; a refusal blamed on the
    manifest's ``entry``."""
    try:
        probe = ingest.build_record(
            reg.name, reg.kind, digest, source, annotations=reg.annotations, gap=reg.gap, file=file
        )
        registry_files.reads_back([probe], registry.directory / f"{family_of(reg.name)}.json")
    except RegistryError as e:
        raise blamed(entry, e) from e
    return probe


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
    # The digest the manifest states is kept: with its size, the record's digest (the bytes
    # that fill the gap must have it); without, the digest the gap awaits.
    known = entry.sha256
    sized = Digest(known, entry.size) if known is not None and entry.size is not None else None
    expected = f"sha256:{known}" if known is not None and sized is None else None
    return ingest.Registration(
        name,
        kind,
        source=origin.source(entry.path),
        annotations=_fields(entry, plan, name),
        gap=Gap(reason, expected=expected),
        digest=sized,
    )


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
        f"{len(prepared.gaps)} gap(s) {origin}; nothing stored or registered (--dry-run)"
    )


def absent_fate(prepared: Prepared, imported: Imported | None) -> str:
    """What becomes of the listed files that are absent: declared as gaps when the import
    prepared their gap records, else not registered."""
    if not prepared.gaps:
        return "not registered (--gaps declares them)"
    return "declared as gaps" if imported is not None else "would be declared as gaps (--gaps)"
