"""Reading and writing registry files: one ``provenance/<family>.json`` per family, its records
in shards ``provenance/<family>/<ab>.json`` once it grows large (see :mod:`.shards`).

Files are JSON with sorted keys, two-space indent and a trailing newline, so rewriting an unchanged
record is byte-identical and diffs read well. Duplicate keys anywhere are an error.

Writes are transactions (DESIGN decision 10): :func:`transaction` holds the registry lock
(``provenance/.locks/registry.lock``, a flock the kernel releases if its holder dies; the folder
ignores itself in git), re-reads what it changes under it, and replaces a file atomically (a
temp file beside it, fsync, rename, fsync of the folder), so concurrent writers never lose each
other's records and a killed one leaves the old document or the new one, never a torn one; the
next transaction removes its temp file. A sharded family is written shard by shard, only the
shards whose records changed, then its file: each record is old or new after a crash, and a
family being sharded keeps every record in its file until the shards are all written.
:func:`write_family`, given a registry read earlier,
refuses to write when the file changed since. A command that also publishes objects takes the
store's writer lock first (see :mod:`fixture_store.objects.store`), then this one.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from fixture_store.errors import RegistryError, UnknownArtifactError, UsageError
from fixture_store.objects import anchored, fsutil, statecache
from fixture_store.registry import nesting, shards
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.known_failures import parse as parse_known_failure
from fixture_store.registry.records import Record, check_family, family_of, parse_record

FORMAT_VERSION = 1
DIRNAME = "provenance"
ENV_VAR = "FIXTURE_STORE_REGISTRY"
LOCKS_DIRNAME = ".locks"
LOCK_NAME = "registry.lock"
# Deeper JSON than this is refused (metadata is the only free-form field; real ones nest a few
# levels), and so are integer literals longer than any 64-bit size (see :mod:`.nesting`).
MAX_DEPTH = nesting.MAX_DEPTH
MAX_INTEGER_DIGITS = nesting.MAX_INTEGER_DIGITS
# The temp file of a family file being replaced: ``.<family>.json.<random>.tmp``.
_TEMP_NAME = re.compile(r"\.[a-z0-9][a-z0-9_-]*\.json\.[A-Za-z0-9_]+\.tmp")


@cache
def schema() -> dict[str, Any]:
    text = resources.files("fixture_store.registry").joinpath("schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers keys it saw twice, so the error can say where."""

    duplicates: tuple[str, ...] = ()


def _keep_duplicates(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    seen: list[str] = []
    for key, value in pairs:
        if key in out:
            seen.append(key)
        out[key] = value
    out.duplicates = tuple(seen)
    return out


class _Duplicate(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate
    return out


def _parse_unique(text: str) -> tuple[Any, bool]:
    """The parsed document, or ``None`` if some object repeats a key, and whether a value in it
    may break a bound (:func:`.nesting.loads`). Building each object with ``dict()`` in C and
    comparing lengths costs a fraction of walking the document afterwards."""
    try:
        return nesting.loads(text, object_pairs_hook=_unique)
    except _Duplicate:
        return None, False


def _first_duplicate(node: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The path (ending in the key) of the first duplicate key in a parsed document."""
    if isinstance(node, _Object):
        if node.duplicates:
            return (*path, node.duplicates[0])
        for key, value in node.items():
            found = _first_duplicate(value, (*path, key))
            if found:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _first_duplicate(value, (*path[:-1], f"{path[-1]}[{i}]") if path else ())
            if found:
                return found
    return None


def _duplicate_error(dup: tuple[str, ...], file: str) -> RegistryError:
    match dup:
        case ("records", record, *field) if field:
            return RegistryError(
                f"duplicate key {dup[-1]!r}", file=file, record=record, field=".".join(field)
            )
    return RegistryError(f"duplicate key {dup[-1]!r}", file=file, field=".".join(dup))


class _LongInteger(int):
    """An integer literal with more digits than :data:`MAX_INTEGER_DIGITS` (its value is 0)."""


def _parse_int_bounded(literal: str) -> int:
    return int(literal) if len(literal.lstrip("-")) <= MAX_INTEGER_DIGITS else _LongInteger()


def _unparsable_error(text: str, shown: str) -> RegistryError:
    """The error for JSON that the parser refused for its size, not its syntax: the first value
    nested deeper than :data:`MAX_DEPTH` or an integer with too many digits, and where it is."""
    deep = nesting.first_too_deep(text, MAX_DEPTH)
    if deep is not None:
        return _located_error(f"nested more than {MAX_DEPTH} levels deep", deep, shown)
    doc = json.loads(text, parse_int=_parse_int_bounded)
    long = nesting.first_path(doc, lambda v: isinstance(v, _LongInteger))
    return _located_error(
        f"an integer with more than {MAX_INTEGER_DIGITS} digits; no registry value needs one",
        long or (),
        shown,
    )


def _located_error(message: str, path: tuple[str, ...], file: str) -> RegistryError:
    fix = f"edit {file}: registry values are small (sizes, digests, short metadata)"
    match path:
        case ("records", record, *field) if field:
            field_name = nesting.field_name(tuple(field))
            return RegistryError(message, file=file, record=record, field=field_name, fix=fix)
        case ("records", record):
            return RegistryError(message, file=file, record=record, fix=fix)
    return RegistryError(message, file=file, field=nesting.field_name(path) or None, fix=fix)


def dumps(doc: Mapping[str, Any]) -> str:
    """The one stable text form of a registry document. A lone surrogate (which only an invalid
    record, written back as the file states it, can hold) is written as its escape: UTF-8 has
    no other spelling for it, and the write must not fail on it."""
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return nesting.escape_surrogates(text)


class _Document(dict[str, Any]):
    """A registry file's top-level object, and whether some value in it may break a bound
    (then each record is checked by :func:`.nesting.first_flaw` before it is parsed)."""

    suspect: bool = False


@dataclass(frozen=True)
class FamilyFile:
    """One parsed registry file."""

    path: Path
    family: str
    records: Mapping[str, Record]
    invalid: Mapping[str, RegistryError]
    known_failures: tuple[KnownFailure, ...] = ()
    description: str | None = None
    # SHA-256 of the text it was parsed from: a transaction that finds the file unchanged reuses
    # this parse instead of parsing it again under the lock.
    text_digest: str = field(default="", compare=False)
    # Each invalid record as the file states it (never changed; not frozen, as it may nest too
    # deep to): a write of the family keeps it for the reviewer to fix, unless the write
    # replaces that very record.
    invalid_json: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # The SHA-256 of each file read, by its name within the family (``<family>.json``,
    # ``<family>/<ab>.json``); ``text_digest`` combines them. Writes skip unchanged files.
    digests: Mapping[str, str] = field(default_factory=dict, compare=False)
    sharded: bool = False

    def file_of(self, name: str) -> Path:
        """The file that holds (or would hold) the record ``name``."""
        return shards.shard_path(self.path, shards.shard_of(name)) if self.sharded else self.path


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_file(path: str | os.PathLike[str]) -> FamilyFile:
    """Parse one family's file, and its shards if it has them. File-level problems raise; a bad
    record is kept in ``invalid``."""
    p = Path(path)
    shown = str(p)
    try:
        family = check_family(p.stem)
    except UsageError as e:
        raise RegistryError(e.message, file=shown, field="file name") from e
    text = read_text(p)
    doc = _parse_document(text, shown)
    digests = {p.name: _text_digest(text)}
    if "shards" in doc:
        records, invalid, stated = _load_shards(p, family, digests)
    else:
        records, invalid = _parse_records(
            doc["records"], p, family, _SchemaPasses.for_text(text), suspect=doc.suspect
        )
        stated = {name: doc["records"][name] for name in invalid}
        _check_leftover(p, doc["records"], records, digests)
    known = tuple(
        parse_known_failure(kf, file=shown, index=i)
        for i, kf in enumerate(doc.get("known_failures") or [])
    )
    return FamilyFile(
        p,
        family,
        records,
        invalid,
        known,
        doc.get("description"),
        shards.combined_digest(digests),
        MappingProxyType(stated),
        MappingProxyType(digests),
        sharded="shards" in doc,
    )


def _load_shards(
    head: Path, family: str, digests: dict[str, str]
) -> tuple[dict[str, Record], dict[str, RegistryError], dict[str, Any]]:
    """The records of a sharded family, from every shard file (each file's digest is added to
    ``digests``)."""
    records: dict[str, Record] = {}
    invalid: dict[str, RegistryError] = {}
    stated: dict[str, Any] = {}
    for path in shards.shard_files(head):
        shown = str(path)
        if not shards.is_shard_name(path.stem):
            raise RegistryError(
                f"is not a shard of family {family!r}: shards are named by two hex digits, "
                "00.json to ff.json",
                file=shown,
                fix=f"move it out of {shards.folder(head)}",
            )
        text = _read_listed(path, read_text)
        if text is None:
            continue
        doc = _parse_document(text, shown, shard=family)
        digests[shards.relative(head, path)] = _text_digest(text)
        passed = _SchemaPasses.for_text(text)
        found, bad = _parse_records(
            doc["records"], path, family, passed, shard=path.stem, suspect=doc.suspect
        )
        records.update(found)
        invalid.update(bad)
        stated.update({name: doc["records"][name] for name in bad})
    return dict(sorted(records.items())), dict(sorted(invalid.items())), stated


def _check_leftover(
    head: Path,
    raw_records: Mapping[str, Any],
    records: Mapping[str, Record],
    digests: dict[str, str],
) -> None:
    """A family file without ``"shards"`` may have a shard folder beside it only as what a write
    interrupted while sharding the family left: copies of records the file holds as they are.
    Anything else there is refused, never skipped (its digest joins ``digests`` either way)."""
    for path in shards.shard_files(head):
        text = _read_listed(path, read_text)
        if text is None:
            continue
        digests[shards.relative(head, path)] = _text_digest(text)
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        copies = (
            isinstance(doc, dict)
            and set(doc) <= {"format_version", "records"}
            and isinstance(doc.get("records"), dict)
            and all(_a_copy(n, raw, raw_records, records) for n, raw in doc["records"].items())
        )
        if not copies:
            raise RegistryError(
                f"holds shards of family {head.stem!r}, but {head.name} is not sharded (it has "
                'no "shards" field), so its records would be read from two places',
                file=str(path),
                fix=f"keep one layout: move the records of {shards.folder(head)} into "
                f"{head} and remove the folder (the next write shards the family again if "
                "it is large)",
            )


_ABSENT = object()
_T = TypeVar("_T")


def _read_listed(path: Path, read: Callable[[Path], _T]) -> _T | None:
    """``read(path)`` of a shard listed a moment ago; ``None`` if it is gone since: a writer
    removed it, emptied (readers take no lock, so one may list a folder while a writer
    changes it)."""
    try:
        return read(path)
    except RegistryError:
        if not os.path.lexists(path):
            return None
        raise


def _a_copy(
    name: str, raw: Any, raw_records: Mapping[str, Any], records: Mapping[str, Record]
) -> bool:
    """Whether a shard's record is the family file's record of that name: as written, or (as
    the copy is written from the parsed record) the same record once parsed."""
    if raw_records.get(name, _ABSENT) == raw:
        return True
    if name not in records:
        return False
    try:
        return parse_record(name, raw, file="<copy>") == records[name]
    except RegistryError:
        return False


def read_text(path: Path) -> str:
    """The text of a registry file (see :func:`read_bytes`), which must be UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RegistryError(f"cannot read: {e}", file=str(path)) from e


def read_bytes(path: Path) -> bytes:
    """The bytes of a registry file, ``provenance/<family>.json`` or a shard
    ``provenance/<family>/<ab>.json``, opened through the path primitive from ``provenance/``:
    refused before reading unless it and its shard folder are plain (a FIFO would block the
    reader forever, a link to ``/dev/zero`` would never end, a link out of the project would be
    read as the family's records)."""
    shown = str(path)
    shard = shards.is_shard_name(path.stem) and _is_registry_dir(path.parent.parent)
    try:
        with (
            shards.registry_folder(path.parent.parent if shard else path.parent) as base,
            base.folder(path.parent.name) if shard else base as folder,
        ):
            fd = folder.open_fd(path.name)
    except OSError as e:
        raise RegistryError(f"cannot read: {e.strerror}", file=shown) from e
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as e:
            raise RegistryError(f"cannot read: {e}", file=shown) from e


def _is_registry_dir(directory: Path) -> bool:
    """Whether ``directory`` is a project's ``provenance/`` (a shard's file lies one folder
    below it; a family file at ``<somewhere>/<ab>.json`` is not a shard)."""
    return directory.name == DIRNAME


def _parse_document(text: str, shown: str, shard: str | None = None) -> _Document:
    """The file's top-level object, its format version and fields checked; ``shard``, the
    family a shard file belongs to (a shard holds records only)."""
    try:
        doc, suspect = _parse_unique(text)
    except json.JSONDecodeError as e:
        raise RegistryError(
            f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", file=shown
        ) from e
    except (ValueError, RecursionError) as e:  # an integer past Python's digits, deep nesting
        raise _unparsable_error(text, shown) from e
    if doc is None:  # a duplicate key somewhere: parse again, remembering where
        dup = _first_duplicate(json.loads(text, object_pairs_hook=_keep_duplicates))
        assert dup is not None
        raise _duplicate_error(dup, shown)
    if not isinstance(doc, dict):
        raise RegistryError("must be a JSON object", file=shown)
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        raise RegistryError(
            f"unknown format_version {version!r}; this fixture-store reads {FORMAT_VERSION}",
            file=shown,
            field="format_version",
            fix="upgrade fixture-store, or fix the file's format_version",
        )
    fields = {"format_version", "records"}
    if shard is None:
        fields |= {"known_failures", "description", "shards"}
    extra = set(doc) - fields
    if extra and shard is not None:
        raise RegistryError(
            f"a shard holds only format_version and records; the family's description, known "
            f"failures and shards live in {DIRNAME}/{shard}.json",
            file=shown,
            field=sorted(extra)[0],
        )
    if extra:
        raise RegistryError("unknown top-level field", file=shown, field=sorted(extra)[0])
    if "shards" in doc:
        _check_sharded(doc, shown)
    elif not isinstance(doc.get("records"), dict):
        raise RegistryError("missing or not an object", file=shown, field="records")
    return _bounded(doc, suspect, shown)


def _bounded(doc: dict[str, Any], suspect: bool, shown: str) -> _Document:
    """The document, its fields but the records checked against the value bounds if it is
    ``suspect`` (records are judged one by one: an invalid one is kept)."""
    checked = _Document(doc)
    checked.suspect = suspect
    if suspect:
        flaw = nesting.first_flaw({k: v for k, v in doc.items() if k != "records"})
        if flaw is not None:
            raise _located_error(flaw[1], flaw[0], shown)
    return checked


def _check_sharded(doc: Mapping[str, Any], shown: str) -> None:
    """A sharded family's file: ``"shards": 256`` and no records (they are in the shards)."""
    count = doc["shards"]
    if type(count) is not int or count != shards.COUNT:
        raise RegistryError(
            f"must be {shards.COUNT}, the number of shards this fixture-store writes",
            file=shown,
            field="shards",
        )
    if "records" in doc:
        family = Path(shown).stem
        raise RegistryError(
            f"a sharded family's file holds no records: they live in {DIRNAME}/{family}/",
            file=shown,
            field="records",
            fix=f"move each record to {DIRNAME}/{family}/<ab>.json, ab being the first two hex "
            'digits of the SHA-256 of its name, or remove "shards" to keep them in this file',
        )


def _parse_records(
    raw_records: dict[str, Any],
    path: Path,
    family: str,
    passed: _SchemaPasses,
    shard: str | None = None,
    *,
    suspect: bool,
) -> tuple[dict[str, Record], dict[str, RegistryError]]:
    """Every record of a file (``shard``: of that shard): the valid ones, and the error of each
    invalid one. ``suspect``: the file may hold a value past a bound (see :class:`_Document`)."""
    shown = str(path)
    records: dict[str, Record] = {}
    invalid: dict[str, RegistryError] = {}
    known = passed.known  # one look for the file's marker, not one per record
    for name in sorted(raw_records):
        raw = raw_records[name]
        try:
            if isinstance(name, str) and family_of(name) != family:
                raise RegistryError(
                    f"belongs to family {family_of(name)!r} but is in {path.name}",
                    file=shown,
                    record=name,
                    field="name",
                    fix=f"move it to {DIRNAME}/{family_of(name)}.json",
                )
            if shard is not None and isinstance(name, str) and shards.shard_of(name) != shard:
                home = path.parent / f"{shards.shard_of(name)}.json"
                raise RegistryError(
                    f"belongs in shard {home.name} (the first two hex digits of the SHA-256 "
                    f"of its name) but is in {path.name}",
                    file=shown,
                    record=name,
                    field="name",
                    fix=f"move it to {home}",
                )
            if suspect:
                _check_values(raw, shown, name)
            record = parse_record(name, raw, file=shown)
            if not known:
                _schema_backstop(raw, shown, name)
            records[name] = record
        except RegistryError as e:
            invalid[name] = e
    if not invalid:
        passed.remember()
    return records, invalid


def _check_values(raw: Any, file: str, name: str) -> None:
    """Refuse a record holding a value past a bound anywhere (an integer over
    :data:`MAX_INTEGER_DIGITS` digits, NaN or Infinity, a lone surrogate)."""
    flaw = nesting.first_flaw(raw)
    if flaw is not None:
        path, message = flaw
        raise RegistryError(message, file=file, record=name, field=nesting.field_name(path) or None)


@dataclass(frozen=True)
class _SchemaPasses:
    """Remembers registry texts whose every record passed the schema backstop, so loading an
    unchanged registry again skips it (walking ~1,800 records through jsonschema dominated a
    warm verify). The key covers the exact file bytes, the schema and this version; the record
    parser, which checks each field in code, still runs on every load."""

    marker: Path | None
    store_root: Path | None = None

    @classmethod
    def for_text(cls, text: str) -> _SchemaPasses:
        from fixture_store.objects.store import default_root

        h = _schema_key().copy()
        h.update(text.encode())
        h.update(b"\0")
        try:
            root = default_root()
        except OSError:
            return cls(None)
        return cls(root / "state" / "schema-passed" / h.hexdigest(), root)

    @property
    def known(self) -> bool:
        if self.marker is None or self.store_root is None:
            return False
        return statecache.has_marker(self.marker, self.store_root)

    def remember(self) -> None:
        if self.marker is not None and self.store_root is not None:
            statecache.mark_passed(self.marker, self.store_root)


@cache
def _schema_key() -> Any:
    """The hash of this version and the schema, which every text's marker key starts with (one
    per process: a sharded family has 256 texts)."""
    from fixture_store._version import __version__

    h = hashlib.sha256()
    for part in (__version__, json.dumps(schema(), sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0")
    return h


def _schema_backstop(raw: Any, file: str, name: str) -> None:
    if isinstance(raw, dict) and isinstance(raw.get("members"), dict):
        _check_member_keys(raw["members"], file, name)
    validator = _record_validator()
    if validator.is_valid(raw):
        return
    import jsonschema  # loaded once the backstop runs; unchanged files skip it (see above)

    error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "record"
        raise RegistryError(error.message, file=file, record=name, field=where)


_MEMBER_KEYS = frozenset({"digest", "size", "blake3"})


@cache
def _record_validator() -> Any:
    """The record schema, compiled once per process, with the member entries left to
    :func:`_check_member_keys` and the record parser (which check them field by field): walking
    thousands of members through jsonschema dominated loading a large registry."""
    defs = copy.deepcopy(schema()["$defs"])
    defs["record"]["properties"]["members"] = {"type": "object"}
    # The source branches are told apart by their "type" const, so "oneOf" equals a chain of
    # if/then; evaluated that way, the four branches that do not apply build no errors.
    source = defs["source"]
    branches = source.pop("oneOf")
    source["allOf"] = [
        {"if": {"properties": {"type": {"const": b["properties"]["type"]["const"]}}}, "then": b}
        for b in branches
    ]
    import jsonschema  # importing it costs more than loading an unchanged registry

    return jsonschema.Draft202012Validator({"$defs": defs, "$ref": "#/$defs/record"})


def _check_member_keys(members: dict[str, Any], file: str, name: str) -> None:
    for path, entry in members.items():
        if not isinstance(entry, dict):
            raise RegistryError(
                "must be an object {digest, size}", file=file, record=name, field=f"members.{path}"
            )
        extra = set(entry) - _MEMBER_KEYS
        if extra:
            raise RegistryError(
                f"unknown field {sorted(extra)[0]!r}",
                file=file,
                record=name,
                field=f"members.{path}",
            )
        for key in ("digest", "size"):
            if key not in entry:
                raise RegistryError(
                    f"'{key}' is a required property",
                    file=file,
                    record=name,
                    field=f"members.{path}",
                )


@dataclass(frozen=True)
class Registry:
    """All registry files of a project, loaded."""

    root: Path
    families: Mapping[str, FamilyFile] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.root / DIRNAME

    def records(self) -> Iterator[Record]:
        for fam in self.families.values():
            yield from fam.records.values()

    def invalid(self) -> Iterator[tuple[str, RegistryError]]:
        for fam in self.families.values():
            yield from fam.invalid.items()

    def names(self) -> list[str]:
        return sorted(n for fam in self.families.values() for n in (*fam.records, *fam.invalid))

    def known_failures(self) -> Iterator[KnownFailure]:
        for fam in self.families.values():
            yield from fam.known_failures

    def get(self, name: str) -> Record:
        """The valid record for ``name``; typed errors for unknown names and invalid records."""
        from fixture_store.errors import InvalidRecordError

        fam = self.families.get(family_of(name)) if isinstance(name, str) else None
        if fam is not None:
            if name in fam.records:
                return fam.records[name]
            if name in fam.invalid:
                err = fam.invalid[name]
                fix = err.fix or f"edit {fam.file_of(name)}"
                raise InvalidRecordError(name, err.about(name), fix=fix)
        near = self.nearest(name) if isinstance(name, str) else []
        if near:
            raise UnknownArtifactError(
                name,
                f"no record in the registry; did you mean {' or '.join(near)}?",
                fix=f"use the record's name as registered: {near[0]} (fixture-store list)",
            )
        raise UnknownArtifactError(
            name,
            "no record in the registry; nothing without a record is trusted",
            fix=f"register it: fixture-store add PATH --name {name} --kind KIND",
        )

    def nearest(self, name: str, limit: int = 3) -> list[str]:
        """The registered names ``name`` is most likely a typing of: the same name with its file
        extension (``ref/logits`` for ``ref/logits.npz``) or without it first, then the
        closest by :mod:`difflib`'s ratio (at least 0.75)."""
        import difflib

        every = self.names()
        stem = name.rsplit("/", 1)[-1]
        same = [
            n
            for n in every
            if (n.startswith(f"{name}.") and "/" not in n[len(name) :])
            or ("." in stem and n == name.rsplit(".", 1)[0])
        ]
        close = difflib.get_close_matches(name, every, n=limit, cutoff=0.75)
        return list(dict.fromkeys([*same, *close]))[:limit]

    def select(self, names: Iterable[str] = (), families: Iterable[str] = ()) -> list[str]:
        """Names matching the explicit names (glob patterns allowed) and families; all if none."""
        names, families = list(names), list(families)
        every = self.names()
        if not names and not families:
            return every
        chosen: set[str] = set()
        # One pass over the names for each question (a set, and the names by family), never one
        # per pattern or family: selecting thousands of names stays linear.
        by_family: dict[str, list[str]] = {}
        for n in every if families else ():
            by_family.setdefault(family_of(n), []).append(n)
        for fam in families:
            if fam not in self.families:
                raise UsageError(
                    f"no family {fam!r} in {self.directory}",
                    fix=f"one of: {', '.join(sorted(self.families)) or '(none yet)'}",
                )
            chosen.update(by_family.get(fam, ()))
        known = set(every) if names else set()
        for pattern in names:
            if any(ch in pattern for ch in "*?["):
                hits = fnmatch.filter(every, pattern)
                if not hits:
                    raise UnknownArtifactError(
                        pattern, "matches no record in the registry", fix="fixture-store list"
                    )
                chosen.update(hits)
            else:
                if pattern not in known:
                    self.get(pattern)  # raises UnknownArtifactError with the fix
                chosen.add(pattern)
        return sorted(chosen)


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The project root: from ``$FIXTURE_STORE_REGISTRY``, else the nearest one with provenance/."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser().absolute()
        return p.parent if p.name == DIRNAME else p
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / DIRNAME).is_dir():
            return folder
    raise UsageError(
        f"no {DIRNAME}/ folder in {here} or any parent",
        fix="run 'fixture-store init' in your project, or pass --registry",
    )


def create_directory(project: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Make ``provenance/`` in ``project``; returns it and whether it is new."""
    directory = Path(project) / DIRNAME
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    return directory, created


def project_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``provenance/``: ``root`` (that folder, or ``provenance/`` itself),
    else the nearest parent of the working directory with one."""
    base = Path(root).absolute() if root is not None else find_root()
    return base.parent if base.name == DIRNAME else base


def load(root: str | os.PathLike[str] | None = None) -> Registry:
    """Load every ``provenance/*.json`` under the project root."""
    base = project_root(root)
    directory = base / DIRNAME
    if not directory.is_dir():
        raise UsageError(f"{directory} does not exist", fix="fixture-store init")
    _refuse_orphans(directory)
    families = {}
    for path in shards.family_files(directory):
        fam = load_file(path)
        families[fam.family] = fam
    return Registry(base, families)


def family_digests(directory: Path) -> list[tuple[str, str]]:
    """Each family's :attr:`FamilyFile.text_digest`, from the bytes of its files without
    parsing them, and one entry per shard folder without a family file (which loading
    refuses): a change to any registry file changes this list."""
    out = [(p.stem, family_digest(p)) for p in shards.family_files(directory)]
    for orphan in shards.orphan_folders(directory):
        out.append((f"{orphan.name}/", family_digest(shards.head_of(orphan))))
    return out


def family_digest(head: Path) -> str:
    """The :attr:`FamilyFile.text_digest` a family's files have now, from their bytes: its
    file's and those of every JSON file in its shard folder."""
    digests: dict[str, str] = {}
    if os.path.lexists(head):
        digests[head.name] = hashlib.sha256(read_bytes(head)).hexdigest()
    for path in shards.shard_files(head):
        data = _read_listed(path, read_bytes)
        if data is not None:
            digests[shards.relative(head, path)] = hashlib.sha256(data).hexdigest()
    return shards.combined_digest(digests)


def _refuse_orphans(directory: Path) -> None:
    for orphan in shards.orphan_folders(directory):
        raise _orphan_error(orphan)


def _orphan_error(folder: Path) -> RegistryError:
    return RegistryError(
        f"holds registry shards, but there is no {folder.name}.json beside it to say they are "
        "the family's shards",
        file=str(folder),
        fix=f'restore {shards.head_of(folder)} (it holds "shards": {shards.COUNT}), or '
        "remove the folder",
    )


class Transaction:
    """A read-modify-write of one project's registry, made under its lock (see
    :func:`transaction`): what it reads is the registry as it is now, what it writes replaces a
    family file atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._read: dict[str, FamilyFile | None] = {}

    @property
    def directory(self) -> Path:
        return self.root / DIRNAME

    def family(self, family: str, known: FamilyFile | None = None) -> FamilyFile | None:
        """The family's file as it is on disk now; ``None`` if it has none yet. ``known``, the
        family as read before the transaction, is returned as it is if the file still holds
        the very text it was parsed from (parsing a large family again costs a second)."""
        check_family(family)
        if family not in self._read:
            path = self.directory / f"{family}.json"
            self._read[family] = _reread(path, known)
        return self._read[family]

    def registry(self, known: Registry | None = None) -> Registry:
        """Every family file as it is on disk now; the families of ``known`` whose files are
        unchanged are reused (see :meth:`family`)."""
        if known is None:
            return load(self.root)
        if not self.directory.is_dir():
            raise UsageError(f"{self.directory} does not exist", fix="fixture-store init")
        _refuse_orphans(self.directory)
        for path in shards.family_files(self.directory):
            try:
                check_family(path.stem)
            except UsageError:
                load_file(path)  # raises the registry error naming the file
            self.family(path.stem, known=known.families.get(path.stem))
        return Registry(self.root, {f: ff for f, ff in sorted(self._read.items()) if ff})

    def write(
        self,
        family: str,
        records: Iterable[Record],
        *,
        description: str | None = None,
        known_failures: Iterable[KnownFailure] | None = None,
    ) -> Path:
        """Replace the family's file: ``records`` are its complete set of valid records; its
        invalid records (but those ``records`` name) stay as the file states them, and so do
        the description and known failures unless given (``""`` and ``()``: none)."""
        existing = self.family(family)
        path = _replace_family(
            self.directory,
            family,
            records,
            existing=existing,
            description=description,
            known_failures=known_failures,
        )
        self._read.pop(family, None)
        return path


def _reread(path: Path, known: FamilyFile | None) -> FamilyFile | None:
    if known is not None and known.text_digest:
        try:
            now: str | None = family_digest(path)
        except RegistryError:
            now = None  # load_file says what is wrong
        if now == known.text_digest:
            return known
    if os.path.lexists(path):
        return load_file(path)
    if shards.shard_files(path):
        raise _orphan_error(shards.folder(path))
    return None


_held = threading.local()


@contextlib.contextmanager
def transaction(root: str | os.PathLike[str] | None = None) -> Iterator[Transaction]:
    """Lock the registry of the project at ``root`` for a read-modify-write.

    Every change to a family file happens in one: read the family through the transaction
    (never a registry loaded before it), check, write. Concurrent transactions, in other
    processes or threads, wait for each other; one nested in another on the same thread joins
    it. On entry, temp files of writers that died mid-write are removed (under the lock no other
    writer is writing).
    """
    base = project_root(root)
    held: set[Path] = _held.__dict__.setdefault("roots", set())
    if base in held:
        yield Transaction(base)
        return
    directory = base / DIRNAME
    locks = directory / LOCKS_DIRNAME
    try:
        lock_folder = _lock_folder(directory)
    except OSError as e:
        raise RegistryError(
            f"cannot create the registry's lock folder {locks}: {e.strerror}",
            fix="make provenance/ writable",
        ) from e
    with lock_folder, fsutil.flocked(locks / LOCK_NAME, folder=lock_folder):
        held.add(base)
        try:
            _remove_dead_temps(directory)
            yield Transaction(base)
        finally:
            held.discard(base)


def _lock_folder(directory: Path) -> anchored.Folder:
    """``provenance/.locks``, made if missing (with a ``.gitignore``: the lock folder is no
    part of the reviewed registry), reached through the path primitive."""
    directory.mkdir(parents=True, exist_ok=True)
    with shards.registry_folder(directory) as base:
        locks = base.folder(LOCKS_DIRNAME, create=True)
    try:
        if locks.regular_size(".gitignore") is None:
            locks.write_atomically(".gitignore", b"*\n", temp=".gitignore.")
    except BaseException:
        locks.close()
        raise
    return locks


def _remove_dead_temps(directory: Path, *, shard_folders: bool = True) -> None:
    """Temp files of writers that died, beside the family files and in the shard folders."""
    with shards.registry_folder(directory) as base:
        _remove_temps_in(base, shard_folders=shard_folders)


def _remove_temps_in(folder: anchored.Folder, *, shard_folders: bool) -> None:
    for entry in list(folder.scandir()):
        if _TEMP_NAME.fullmatch(entry.name):
            folder.unlink(entry.name)
        elif shard_folders and not entry.name.startswith(".") and entry.is_dir():
            with folder.folder(entry.name) as sub:  # a link is refused, never descended into
                _remove_temps_in(sub, shard_folders=False)


def write_family(
    registry: Registry,
    family: str,
    records: Iterable[Record],
    *,
    description: str | None = None,
    known_failures: Iterable[KnownFailure] | None = None,
) -> Path:
    """Write a family file atomically in the stable format. Records are the complete set.

    ``registry`` is what the records were derived from: if the family's file changed since it
    was read (another writer), nothing is written and :class:`UsageError` says so, instead of
    the other writer's records being lost. A read-modify-write that should merge with
    concurrent writers reads under :func:`transaction` instead.
    """
    check_family(family)
    with transaction(registry.root) as tx:
        read = registry.families.get(family)
        _check_unchanged(read, tx.family(family, known=read), tx.directory, family)
        return tx.write(family, records, description=description, known_failures=known_failures)


def _check_unchanged(
    read: FamilyFile | None, now: FamilyFile | None, directory: Path, family: str
) -> None:
    def state(f: FamilyFile | None) -> object:
        if f is None:
            return None
        return (dict(f.records), sorted(f.invalid), f.known_failures, f.description)

    if state(read) != state(now):
        raise UsageError(
            f"{directory / f'{family}.json'} changed since this registry was read (another "
            "writer); nothing was written",
            fix="load the registry again and redo the change",
        )


def _replace_family(
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
                _write_atomically(directory, path, text)
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


def reads_back(records: Iterable[Record], file: str | os.PathLike[str]) -> None:
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
    family = family_of(next(iter(by_name)))
    try:
        text = dumps(
            {"format_version": FORMAT_VERSION, "records": _records_json(by_name, by_name, {})}
        )
        doc = _parse_document(text, str(path))
        parsed, invalid = _parse_records(
            doc["records"], path, family, _SchemaPasses(None), suspect=doc.suspect
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
        raise RegistryError(
            f"{error.reason}; the registry would call this record invalid, so nothing was written",
            file=str(path),
            record=name,
            field=error.field,
            fix="fix that value where it came from (the file, manifest or option it was read "
            "from), then run the command again",
        )
    for name, record in parsed.items():
        if record.to_json() != by_name[name].to_json():
            raise RegistryError(
                "reads back from the registry other than it was built; nothing was written "
                "(a fixture-store bug: please report it with the command)",
                file=str(path),
                record=name,
            )


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
            _write_atomically(path.parent, folder / f"{shard}.json", _dumps_checked(doc, path))
        _remove_shards(path, keep=copies)
        head = _head(existing.description, list(existing.known_failures))
    _write_atomically(path.parent, path, dumps({**head, "shards": shards.COUNT}))
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
        if existing.digests.get(shards.relative(path, target)) == _text_digest(text):
            continue
        try:
            _write_atomically(path.parent, target, text)
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
    if existing.digests.get(path.name) != _text_digest(head_text):
        _write_atomically(path.parent, path, head_text)


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
        (n in by_name and existing.records.get(n) == by_name[n])
        or (n not in by_name and n in existing.invalid)
        for n in names
    )


def _remove_leftover(path: Path) -> None:
    """Before an unsharded family's file is replaced: remove the shard copies that an
    interrupted sharding left (loading checked they are copies of records the file holds)."""
    if _remove_shards(path, keep={}):
        with shards.registry_folder(path.parent) as directory:
            with contextlib.suppress(OSError):
                directory.rmdir(shards.folder(path).name)
            directory.fsync()


def _write_atomically(directory: Path, path: Path, text: str) -> None:
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
