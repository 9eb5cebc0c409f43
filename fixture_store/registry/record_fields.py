"""The parsers of a record's fields, one field each: its JSON value checked and turned into the
typed value a :class:`~fixture_store.registry.records.Record` holds, or a refusal naming the
record and the field (see :mod:`fixture_store.registry.records`, which parses a whole record and
checks the rules between its fields)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fixture_store import limits
from fixture_store.errors import DigestFormatError, UsageError
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Awaited, Digest
from fixture_store.registry.frozen import freeze
from fixture_store.registry.nesting import check_value
from fixture_store.registry.tensor_ranges import PLAIN_KEYS, check_entry_keys, expand
from fixture_store.registry.where import Where

_BLAKE3 = re.compile(r"[0-9a-f]{64}")


def mapping(raw: Any, where: Where) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise where.fail("record", "must be an object")
    return raw


def parse_expected(raw: Any, where: Where) -> Awaited:
    """The digest a gap declares without a size: the bytes it awaits, by their SHA-256 or, known
    only by a weak digest, their sha1 or md5."""
    try:
        return Awaited.parse(raw)
    except DigestFormatError as e:
        raise where.fail("digest", e.message) from e


def parse_digest(raw: Mapping[str, Any], where: Where) -> Digest:
    for key in ("digest", "size"):
        if key not in raw:
            raise where.fail(key, "missing required field (only a declared gap may omit it)")
    try:
        digests.parse_hex(raw["digest"])
    except DigestFormatError as e:
        raise where.fail("digest", e.message) from e
    try:
        return digests.parse(raw["digest"], raw["size"])
    except DigestFormatError as e:
        raise where.fail("size", e.message) from e


def parse_blake3(raw: Any, where: Where) -> str | None:
    if raw is not None and (not isinstance(raw, str) or _BLAKE3.fullmatch(raw) is None):
        raise where.fail("blake3", "must be 64 lower-case hex characters")
    return raw


def parse_lineage(raw: Any, where: Where) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise where.fail("lineage", "must be a list of parent digests")
    for i, parent in enumerate(raw):
        try:
            digests.parse_hex(parent)
        except DigestFormatError as e:
            raise where.fail(f"lineage[{i}]", e.message) from e
    if len(set(raw)) != len(raw):
        raise where.fail("lineage", "lists a parent twice")
    return tuple(raw)


def parse_members(raw: Any, where: Where) -> tuple[trees.Tree, dict[str, str]]:
    if not isinstance(raw, Mapping):
        raise where.fail("members", "must be an object of path -> {digest, size}")
    try:
        members = trees.from_json(raw)
    except (UsageError, DigestFormatError) as e:
        raise where.fail("members", e.message) from e
    member_blake3: dict[str, str] = {}
    for path, entry in raw.items():
        b3 = entry.get("blake3") if isinstance(entry, Mapping) else None
        if b3 is not None:
            try:
                member_blake3[path] = digests.check_blake3(b3)
            except DigestFormatError as e:
                raise where.fail(f"members.{path}.blake3", e.message) from e
    return members, member_blake3


def is_dims(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    )


def parse_seed(raw: Any, where: Where) -> int | None:
    if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool)):
        raise where.fail("seed", "must be an integer")
    return raw


def parse_input_shape(raw: Any, where: Where) -> Any:
    if raw is None:
        return None
    named = raw.values() if isinstance(raw, Mapping) else [raw]
    if not named or not all(is_dims(dims) for dims in named):
        raise where.fail(
            "input_shape",
            "must be a list of non-negative integers, or an object of input name -> such a list",
        )
    return freeze(raw)


def parse_command(raw: Any, where: Where) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list | tuple) or not raw or not all(is_text(a) for a in raw):
        raise where.fail("command", "must be a non-empty list of arguments (strings)")
    return tuple(raw)


def is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def parse_arrays(raw: Any, where: Where) -> Mapping[str, Any]:
    """``"DTYPE[D0,...]"`` -> names, name -> ``"DTYPE[D0,...]"``, or name -> an object
    (``{dtype, shape}``, with a range or not); held as name -> object whatever the form read
    (:mod:`.tensor_ranges`)."""
    if not isinstance(raw, Mapping):
        raise where.fail("arrays", "must be an object of name -> 'DTYPE[D0,...]' or {dtype, shape}")
    if not all(isinstance(spec, Mapping) for spec in raw.values()):
        raw = expand(raw, where)
    for name, spec in raw.items():
        if not isinstance(spec, Mapping):
            raise where.fail(f"arrays.{name}", "must be 'DTYPE[D0,...]' or exactly {dtype, shape}")
        check_entry_keys(spec, name, where)
        if not isinstance(spec["dtype"], str) or not spec["dtype"]:
            raise where.fail(f"arrays.{name}.dtype", "must be a dtype name such as 'float32'")
        shape = spec["shape"]
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise where.fail(f"arrays.{name}.shape", "must be a list of non-negative integers")
    frozen: Mapping[str, Any] = freeze(raw)
    return frozen


def plain_objects(raw: Any) -> bool:
    """Whether a (parsed) arrays manifest writes a plain entry as an object, the older form."""
    return isinstance(raw, Mapping) and any(
        isinstance(spec, Mapping) and set(spec) == PLAIN_KEYS for spec in raw.values()
    )


def parse_string(raw: Mapping[str, Any], key: str, where: Where) -> str | None:
    if key not in raw:
        return None
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise where.fail(key, "must be a non-empty string")
    return value


def check_profile(name: str, where: Where) -> None:
    try:
        limits.profile(name)
    except UsageError as e:
        raise where.fail("profile", e.message, fix=e.fix) from e


def parse_metadata(raw: Any, where: Where) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise where.fail("metadata", "must be an object")
    check_value(raw, where, "metadata")
    frozen: Mapping[str, Any] = freeze(raw)
    return frozen
