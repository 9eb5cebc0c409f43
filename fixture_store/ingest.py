"""Registering local files and folders: hash, ingest into the store, write the record.

A file that is an archive or NPY/NPZ by its leading bytes, whatever its name and kind, is read
under its limits profile before any of its bytes enter the store, and its record carries the
manifest verification checks it against: a hostile archive, a pickle or an object array is
refused here, never recorded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fixture_store import limits
from fixture_store import registry as registry_mod
from fixture_store.errors import IntegrityError, UnsafeContentError, UsageError
from fixture_store.objects import names, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store, Stored, holding_writer_lock
from fixture_store.readers import content
from fixture_store.registry import (
    MEDIA_TYPE_FORMATS,
    TREE_KINDS,
    Annotations,
    Content,
    Gap,
    HubSource,
    Kind,
    LocalSource,
    NoSource,
    PackageSource,
    Record,
    Registry,
    Source,
    Where,
    check_name,
    family_of,
    parse_kind,
)
from fixture_store.registry.records import ANNOTATION_KEYS

if TYPE_CHECKING:
    from fixture_store.readers.range_tap import RangeDigests as Pending

MEDIA_TYPES = {
    ".npy": "application/x-npy",
    ".npz": "application/x-npz",
    ".onnx": "application/onnx",
    ".pb": "application/x-protobuf",
    ".json": "application/json",
    ".zst": "application/zstd",
    ".lz4": "application/x-lz4",
    ".zip": "application/zip",
    ".tar": "application/x-tar",
}


def media_type_by_name(path: Path) -> str | None:
    """The media type a file's name suggests, for bytes of no format the content readers know:
    the format of an archive or an array is taken from its leading bytes, never from its name."""
    media = MEDIA_TYPES.get(path.suffix.lower())
    return None if media in MEDIA_TYPE_FORMATS else media


def array_name(source: Source, path: Path) -> str:
    """The name of an NPY's one array: the file name its source points at (else ``path``'s),
    without ``.npy``, as the pytest plugin's ``arrays()`` names it."""
    named = source.path if isinstance(source, LocalSource | HubSource | PackageSource) else None
    return Path(named or path.name).name.removesuffix(".npy")


def describe_file(
    path: Path,
    name: str,
    kind: Kind,
    source: Source,
    profile: limits.Limits,
    *,
    shown: str | None = None,
) -> tuple[content.Described, Pending]:
    """The content manifest of a file about to be added, its range digests pending (hashed as it
    is stored); an UnsafeContentError naming ``name`` and ``shown`` (the file the user gave,
    default ``path``), nothing stored, if the readers refuse it."""
    from fixture_store.readers.range_tap import RangeDigests  # numpy: only for a file added

    pending = RangeDigests(name)
    try:
        named = array_name(source, path)
        found = content.describe(
            path, kind=kind, array_name=named, profile=profile, artifact=name, pending=pending
        )
        return found, pending
    except UnsafeContentError as e:
        reason = e.about(name)
        raise UnsafeContentError(
            name,
            f"{shown or path} is refused, nothing was stored or recorded: {reason}",
            fix="an archive may hold only regular files with safe paths, an NPY/NPZ only plain "
            "dtypes (never a pickle), a safetensors file only allowed dtypes whose offsets tile "
            f"its data exactly, within the limits profile {profile.name!r}",
        ) from e


def with_content(record: Record, described: content.Described) -> Record:
    """``record`` with the content its bytes were described with where it says nothing: the
    media type of their format when it names none the readers know, and the manifest of that
    content when it has none. A manifest already recorded is never replaced: one that differs
    is left for verify to report."""
    if described.content is None or record.is_tree:
        return record
    if record.content is None:
        record = dataclasses.replace(record, media_type=described.media_type)
    if record.content is Content.ARCHIVE and record.members is None:
        record = dataclasses.replace(record, members=described.members)
    if record.content is Content.ARRAYS and record.arrays is None and described.arrays:
        record = dataclasses.replace(
            record,
            arrays=MappingProxyType(dict(described.arrays)),
            header=record.header or described.header,
        )
    return record


def ingest_folder(store: Store, folder: Path) -> trees.Tree:
    """Put every regular file of ``folder`` and its manifest into the store."""
    return ingest_folder_stored(store, folder)[0]


def ingest_folder_stored(
    store: Store, folder: Path, *, link: bool = False
) -> tuple[trees.Tree, dict[str, str]]:
    """:func:`ingest_folder` that also returns each member's BLAKE3 (hashed in the same pass)."""
    files = trees.scan_folder(folder)
    stored = store.write_files(list(files.values()), link=link)
    tree = trees.Tree({rel: st.digest for rel, st in zip(files, stored, strict=True)})
    store.put_bytes(tree.canonical_bytes(), tree.digest)
    return tree, {rel: st.blake3 for rel, st in zip(files, stored, strict=True)}


def with_blake3(record: Record, blake3: str | None, members: Mapping[str, str]) -> Record:
    """``record`` with BLAKE3 digests of bytes whose SHA-256 matched it (only fills, never
    replaces: a differing BLAKE3 in a reviewed record is left for verify to report)."""
    own = record.blake3 or blake3
    tree = record.tree
    merged = dict(record.member_blake3)
    if tree is not None:
        merged = {p: b for p, b in {**members, **merged}.items() if p in tree.members}
    if own == record.blake3 and merged == dict(record.member_blake3):
        return record
    return dataclasses.replace(record, blake3=own, member_blake3=MappingProxyType(merged))


def copied_not_linked(store: Store, path: Path, record: Record) -> list[str]:
    """The files of an added ``path`` that do not share their bytes with their store object
    (``add --link`` copies a file on another filesystem or owned by someone else)."""
    tree = record.tree
    if tree is not None:
        base = os.fspath(path)
        pairs = [(os.path.join(base, rel), d.hex) for rel, d in tree]
    else:
        pairs = [(os.fspath(path), record.object.hex)]
    objects = os.fspath(store.objects_dir)
    return [p for p, h in pairs if not os.path.samefile(p, os.path.join(objects, h[:2], h[2:]))]


def _confirm_content(store: Store, record: Record, path: str, *, stated: bool = False) -> None:
    """The stored bytes pass the content check the record will be verified by (and the pass
    is remembered); a manifest ``stated`` by the caller that the bytes do not hold, or a file
    changed while it was added, is refused (range digests not stated were hashed as stored)."""
    failure = content.check(store, record, full=True, digests_read=not stated)
    if failure is not None and stated:
        raise UsageError(
            f"{path}: the arrays manifest given for {record.name} is not what its bytes hold: "
            f"{failure.about(record.name)}",
            fix="give the manifest the file's headers hold, or none: add reads it from them",
        )
    if failure is not None:
        raise UsageError(
            f"{path} changed while it was added: {failure.message}",
            fix="add it again once nothing writes to it: fixture-store add "
            f"{names.shell(str(path))} ...",
        )


def build_record(  # noqa: PLR0913 - a record's values, each keyword-only
    name: str,
    kind: Kind | str,
    digest: Digest | None,
    source: Source,
    *,
    members: trees.Tree | None = None,
    media_type: str | None = None,
    annotations: Annotations | None = None,
    gap: Gap | None = None,
    file: str = "<new record>",
) -> Record:
    """A new record of these values, checked by the rules the registry applies to a record."""
    record = Record(
        name,
        parse_kind(kind, Where(file, name)),
        source,
        digest,
        media_type=media_type,
        members=members,
        gap=gap,
    )
    if annotations is not None:
        record = annotations.apply(record)
    return registry_mod.check_record(record, file=file)


@dataclass(frozen=True)
class Registration:
    """One artifact to register, as ``fixture-store add`` (or an importer) states it.

    ``path`` is the file or folder whose bytes it is (``None`` for a declared ``gap``, which
    has no bytes); ``source`` where they come from (``None``: the path inside the project, or
    for a gap no source at all); ``annotations`` what the record says about them (license,
    description, tolerance, metadata, upstream, seed, input shape, command, ...; a field left
    ``None`` is not stated). The arrays manifest of NPY/NPZ bytes and the members of an archive
    are read from the bytes unless ``annotations`` gives them.

    ``digest`` is what the caller checked the file's bytes as (an importer, against its
    manifest): bytes that no longer have it when stored are refused. With ``suggested`` the
    annotations are what a new record says, not statements over a reviewed one: a record with
    the same bytes is kept as it is (only a BLAKE3 or content manifest it lacked filled in).
    """

    name: str
    kind: Kind | str
    path: Path | None = None
    source: Source | None = None
    annotations: Annotations = field(default_factory=Annotations)
    gap: Gap | None = None
    digest: Digest | None = None
    suggested: bool = False
    unset_metadata: tuple[str, ...] = ()  # metadata keys of the existing record to remove
    stated_in: str | None = None  # where the stated values were typed ("the command line")
    # The file the user gave, when ``path`` is a copy of it (an importer's scratch copy of a
    # cache blob, an installed file, a wheel's member): every message names this one.
    shown: str | None = None

    @property
    def label(self) -> str:
        """The registration's bytes as a message names them: the file the user gave."""
        return self.shown if self.shown is not None else str(self.path)

    @property
    def file(self) -> str:
        """What a refusal of its values blames: where they were typed (``stated_in``), else the
        registry file its record goes to."""
        return self.stated_in or f"provenance/{family_of(self.name)}.json"

    @property
    def where(self) -> Where:
        return Where(self.file, self.name)


class Change(StrEnum):
    """What registering did to an artifact's record."""

    ADDED = "added"  # there was none
    REPLACED = "replaced"  # it differed, and ``replace`` rewrote it
    FILLED = "filled"  # same bytes and statements; the BLAKE3 or manifest it lacked written
    UNCHANGED = "unchanged"  # identical: nothing written


@dataclass(frozen=True)
class Registered:
    """The record one registration left in the registry, what happened to it, and how it
    differs from the record it replaced (``field: old -> new``)."""

    record: Record
    change: Change
    differences: tuple[str, ...] = ()


# What registering states about an artifact beyond its bytes; a field a registration leaves
# ``None`` is kept from the reviewed record. The media type and the manifests belong to the bytes.
_STATED = tuple(sorted(ANNOTATION_KEYS - {"media_type", "arrays"}))
# Fields filled from the bytes when a record lacks them; never a difference for the same bytes.
_FILLED_BY_BYTES = frozenset({"blake3", "media_type", "members", "arrays"})


@dataclass
class _Families:
    """The families one transaction registers into, each read once, under its lock: the
    records as they will be written, and the names whose records are invalid."""

    tx: registry_mod.Transaction
    registry: Registry
    records: dict[str, dict[str, Record]] = field(default_factory=dict)
    invalid: dict[str, frozenset[str]] = field(default_factory=dict)
    keys: dict[str, dict[str, str]] = field(default_factory=dict)  # by names.key, per family

    def of(self, name: str) -> tuple[dict[str, Record], frozenset[str]]:
        family = family_of(name)
        if family not in self.records:
            existing = self.tx.family(family, known=self.registry.families.get(family))
            self.records[family] = dict(existing.records) if existing else {}
            self.invalid[family] = frozenset(existing.invalid) if existing else frozenset()
        return self.records[family], self.invalid[family]

    def colliding(self, name: str) -> str | None:
        """The name of the family that ``name`` is another spelling of (case, Unicode
        normalisation: one file on macOS or Windows), if any; ``name`` is taken from then on."""
        family = family_of(name)
        records, invalid = self.of(name)
        if family not in self.keys:
            self.keys[family] = {names.key(n): n for n in (*records, *invalid)}
        other = self.keys[family].setdefault(names.key(name), name)
        return other if other != name else None


@holding_writer_lock  # from the first temp file until the records are written: gc waits
def register(
    store: Store,
    registry: Registry,
    registrations: Sequence[Registration],
    *,
    replace: bool = False,
    link: bool = False,
    gaps: Sequence[Registration] = (),
) -> tuple[Registered, ...]:
    """Ingest the bytes of every registration and write their records in one registry
    transaction: all of them, or none when one is refused (its file and the reason named).
    Every file is read by the content readers before any is stored (a hostile archive or a
    pickle is refused first), then all are stored in one batch (one filesystem sync for all).

    A record that exists is never changed silently: an identical registration leaves it as it
    is (:attr:`Change.UNCHANGED`; only a BLAKE3 or content manifest it lacked is filled in), one
    that differs in its bytes, kind, source, gap or a stated field is refused with the
    differences unless ``replace`` (then the stated fields replace the record's, and the ones not
    stated are kept). With ``link`` the bytes are hard-linked into the store where possible
    (see :meth:`Store.write_file`; :func:`copied_not_linked` tells which were copied anyway).

    ``gaps`` are declared gaps registered only where the registry has no record of that name
    (valid or invalid): a gap never replaces a record, and one skipped has no outcome.
    """
    _check_distinct((*registrations, *gaps))
    prepared = _prepare_all(store, registry, registrations, link=link)
    declared = [_prepare_gap(g) for g in gaps]
    with registry_mod.transaction(registry.root) as tx:  # checked against the files as they are
        families = _Families(tx, registry)
        outcomes: list[Registered] = []
        refused: list[str] = []
        for reg, (new, described) in zip(registrations, prepared, strict=True):
            records, invalid = families.of(reg.name)
            other = families.colliding(reg.name)
            if other is not None:
                raise UsageError(
                    f"{reg.name} {names.collision_reason(other)}; nothing was registered",
                    fix=f"register it under another name (--name), or use {names.shell(other)}",
                )
            if reg.name in invalid and not replace:
                refused.append(f"{reg.name} has an invalid record; fix it or pass --replace")
                continue
            outcome = _decide(reg, records.get(reg.name), new, described)
            if outcome.change is Change.REPLACED and not replace:
                refused.append(_refusal(reg, outcome.differences))
                continue
            records[reg.name] = outcome.record
            outcomes.append(outcome)
        for gap in declared:
            records, invalid = families.of(gap.name)
            if families.colliding(gap.name) is not None:
                continue  # a gap never stands beside another spelling of a record's name
            if gap.name not in records and gap.name not in invalid:
                records[gap.name] = gap
                outcomes.append(Registered(gap, Change.ADDED))
        if refused:
            raise UsageError(
                "\n".join(refused) + "\nnothing was registered",
                fix="compare first (fixture-store show NAME; fixture-store regenerate for a "
                "generated artifact), or pass --replace to rewrite the record",
            )
        changed = {family_of(o.record.name) for o in outcomes if o.change is not Change.UNCHANGED}
        for family in sorted(changed):
            tx.write(family, families.records[family].values())
    return tuple(outcomes)


def add(  # noqa: PLR0913 - the add command's options, each keyword-only
    store: Store,
    registry: Registry,
    path: str | os.PathLike[str] | None,
    *,
    name: str,
    kind: str,
    source: Source | None = None,
    extra: Mapping[str, Any] | None = None,
    annotations: Annotations | None = None,
    gap: Gap | None = None,
    replace: bool = False,
    link: bool = False,
) -> Record:
    """Register one file or folder (``None`` and a ``gap``: a declared gap) and return its
    record: :func:`register` of one :class:`Registration`.

    ``extra`` holds descriptive fields (``license``, ``tolerance``, ``upstream``, ...) in their
    JSON form, checked as the registry checks them; ``annotations`` the same as values (the
    fields of both are merged, ``extra``'s last).
    """
    name = check_name(name)  # as the registry holds it (its path in NFC)
    file = f"provenance/{family_of(name)}.json"
    given = annotations or Annotations()
    if extra:
        parsed = Annotations.from_json(extra, Where(file, name))
        given = dataclasses.replace(given, **_given_fields(parsed))
    registration = Registration(
        name, kind, Path(path) if path is not None else None, source, given, gap
    )
    [done] = register(store, registry, [registration], replace=replace, link=link)
    return done.record


def differences(old: Record, new: Record, stated: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """``field: old -> new`` for every field of two records' JSON that differs; for the same
    bytes, a field the bytes fill in (BLAKE3, media type, manifests) is no difference unless
    it is ``stated`` (an arrays manifest an importer gives, say)."""
    a, b = old.to_json(), new.to_json()
    same_bytes = old.digest is not None and old.digest == new.digest
    skip = (_FILLED_BY_BYTES - stated) if same_bytes else frozenset({"members", "blake3"})
    return tuple(
        f"{key}: {_shown(a.get(key))} -> {_shown(b.get(key))}"
        for key in sorted(set(a) | set(b))
        if key not in skip and a.get(key) != b.get(key)
    )


def _given_fields(annotations: Annotations) -> dict[str, Any]:
    return {
        f.name: getattr(annotations, f.name)
        for f in dataclasses.fields(annotations)
        if getattr(annotations, f.name) is not None
    }


def _shown(value: Any, limit: int = 120) -> str:
    if value is None:
        return "(none)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refusal(reg: Registration, diffs: Sequence[str]) -> str:
    shown = "".join(f"\n    {d}" for d in diffs)
    what = f"this registration ({reg.label})" if reg.path is not None else "this declared gap"
    return f"{reg.name} is already registered, and {what} differs:{shown}"


def _check_distinct(registrations: Sequence[Registration]) -> None:
    seen: dict[str, Registration] = {}
    for reg in registrations:
        check_name(reg.name)
        if reg.name in seen:
            raise UsageError(
                f"{reg.name} is named twice in one registration ({seen[reg.name].label} and "
                f"{reg.label}); nothing was registered",
                fix="give each file its own --name, or add them from different families",
            )
        seen[reg.name] = reg


def _metadata(reg: Registration, old: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The metadata a registration over a record whose metadata is ``old`` writes: each key it
    states set over ``old`` (the others kept: an imported provenance survives a changed key),
    less the keys it unsets, each of which ``old`` must have."""
    meta = {**(old or {}), **(reg.annotations.metadata or {})}
    for key in reg.unset_metadata:
        if key not in meta:
            raise UsageError(
                f"{reg.name}: --unset-metadata {key!r}: the record has no such metadata key "
                f"(its keys: {', '.join(sorted(old or {})) or 'none'})",
                fix="name a key the record has (fixture-store show NAME), or leave the option out",
            )
        del meta[key]
    return meta or None


def _lifted(old: Record, new: Record) -> Record:
    """``old`` without its gap when ``new`` brings the bytes it awaits (the digest and size
    it kept, or the SHA-256 it expected): a gap lifts when its bytes arrive. Any other
    record, as it is."""
    if old.gap is None or new.gap is not None or new.digest is None:
        return old
    filled = old.filled(new.digest)  # the rule fetch records a filled gap by, too
    if filled is None:
        return old
    source = new.source if isinstance(old.source, NoSource) else old.source
    return dataclasses.replace(filled, source=source)


def _decide(
    reg: Registration, old: Record | None, new: Record, described: content.Described
) -> Registered:
    """What registering ``new`` over ``old`` writes; :attr:`Change.REPLACED` when it differs
    (the caller refuses that without ``replace``)."""
    if old is None:
        _metadata(reg, None)  # a key to unset from a record that does not exist is refused
        return Registered(new, Change.ADDED)
    old = _lifted(old, new)
    if reg.suggested and old.digest is not None and old.digest == new.digest:
        filled = with_content(with_blake3(old, new.blake3, new.member_blake3), described)
        return Registered(filled, Change.UNCHANGED if filled == old else Change.FILLED)
    kept = {key: getattr(old, key) for key in _STATED if getattr(reg.annotations, key) is None}
    kept["metadata"] = _metadata(reg, old.metadata)
    merged = dataclasses.replace(new, lineage=old.lineage, **kept)
    if old.digest is not None and old.digest == new.digest:
        # The same bytes: what the reviewed record says of them stays; only what it lacked
        # (BLAKE3, the content manifest) is filled in.
        bytes_own = {
            k: getattr(old, k)
            for k in ("media_type", "members", "arrays")
            if getattr(reg.annotations, k, None) is None
        }
        merged = dataclasses.replace(merged, **bytes_own, blake3=old.blake3)
        merged = with_content(with_blake3(merged, new.blake3, new.member_blake3), described)
    merged = registry_mod.check_record(merged, file=reg.file)
    stated = frozenset(k for k in ("media_type", "arrays") if getattr(reg.annotations, k))
    diffs = differences(old, merged, stated)
    if diffs:
        return Registered(merged, Change.REPLACED, diffs)
    return Registered(merged, Change.UNCHANGED if merged == old else Change.FILLED)


@dataclass(frozen=True)
class _File:
    """A file registration read by the content readers, its bytes not stored yet."""

    reg: Registration
    path: Path
    source: Source
    kind: Kind
    described: content.Described
    pending: Pending  # the digests of its array ranges, taken as the store hashes it


def _prepare_all(
    store: Store, registry: Registry, registrations: Sequence[Registration], *, link: bool
) -> list[tuple[Record, content.Described]]:
    """The record of every registration, its bytes in the store, and what they were read as:
    every file described first, then all stored in one batch."""
    staged = [_prepare(store, registry, r, link=link) for r in registrations]
    files = [s for s in staged if isinstance(s, _File)]
    taps = [f.pending.update if f.pending else None for f in files]
    stored = iter(store.write_files([f.path for f in files], link=link, taps=taps) if files else [])
    return [_prepare_file(store, s, next(stored)) if isinstance(s, _File) else s for s in staged]


def _prepare(
    store: Store, registry: Registry, reg: Registration, *, link: bool
) -> tuple[Record, content.Described] | _File:
    """The record of a gap or a folder (its bytes stored), or a file described."""
    if reg.gap is not None:
        return _prepare_gap(reg), content.PLAIN
    if reg.path is None:
        raise UsageError(
            f"{reg.name}: no bytes to register", fix="give its PATH, or --gap REASON for a gap"
        )
    p = reg.path
    if not p.exists():
        raise UsageError(f"{reg.label} does not exist")
    source = reg.source if reg.source is not None else _local_source(registry, p)
    source.check(reg.where)  # before any byte enters the store
    if p.is_dir():
        return _prepare_folder(store, reg, p, source, link=link), content.PLAIN
    if reg.kind in TREE_KINDS:
        raise UsageError(f"{reg.label} is a file: --kind {reg.kind} needs a folder")
    kind = parse_kind(reg.kind, reg.where)
    profile = limits.profile(reg.annotations.profile)
    described = describe_file(p, reg.name, kind, source, profile, shown=reg.label)
    return _File(reg, p, source, kind, *described)


def _prepare_gap(reg: Registration) -> Record:
    if reg.path is not None:
        raise UsageError(
            f"{reg.name}: a declared gap has no bytes, but {reg.path} was given",
            fix="give the PATH to register its bytes, or --gap REASON alone to declare a gap",
        )
    source = reg.source if reg.source is not None else NoSource()
    return build_record(  # a gap's digest: the bytes it awaits, when known with their size
        reg.name,
        reg.kind,
        reg.digest,
        source,
        annotations=reg.annotations,
        gap=reg.gap,
        file=reg.file,
    )


def _local_source(registry: Registry, p: Path) -> LocalSource:
    try:
        return LocalSource(p.absolute().relative_to(registry.root).as_posix())
    except ValueError:
        raise UsageError(
            f"{p} is outside the project {registry.root}; a local source must be a path inside it",
            fix="copy it into the project, or give --source https://... / hf://...",
        ) from None


def _prepare_folder(
    store: Store, reg: Registration, p: Path, source: Source, *, link: bool
) -> Record:
    if reg.kind not in TREE_KINDS:
        raise UsageError(f"{reg.label} is a folder: use --kind tree or --kind onnx-case")
    tree, member_b3 = ingest_folder_stored(store, p, link=link)
    record = build_record(
        reg.name,
        reg.kind,
        tree.digest,
        source,
        members=tree,
        annotations=reg.annotations,
        file=reg.file,
    )
    return with_blake3(record, None, member_b3)


def _ranged(arrays: Mapping[str, Mapping[str, Any]] | None) -> bool:
    """Whether a manifest's arrays carry byte ranges (then its header goes with it)."""
    return any("offset" in spec for spec in (arrays or {}).values())


def _prepare_file(store: Store, file: _File, stored: Stored) -> tuple[Record, content.Described]:
    """The record of a described file whose bytes are ``stored``: refused if they are not the
    bytes the caller checked, or not what the record says of them."""
    reg, described = file.reg, file.described
    if file.pending and described.arrays is not None:  # digests of the bytes as stored
        described = dataclasses.replace(described, arrays=file.pending.fill(described.arrays))
    if reg.digest is not None and stored.digest != reg.digest:
        raise IntegrityError(
            f"{reg.label} changed while it was registered: it now has {stored.digest}, it was "
            f"checked as {reg.digest}; nothing was registered",
            fix="register it again once nothing writes to it",
        )
    annotations = reg.annotations
    arrays = annotations.arrays or described.arrays
    record = build_record(
        reg.name,
        file.kind,
        stored.digest,
        file.source,
        media_type=described.media_type or media_type_by_name(Path(reg.label)),
        members=described.members,
        # The arrays of the bytes, unless the caller gives a manifest of its own.
        annotations=dataclasses.replace(
            annotations,
            arrays=arrays,
            header=annotations.header or (described.header if _ranged(arrays) else None),
        ),
        file=reg.file,
    )
    record = with_blake3(record, stored.blake3, {})
    _confirm_content(store, record, reg.label, stated=annotations.arrays is not None)
    return record, described
