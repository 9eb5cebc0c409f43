"""Parsing a registry document: the JSON of one family file or shard, read under the registry's
bounds (depth, integer digits: see :mod:`.nesting`), with duplicate keys refused anywhere and
the name of the file, record and field in every error; then each record parsed, an invalid one
kept apart with its error, and the JSON Schema run as a backstop over texts not seen to pass.

Files are JSON with sorted keys, two-space indent and a trailing newline (:func:`dumps`), so
rewriting an unchanged record is byte-identical and diffs read well.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fixture_store import bounded_json
from fixture_store.errors import RegistryError
from fixture_store.objects import names, statecache
from fixture_store.registry import nesting, shards
from fixture_store.registry.raw_files import DIRNAME, family_of
from fixture_store.registry.records import Record, parse_record

FORMAT_VERSION = 1
LOCKS_DIRNAME = ".locks"
LOCK_NAME = "registry.lock"
# Deeper JSON than this is refused (metadata is the only free-form field; real ones nest a few
# levels), and so are integer literals longer than any 64-bit size (see :mod:`.nesting`).
MAX_DEPTH = nesting.MAX_DEPTH
MAX_INTEGER_DIGITS = nesting.MAX_INTEGER_DIGITS


@cache
def schema() -> dict[str, Any]:
    text = resources.files("fixture_store.registry").joinpath("schema.json").read_text()
    loaded: dict[str, Any] = bounded_json.loads(text)
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
    doc = bounded_json.loads(text, cap=nesting.TEXT_CAP, parse_int=_parse_int_bounded)
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


def parse_document(text: str, shown: str, shard: str | None = None) -> _Document:
    """The file's top-level object, its format version and fields checked; ``shard``, the
    family a shard file belongs to (a shard holds records only)."""
    try:
        doc, suspect = _parse_unique(text)
    except json.JSONDecodeError as e:
        raise RegistryError(
            f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", file=shown
        ) from e
    except bounded_json.TooLarge as e:
        raise RegistryError(
            f"{e}: not read",
            file=shown,
            fix="shard the family (fixture-store registry shard) or split it",
        ) from None
    except ValueError as e:  # an integer past Python's digits, deep nesting
        raise _unparsable_error(text, shown) from e
    if doc is None:  # a duplicate key somewhere: parse again, remembering where
        dup = _first_duplicate(
            bounded_json.loads(text, cap=nesting.TEXT_CAP, object_pairs_hook=_keep_duplicates)
        )
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


def parse_records(
    raw_records: dict[str, Any],
    path: Path,
    family: str,
    passed: SchemaPasses,
    shard: str | None = None,
    *,
    suspect: bool,
    shapes: set[str] | None = None,
) -> tuple[dict[str, Record], dict[str, RegistryError]]:
    """Every record of a file (``shard``: of that shard): the valid ones, and the error of each
    invalid one. ``suspect``: the file may hold a value past a bound (see :class:`_Document`).
    ``shapes``: the :func:`shape_of` records that already passed the schema backstop, which
    then runs once per shape (the record parser still checks every field of every record)."""
    shown = str(path)
    records: dict[str, Record] = {}
    invalid: dict[str, RegistryError] = {}
    known = passed.known  # one look for the file's marker, not one per record
    collided = dict(
        (other, first) for first, other in names.collisions(sorted(raw_records)) if first != other
    )
    for name in sorted(raw_records):
        raw = raw_records[name]
        try:
            if name in collided:
                raise RegistryError(
                    names.collision_reason(collided[name]),
                    file=shown,
                    record=name,
                    field="name",
                    fix=f"rename one of them in {path.name}",
                )
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
                if shapes is None:
                    _schema_backstop(raw, shown, name)
                else:
                    shape = shape_of(raw)
                    if shape not in shapes:
                        _schema_backstop(raw, shown, name)
                        shapes.add(shape)
            records[name] = record
        except RegistryError as e:
            invalid[name] = e
    if not invalid:
        passed.remember()
    return records, invalid


def shape_of(raw: Any) -> str:
    """A record's structure: its keys, nesting and value types, every string but an object's
    keys and the ``type`` of a source or a ``kind`` left out. Records of one import share a
    shape (they differ in names, digests and paths, which the record parser checks one by one),
    so the schema backstop, the slowest check, runs once per shape there."""
    return repr(_shape(raw, ""))


_KEPT_STRINGS = frozenset({"type", "kind", "metric"})


def _shape(value: Any, key: str) -> Any:
    kind = type(value)
    if kind is str:
        return value if key in _KEPT_STRINGS else ""
    if kind is dict:
        return tuple(sorted((k, _shape(v, k)) for k, v in value.items()))
    if kind is list or kind is tuple:
        return ("[", *(_shape(v, key) for v in value))
    if kind is int or kind is float or kind is bool or value is None:
        return value
    return (kind.__name__, repr(value))


def _check_values(raw: Any, file: str, name: str) -> None:
    """Refuse a record holding a value past a bound anywhere (an integer over
    :data:`MAX_INTEGER_DIGITS` digits, NaN or Infinity, a lone surrogate)."""
    flaw = nesting.first_flaw(raw)
    if flaw is not None:
        path, message = flaw
        raise RegistryError(message, file=file, record=name, field=nesting.field_name(path) or None)


@dataclass(frozen=True)
class SchemaPasses:
    """Remembers registry texts whose every record passed the schema backstop, so loading an
    unchanged registry again skips it (walking ~1,800 records through jsonschema dominated a
    warm verify). The key covers the exact file bytes, the schema and this version; the record
    parser, which checks each field in code, still runs on every load."""

    marker: Path | None
    store_root: Path | None = None

    @classmethod
    def for_text(cls, text: str) -> SchemaPasses:
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
