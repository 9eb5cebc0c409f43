"""Writing a family's records in the stable format (:func:`.documents.dumps`), under a
transaction's lock (see :mod:`.transactions`): each file replaced atomically (a temp file beside
it, fsync, rename, fsync of the folder), so a killed writer leaves the old document or the new
one, never a torn one. A sharded family is written shard by shard, only the shards whose records
changed, then its file: each record is old or new after a crash, and a family being sharded
keeps every record in its file until the shards are all written. Every record written must read
back (:func:`reads_back`) as the registry would load it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import shards
from fixture_store.registry.documents import (
    FORMAT_VERSION,
    MAX_DEPTH,
    SchemaPasses,
    dumps,
    parse_document,
    parse_records,
    shape_of,
)
from fixture_store.registry.family import FamilyFile
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.raw_files import family_of
from fixture_store.registry.reading import load_file, text_digest
from fixture_store.registry.records import Record, check_family, parse_record


def replace_family(
    directory: Path,
    family: str,
    records: Iterable[Record],
    *,
    existing: FamilyFile | None,
    description: str | None,
    known_failures: Iterable[KnownFailure] | None,
) -> Path:
    """Write a family's file (and shards) atomically in the stable format (the caller holds the
    lock); the family's file is returned."""
    check_family(family)
    desc = description if description is not None else (existing.description if existing else None)
    kfs = (
        list(known_failures)
        if known_failures is not None
        else (list(existing.known_failures) if existing else [])
    )
    head = _head(desc, kfs)
    by_name = {r.name: r for r in sorted(records, key=lambda r: r.name)}
    for name in by_name:
        if family_of(name) != family:
            raise UsageError(f"record {name!r} does not belong to family {family!r}")
    old = existing.records if existing else {}
    reads_back([r for n, r in by_name.items() if old.get(n) != r], directory / f"{family}.json")
    # Invalid records stay as written, never dropped by another record's write.
    written = existing.invalid_json if existing else {}
    stated = {n: v for n, v in written.items() if n not in by_name}
    path = directory / f"{family}.json"
    try:
        if existing is None or not existing.sharded:
            doc = {**head, "records": _records_json(sorted({*by_name, *stated}), by_name, stated)}
            text = _dumps_checked(doc, path)
            if len(text.encode("utf-8", "surrogatepass")) <= shards.SHARD_ABOVE:
                _remove_leftover(path)
                write_atomically(directory, path, text)
                return path
            existing = _shard_as_it_is(path, existing)
        _write_sharded(path, head, by_name, stated, existing)
    except OSError as e:
        # Disk full, quota, a file size limit, a read-only folder: the old file is untouched
        # and the temp file is gone, so nothing is lost; say so and what to do.
        raise RegistryError(
            f"cannot write the registry file: {e.strerror or e}; it was left as it was and "
            "nothing was changed",
            file=str(path),
            fix=f"free space or fix permissions in {directory}, then run the command again",
        ) from e
    return path


def reads_back(
    records: Iterable[Record], file: str | os.PathLike[str], *, shapes: set[str] | None = None
) -> None:
    """Refuse records that would not read back from the registry as they are: each is written
    by the registry's own writer (:func:`dumps`) and parsed by the very code that loads a family
    file (the document's bounds, the record parser, the schema), and must come back valid and
    equal. A record built in code (``add``, ``import``, ``regenerate --accept``) is thus held to
    the rules of one read from disk, before anything is written; a write that would leave the
    registry calling its own record invalid writes nothing. (Equal as JSON: a record built in
    code may hold lists where a parsed one holds tuples.)"""
    by_name = {r.name: r for r in records}
    if not by_name:
        return
    path = Path(file)
    if shapes is not None:
        by_name = _read_back_known_shapes(by_name, path, shapes)
        if not by_name:
            return
    family = family_of(next(iter(by_name)))
    try:
        text = dumps(
            {"format_version": FORMAT_VERSION, "records": _records_json(by_name, by_name, {})}
        )
        doc = parse_document(text, str(path))
        parsed, invalid = parse_records(
            doc["records"], path, family, SchemaPasses(None), suspect=doc.suspect, shapes=shapes
        )
    except RegistryError as e:
        invalid, parsed = {e.record or next(iter(by_name)): e}, {}
    except RecursionError:  # too deep to print: nested far past MAX_DEPTH
        raise RegistryError(
            f"a record is nested more than {MAX_DEPTH} levels deep; nothing was written",
            file=str(path),
            fix="fix that value where it came from, then run the command again",
        ) from None
    for name, error in sorted(invalid.items()):
        raise _would_be_invalid(path, name, error)
    for name, record in parsed.items():
        if record.to_json() != by_name[name].to_json():
            raise _reads_back_otherwise(path, name)


def _would_be_invalid(path: Path, name: str, error: RegistryError) -> RegistryError:
    """A record the registry would call invalid once written: nothing is written."""
    return RegistryError(
        f"{error.reason}; the registry would call this record invalid, so nothing was written",
        file=str(path),
        record=name,
        field=error.field,
        fix="fix that value where it came from (the file, manifest or option it was read "
        "from), then run the command again",
    )


def _reads_back_otherwise(path: Path, name: str) -> RegistryError:
    """A record that reads back other than it was built (a bug of ours): nothing is written."""
    return RegistryError(
        "reads back from the registry other than it was built; nothing was written "
        "(a fixture-store bug: please report it with the command)",
        file=str(path),
        record=name,
    )


def _read_back_known_shapes(
    by_name: dict[str, Record], path: Path, shapes: set[str]
) -> dict[str, Record]:
    """Records of a shape some record already read back through the text (see
    :func:`.documents.shape_of`) are parsed from their JSON by the record parser and must come
    back equal; the text form of a shape's values is proven by its first record, which is
    returned (with the first of every shape not seen before) to be read back through the text."""
    rest: dict[str, Record] = {}
    first: set[str] = set()  # shapes whose first record of this call goes through the text
    for name, record in by_name.items():
        raw = record.to_json()
        shape = shape_of(raw)
        if shape not in shapes and shape not in first:
            first.add(shape)
            rest[name] = record
            continue
        try:
            again = parse_record(name, raw, file=str(path))
        except RegistryError as e:
            raise _would_be_invalid(path, name, e) from e
        if again != record and again.to_json() != raw:  # equal values print equal JSON
            raise _reads_back_otherwise(path, name)
    return rest


def _head(description: str | None, known_failures: list[KnownFailure]) -> dict[str, Any]:
    """A family's document without its records."""
    head: dict[str, Any] = {"format_version": FORMAT_VERSION}
    if description:
        head["description"] = description
    if known_failures:
        head["known_failures"] = [kf.to_json() for kf in known_failures]
    return head


def _records_json(
    names: Iterable[str], by_name: Mapping[str, Record], stated: Mapping[str, Any]
) -> dict[str, Any]:
    return {n: by_name[n].to_json() if n in by_name else stated[n] for n in names}


def _dumps_checked(doc: Mapping[str, Any], path: Path) -> str:
    try:
        return dumps(doc)
    except RecursionError:
        raise RegistryError(
            "an invalid record is nested too deep to be written back; nothing was written",
            file=str(path),
            fix=f"fixture-store verify names it: fix or remove it in {path}, then run the "
            "command again",
        ) from None


def _shard_as_it_is(path: Path, existing: FamilyFile | None) -> FamilyFile:
    """Shard a family without changing a record: its records are copied into shards first
    (an interrupted copy leaves copies that loading accepts and the next write removes or
    replaces), then its file is replaced by one that says it is sharded. A new family gets
    that file first, and its records then arrive shard by shard. Returns the family as it
    now is on disk."""
    folder = shards.folder(path)
    with shards.registry_folder(path.parent) as directory:
        directory.folder(folder.name, create=True).close()
    head: dict[str, Any] = {"format_version": FORMAT_VERSION}
    if existing is not None:
        by_name, stated = existing.records, existing.invalid_json
        copies = shards.grouped(sorted({*by_name, *stated}))
        for shard, names in copies.items():
            doc = {
                "format_version": FORMAT_VERSION,
                "records": _records_json(names, by_name, stated),
            }
            write_atomically(path.parent, folder / f"{shard}.json", _dumps_checked(doc, path))
        _remove_shards(path, keep=copies)
        head = _head(existing.description, list(existing.known_failures))
    write_atomically(path.parent, path, dumps({**head, "shards": shards.COUNT}))
    return load_file(path)


def _write_sharded(
    path: Path,
    head: dict[str, Any],
    by_name: Mapping[str, Record],
    stated: Mapping[str, Any],
    existing: FamilyFile,
) -> None:
    """Write a sharded family: the shards whose records changed, one by one, then its file if
    it changed; a shard left empty is removed."""
    folder = shards.folder(path)
    new = shards.grouped([*by_name, *stated])
    old = shards.grouped([*existing.records, *existing.invalid])
    wrote = False
    for shard, names in sorted(new.items()):
        names.sort()
        if _shard_unchanged(existing, names, old.get(shard), by_name):
            continue
        target = folder / f"{shard}.json"
        doc = {"format_version": FORMAT_VERSION, "records": _records_json(names, by_name, stated)}
        text = _dumps_checked(doc, target)
        if existing.digests.get(shards.relative(path, target)) == text_digest(text):
            continue
        try:
            write_atomically(path.parent, target, text)
        except OSError as e:
            if not wrote:
                raise  # nothing a read sees has changed yet
            raise RegistryError(
                f"cannot write the registry file: {e.strerror or e}; the family's shards are "
                "replaced one by one, so each record is as it was or as written",
                file=str(target),
                fix=f"free space or fix permissions in {folder}, then run the command again",
            ) from e
        wrote = True
    _remove_shards(path, keep=new)
    head_text = dumps({**head, "shards": shards.COUNT})
    if existing.digests.get(path.name) != text_digest(head_text):
        write_atomically(path.parent, path, head_text)


def _remove_shards(path: Path, keep: Mapping[str, object]) -> bool:
    """Remove the family's shard files but those named in ``keep``; whether any was."""
    gone = [p for p in shards.shard_files(path) if p.stem not in keep]
    if gone:
        with (
            shards.registry_folder(path.parent) as directory,
            directory.folder(shards.folder(path).name) as folder,
        ):
            for p in gone:
                folder.unlink(p.name)
            folder.fsync()
    return bool(gone)


def _shard_unchanged(
    existing: FamilyFile, names: list[str], old: list[str] | None, by_name: Mapping[str, Record]
) -> bool:
    """Whether a shard would hold exactly the records it holds now (its text is then the same)."""
    if old is None or sorted(old) != names:
        return False
    return all(
        (n in by_name and _same_text(existing.records.get(n), by_name[n]))
        or (n not in by_name and n in existing.invalid)
        for n in names
    )


def _same_text(old: Record | None, new: Record) -> bool:
    """Whether ``new`` is written as ``old`` was: the same record in the same form (a record
    equals its migration, whose manifest is written in another form)."""
    return old == new and old is not None and old.arrays_as_objects == new.arrays_as_objects


def _remove_leftover(path: Path) -> None:
    """Before an unsharded family's file is replaced: remove the shard copies that an
    interrupted sharding left (loading checked they are copies of records the file holds)."""
    if _remove_shards(path, keep={}):
        with shards.registry_folder(path.parent) as directory:
            with contextlib.suppress(OSError):
                directory.rmdir(shards.folder(path).name)
            directory.fsync()


def write_atomically(directory: Path, path: Path, text: str) -> None:
    """Replace the registry file ``path`` (a family's file in ``directory``, ``provenance/``, or
    one of its shards one folder below) through the path primitive: a temp file beside it,
    fsync, rename, fsync of the folder, so a crash leaves the old text or the new; a link at
    any step is refused, never written through."""
    data = text.encode("utf-8")
    parts = path.relative_to(directory).parts
    with (
        shards.registry_folder(directory) as base,
        base.folder(*parts[:-1], create=True) as folder,
    ):
        folder.write_atomically(parts[-1], data, mode=0o644, temp=f".{parts[-1]}.")
