"""Registering local files and folders: hash, ingest into the store, write the record.

A file that is an archive or NPY/NPZ by its leading bytes, whatever its name and kind, is read
under its limits profile before any of its bytes enter the store, and its record carries the
manifest verification checks it against: a hostile archive, a pickle or an object array is
refused here, never recorded.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fixture_store import limits
from fixture_store import registry as registry_mod
from fixture_store.errors import UnsafeContentError, UsageError
from fixture_store.objects import trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store, holding_writer_lock
from fixture_store.readers import content
from fixture_store.registry import (
    MEDIA_TYPE_FORMATS,
    TREE_KINDS,
    Annotations,
    Content,
    HubSource,
    Kind,
    LocalSource,
    PackageSource,
    Record,
    Registry,
    Source,
    Where,
    check_name,
    family_of,
    parse_kind,
)

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
    path: Path, name: str, kind: Kind, source: Source, profile: limits.Limits
) -> content.Described:
    """The content manifest of a file about to be added; an UnsafeContentError naming ``name``
    (nothing stored, nothing recorded) when the readers refuse it."""
    try:
        return content.describe(
            path, kind=kind, array_name=array_name(source, path), profile=profile, artifact=name
        )
    except UnsafeContentError as e:
        reason = e.message.removeprefix(f"{name}: ")
        raise UnsafeContentError(
            name,
            f"{path} is refused, nothing was stored or recorded: {reason}",
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
        record = dataclasses.replace(record, arrays=MappingProxyType(dict(described.arrays)))
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


def _confirm_content(store: Store, record: Record, path: Path) -> None:
    """The stored bytes pass the content check the record will be verified by (and the pass
    is remembered); a file changed while it was added is refused."""
    failure = content.check(store, record, full=True)
    if failure is not None:
        raise UsageError(
            f"{path} changed while it was added: {failure.message}",
            fix=f"add it again once nothing writes to it: fixture-store add {path} ...",
        )


def build_record(
    name: str,
    kind: Kind | str,
    digest: Digest,
    source: Source,
    *,
    members: trees.Tree | None = None,
    media_type: str | None = None,
    annotations: Annotations | None = None,
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
    )
    if annotations is not None:
        record = annotations.apply(record)
    return registry_mod.check_record(record, file=file)


@holding_writer_lock  # from the first temp file until the record is written: gc waits
def add(  # noqa: PLR0913 - the add command's options, each keyword-only
    store: Store,
    registry: Registry,
    path: str | os.PathLike[str],
    *,
    name: str,
    kind: str,
    source: Source | None = None,
    extra: Mapping[str, Any] | None = None,
    replace: bool = False,
    link: bool = False,
) -> Record:
    """Ingest a local file or folder and write its record; never overwrite a record silently.

    ``source`` is checked as the registry checks it (a local source inside the project by
    default); ``extra`` holds descriptive fields such as ``license``, in their JSON form.
    With ``link`` the bytes are hard-linked into the store where possible instead of copied
    (see :meth:`Store.write_file`); :func:`copied_not_linked` tells which were copied anyway.
    """
    check_name(name)
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p} does not exist")
    if source is None:
        try:
            rel = p.absolute().relative_to(registry.root).as_posix()
        except ValueError:
            rel = None
        if rel is None:
            raise UsageError(
                f"{p} is outside the project {registry.root}; a local source must be a path "
                "inside it",
                fix="copy it into the project, or give --source https://... / hf://...",
            )
        source = LocalSource(rel)
    family = family_of(name)
    file = f"provenance/{family}.json"
    source.check(Where(file, name))  # before any byte enters the store
    annotations = Annotations.from_json(extra or {}, Where(file, name))
    described = content.PLAIN  # a folder's members are objects of their own
    if p.is_dir():
        if kind not in TREE_KINDS:
            raise UsageError(f"{p} is a folder: use --kind tree or --kind onnx-case")
        tree, member_b3 = ingest_folder_stored(store, p, link=link)
        record = build_record(
            name,
            kind,
            tree.digest,
            source,
            members=tree,
            annotations=annotations,
            file=file,
        )
        record = with_blake3(record, None, member_b3)
    else:
        if kind in TREE_KINDS:
            raise UsageError(f"{p} is a file: --kind {kind} needs a folder")
        profile = limits.profile(annotations.profile)
        described = describe_file(p, name, parse_kind(kind, Where(file, name)), source, profile)
        stored = store.write_file(p, link=link)
        record = build_record(
            name,
            kind,
            stored.digest,
            source,
            media_type=described.media_type or media_type_by_name(p),
            members=described.members,
            # The arrays of the bytes, unless the caller gives a manifest of its own.
            annotations=dataclasses.replace(
                annotations, arrays=annotations.arrays or described.arrays
            ),
            file=file,
        )
        record = with_blake3(record, stored.blake3, {})
        _confirm_content(store, record, p)
    with registry_mod.transaction(registry.root) as tx:  # checked against the file as it is now
        existing_file = tx.family(family, known=registry.families.get(family))
        records = dict(existing_file.records) if existing_file else {}
        if existing_file and name in existing_file.invalid and not replace:
            raise UsageError(f"{name} has an invalid record; fix it or pass --replace")
        old = records.get(name)
        if old is not None and old.digest != record.digest and not replace:
            raise UsageError(
                f"{name} is already registered with {old.digest}; the new bytes are "
                f"{record.digest}",
                fix="compare first (fixture-store regenerate), or pass --replace to rewrite "
                "the record",
            )
        if old is not None and old.digest == record.digest:
            # Unchanged bytes: keep the reviewed record, only filling in BLAKE3 and the content
            # manifest it lacked.
            record = with_content(with_blake3(old, record.blake3, record.member_blake3), described)
        records[name] = record
        tx.write(family, records.values())
    return record
