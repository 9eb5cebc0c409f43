"""Reading and writing registry files: one ``provenance/<family>.json`` per family.

Files are JSON with sorted keys, two-space indent and a trailing newline, so rewriting an unchanged
record is byte-identical and diffs read well. Duplicate keys anywhere are an error.

Writes are transactions (DESIGN decision 10): :func:`transaction` holds the registry lock
(``provenance/.locks/registry.lock``, a flock the kernel releases if its holder dies; the folder
ignores itself in git), re-reads what it changes under it, and replaces a file atomically (a
temp file beside it, fsync, rename, fsync of the folder), so concurrent writers never lose each
other's records and a killed one leaves the old document or the new one, never a torn one; the
next transaction removes its temp file. :func:`write_family`, given a registry read earlier,
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
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fixture_store.errors import RegistryError, UnknownArtifactError, UsageError
from fixture_store.objects import fsutil, statecache
from fixture_store.registry import nesting
from fixture_store.registry.known_failures import KnownFailure
from fixture_store.registry.known_failures import parse as parse_known_failure
from fixture_store.registry.records import Record, check_family, family_of, parse_record

FORMAT_VERSION = 1
DIRNAME = "provenance"
ENV_VAR = "FIXTURE_STORE_REGISTRY"
LOCKS_DIRNAME = ".locks"
LOCK_NAME = "registry.lock"
# Deeper JSON than this is refused (metadata is the only free-form field; real ones nest a few
# levels), and so are integer literals longer than any 64-bit size.
MAX_DEPTH = nesting.MAX_DEPTH
MAX_INTEGER_DIGITS = 20
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


def _parse_unique(text: str) -> Any:
    """The parsed document, or ``None`` if some object repeats a key. Building each object with
    ``dict()`` in C and comparing lengths costs a fraction of walking the document afterwards."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except _Duplicate:
        return None


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
    """The one stable text form of a registry document."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


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


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_file(path: str | os.PathLike[str]) -> FamilyFile:
    """Parse one registry file. File-level problems raise; a bad record is kept in ``invalid``."""
    p = Path(path)
    shown = str(p)
    try:
        family = check_family(p.stem)
    except UsageError as e:
        raise RegistryError(e.message, file=shown, field="file name") from e
    text = read_text(p)
    doc = _parse_document(text, shown)
    records, invalid = _parse_records(doc["records"], p, family, _SchemaPasses.for_text(text))
    known = tuple(
        parse_known_failure(kf, file=shown, index=i)
        for i, kf in enumerate(doc.get("known_failures") or [])
    )
    as_stated = MappingProxyType({name: doc["records"][name] for name in invalid})
    return FamilyFile(
        p, family, records, invalid, known, doc.get("description"), _text_digest(text), as_stated
    )


def read_text(path: Path) -> str:
    """The text of a registry file (see :func:`read_bytes`), which must be UTF-8."""
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RegistryError(f"cannot read: {e}", file=str(path)) from e


def read_bytes(path: Path) -> bytes:
    """The bytes of a registry file, refused before reading unless it is a regular file: a FIFO
    would block the reader forever and a link to ``/dev/zero`` would never end."""
    shown = str(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it does not affect regular files.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise RegistryError(f"cannot read: {e.strerror}", file=shown) from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RegistryError(
            "is not a regular file (a folder, FIFO, device or a link to one); a registry "
            "file is reviewed JSON text",
            file=shown,
            fix=f"replace {shown} with the family's JSON file, or remove it",
        )
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as e:
            raise RegistryError(f"cannot read: {e}", file=shown) from e


def _parse_document(text: str, shown: str) -> dict[str, Any]:
    """The file's top-level object, its format version and fields checked."""
    try:
        doc = _parse_unique(text)
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
    extra = set(doc) - {"format_version", "records", "known_failures", "description"}
    if extra:
        raise RegistryError("unknown top-level field", file=shown, field=sorted(extra)[0])
    if not isinstance(doc.get("records"), dict):
        raise RegistryError("missing or not an object", file=shown, field="records")
    return doc


def _parse_records(
    raw_records: dict[str, Any], path: Path, family: str, passed: _SchemaPasses
) -> tuple[dict[str, Record], dict[str, RegistryError]]:
    """Every record of a file: the valid ones, and the error of each invalid one."""
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
            record = parse_record(name, raw, file=shown)
            if not known:
                _schema_backstop(raw, shown, name)
            records[name] = record
        except RegistryError as e:
            invalid[name] = e
    if not invalid:
        passed.remember()
    return records, invalid


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
        from fixture_store._version import __version__
        from fixture_store.objects.store import default_root

        h = hashlib.sha256()
        for part in (__version__, json.dumps(schema(), sort_keys=True), text):
            h.update(part.encode())
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
                raise InvalidRecordError(name, err.about(name), fix=err.fix or f"edit {fam.path}")
        raise UnknownArtifactError(
            name,
            "no record in the registry; nothing without a record is trusted",
            fix=f"register it: fixture-store add PATH --name {name} --kind KIND",
        )

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
    families = {}
    for path in sorted(directory.glob("*.json")):
        fam = load_file(path)
        families[fam.family] = fam
    return Registry(base, families)


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
        for path in sorted(self.directory.glob("*.json")):
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
            text = read_text(path)
        except RegistryError:
            if not path.exists():
                return None
            text = None  # load_file says what is wrong
        if text is not None and _text_digest(text) == known.text_digest:
            return known
    return load_file(path) if path.exists() else None


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
        locks.mkdir(parents=True, exist_ok=True)
        ignore = locks / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")  # the lock folder is no part of the reviewed registry
    except OSError as e:
        raise RegistryError(
            f"cannot create the registry's lock folder {locks}: {e.strerror}",
            fix="make provenance/ writable",
        ) from e
    with fsutil.flocked(locks / LOCK_NAME):
        held.add(base)
        try:
            _remove_dead_temps(directory)
            yield Transaction(base)
        finally:
            held.discard(base)


def _remove_dead_temps(directory: Path) -> None:
    for entry in os.scandir(directory):
        if _TEMP_NAME.fullmatch(entry.name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


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
    """Write a family file atomically in the stable format (the caller holds the lock)."""
    check_family(family)
    doc: dict[str, Any] = {"format_version": FORMAT_VERSION}
    desc = description if description is not None else (existing.description if existing else None)
    if desc:
        doc["description"] = desc
    kfs = (
        list(known_failures)
        if known_failures is not None
        else (list(existing.known_failures) if existing else [])
    )
    if kfs:
        doc["known_failures"] = [kf.to_json() for kf in kfs]
    doc["records"] = {r.name: r.to_json() for r in sorted(records, key=lambda r: r.name)}
    for name in doc["records"]:
        if family_of(name) != family:
            raise UsageError(f"record {name!r} does not belong to family {family!r}")
    for name, stated in (existing.invalid_json if existing else {}).items():
        doc["records"].setdefault(name, stated)  # never dropped by another record's write
    path = directory / f"{family}.json"
    try:
        text = dumps(doc)
    except RecursionError:
        raise RegistryError(
            "an invalid record is nested too deep to be written back; nothing was written",
            file=str(path),
            fix=f"fixture-store verify names it: fix or remove it in {path}, then run the "
            "command again",
        ) from None
    try:
        _write_atomically(directory, path, text)
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


def _write_atomically(directory: Path, path: Path, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a registry file is ordinary reviewed text
        os.replace(tmp, path)
        fsutil.fsync_path(directory)  # the rename itself durable: old or new after a crash
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
