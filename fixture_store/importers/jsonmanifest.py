"""The hand-rolled JSON manifest many projects keep beside their reference data::

    {"format_version": 1,
     "locked_environment": {"torch": "2.4.1", ...},
     "fixtures": {"block0.npz": {"sha256": "...", "arrays": {"x": {"dtype": "float32",
                                  "shape": [1, 3]}}, "tolerance": 1e-5,
                                  "upstream": {"repository": "...", "revision": "...",
                                               "checkpoint": "..."},
                                  "seed": 0, "input_shape": [1, 3], "generator": "...",
                                  ...}}}

The map of files may have any key (``fixtures``, ``files``, ...): it is the one top-level
object whose entries carry a digest. Each file needs its ``sha256``; ``tolerance`` is a number
(the largest mean absolute error) or a metric object. Fields are read by the tables of
:mod:`~fixture_store.importers.fields` under every name they know; a field no table knows, at
any level, is kept verbatim (by its JSON pointer) and reported, never refused. Duplicate keys
are refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store.importers import fields as fields_mod
from fixture_store.importers import upstreams
from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    load_json,
    refuse_duplicates,
)

FORMAT = "json"
_TOP = frozenset(name for row in fields_mod.DOCUMENT for name in row.names)
_DIGESTS = next(row.names for row in fields_mod.ENTRY if row.name == "sha256")


class _Duplicate(Exception):  # not a ValueError: load_json reads those as the parser's
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def parse(
    text: str, shown: str, at: str | None = None, host: str | None = None
) -> tuple[ManifestEntry, ...]:
    """The entries of the JSON manifest ``text``: ours (a ``format_version`` and one map of
    files), or a plain map of name -> entry as other projects ship it, found by itself (the
    document, or one level down: provider -> name -> entry) or at the JSON pointer ``at``.
    ``host`` says where bare ``OWNER/NAME`` upstreams live; without it every entry that has
    one is named in one refusal."""
    questions: list[upstreams.AmbiguousHostError] = []
    entries = _parse(text, shown, at, _Asked(host, questions))
    upstreams.refuse_ambiguous(questions, shown)
    return entries


@dataclass(frozen=True)
class _Asked:
    """The upstream host given (if any), and the entries that needed one without it."""

    host: str | None
    questions: list[upstreams.AmbiguousHostError]


def _parse(text: str, shown: str, at: str | None, asked: _Asked) -> tuple[ManifestEntry, ...]:
    try:
        doc = load_json(text, shown, object_pairs_hook=_unique)
    except _Duplicate as e:
        raise ManifestError(shown, f"duplicate key {e.args[0]!r}") from e
    if not isinstance(doc, dict):
        raise ManifestError(shown, "must be an object: a map of file name -> entry")
    if at is not None or "format_version" not in doc:
        return _plain_map(doc, shown, at, asked)
    key = _file_map(doc, shown)
    top = fields_mod.Fields()
    known, _ = top.read({k: v for k, v in doc.items() if k != key}, fields_mod.DOCUMENT, "")
    environment = known.get("locked_environment")
    if environment is not None and not isinstance(environment, dict):
        raise ManifestError(f"{shown}: 'locked_environment'", "must be an object")
    base = {"locked_environment": environment} if environment is not None else {}
    at = fields_mod.pointer("", key)
    return refuse_duplicates(
        _asking(
            asked,
            (
                (name, raw, f"{shown}: {name!r}", base, top, fields_mod.pointer(at, name))
                for name, raw in doc[key].items()
            ),
        )
    )


def _asking(
    asked: _Asked,
    items: Iterable[tuple[str, Any, str, Mapping[str, Any], fields_mod.Fields, str]],
) -> list[ManifestEntry]:
    """Each item's entry; one whose upstream needs a host is set aside in ``asked``, so that
    every such entry is named at once."""
    out = []
    for name, raw, where, base, top, at in items:
        try:
            out.append(_entry(name, raw, where, base, top=top, at=at, host=asked.host))
        except upstreams.AmbiguousHostError as e:
            asked.questions.append(e)
    return out


_POINTER_FIX = "point at the map of name -> entry: --json-pointer /KEY[/KEY...]"


def _plain_map(
    doc: dict[str, Any], shown: str, at: str | None, asked: _Asked
) -> tuple[ManifestEntry, ...]:
    """The entries of a map without our ``format_version``: at pointer ``at``, else the
    document if its entries carry digests, else one level down (each value a map of entries,
    named ``OUTER/NAME``)."""
    if at is not None:
        target = _resolve(doc, at, shown)
        if not _lists_files(target, digests=True):
            raise ManifestError(
                f"{shown}: {at!r}", "is not a map of name -> entry with a digest", fix=_POINTER_FIX
            )
        prefix = "/".join(_tokens(at))
        return refuse_duplicates(_map_entries(target, shown, at, prefix, asked))
    if _lists_files(doc, digests=True):
        return refuse_duplicates(_map_entries(doc, shown, "", "", asked))
    if doc and all(_lists_files(value, digests=True) for value in doc.values()):
        return refuse_duplicates(
            [
                entry
                for outer, value in doc.items()
                for entry in _map_entries(value, shown, fields_mod.pointer("", outer), outer, asked)
            ]
        )
    raise ManifestError(
        shown,
        "has no 'format_version' and is not a map of name -> entry with a digest (sha256, hash, "
        "checksum, ...), nor a map of such maps",
        fix=_POINTER_FIX,
    )


def _map_entries(
    entries: dict[str, Any], shown: str, at: str, prefix: str, asked: _Asked
) -> list[ManifestEntry]:
    top = fields_mod.Fields()
    return _asking(
        asked,
        (
            (
                f"{prefix}/{name}" if prefix else name,
                raw,
                f"{shown}: {fields_mod.pointer(at, name)!r}",
                {},
                top,
                fields_mod.pointer(at, name),
            )
            for name, raw in entries.items()
        ),
    )


def _tokens(at: str) -> list[str]:
    if at in ("", "/"):
        return []
    if not at.startswith("/"):
        raise ManifestError(at, "a JSON pointer starts with '/' (RFC 6901)", fix=_POINTER_FIX)
    return [t.replace("~1", "/").replace("~0", "~") for t in at[1:].split("/")]


def _resolve(doc: Any, at: str, shown: str) -> Any:
    node = doc
    for token in _tokens(at):
        if not isinstance(node, dict) or token not in node:
            raise ManifestError(f"{shown}: {at!r}", f"no key {token!r} there", fix=_POINTER_FIX)
        node = node[token]
    return node


def looks_like(text: str, shown: str) -> bool:
    return shown.endswith(".json") and text.lstrip().startswith("{")


def _file_map(doc: dict[str, Any], shown: str) -> str:
    """The key of the one map of file name -> entry: the one object whose entries all carry a
    digest, else the one object of objects; every other top-level field is the document's."""
    others = [key for key in doc if key not in _TOP]
    maps = [key for key in others if _lists_files(doc[key], digests=True)]
    if len(maps) != 1:
        maps = [key for key in others if _lists_files(doc[key], digests=False)]
    if len(maps) != 1:
        raise ManifestError(
            shown,
            f"needs exactly one map of file name -> entry besides {sorted(_TOP)}; found "
            f"{maps or 'none'}",
        )
    return maps[0]


def _lists_files(value: Any, *, digests: bool) -> bool:
    if not isinstance(value, dict) or (digests and not value):
        return False
    entries = value.values()
    if digests:
        return all(isinstance(e, dict) and any(d in e for d in _DIGESTS) for e in entries)
    return all(isinstance(e, dict) for e in entries)


def _entry(
    name: str,
    raw: Any,
    where: str,
    base: Mapping[str, Any],
    *,
    top: fields_mod.Fields,
    at: str,
    host: str | None = None,
) -> ManifestEntry:
    if not isinstance(raw, dict):
        raise ManifestError(where, "must be an object with a 'sha256'")
    found = fields_mod.Fields()
    known, keys = found.read(raw, fields_mod.ENTRY, at)
    if not isinstance(known.get("sha256"), str):
        raise ManifestError(where, "missing 'sha256'", fix="sha256sum FILE gives it")
    stated = upstreams.Read((), None)
    if "upstream" in known:
        beside = keys.get("upstream_digest")
        stated = upstreams.read(
            known["upstream"],
            fields_mod.pointer(at, keys["upstream"]),
            where,
            found,
            (fields_mod.pointer(at, beside), known["upstream_digest"]) if beside else None,
            host=host,
        )
    elif "upstream_digest" in known:  # a digest beside no upstream: whose it is is unknown
        key = keys["upstream_digest"]
        found.mapped = [m for m in found.mapped if m.pointer != fields_mod.pointer(at, key)]
        found.unknown[fields_mod.pointer(at, key)] = known["upstream_digest"]
    arrays = _arrays(known.get("arrays"), where, fields_mod.pointer(at, "arrays"), found)
    tolerance = _tolerance(known.get("tolerance"), where)
    tolerance, named = _intermediates(known, keys, tolerance, where, found=found, at=at)
    every = top.merged(found)
    return ManifestEntry(
        name,
        (_digest(known["sha256"], where),),
        where,
        size=_natural(known, "size", where),
        url=_string(known, "url", where),
        arrays=arrays,
        tolerance=tolerance,
        upstream=stated.pinned,
        stated_upstream=stated.stated,
        seed=_integer(known, "seed", where),
        input_shape=_shape(known.get("input_shape"), f"{where}: 'input_shape'"),
        generator=_string(known, "generator", where),
        metadata={**base, **named},
        unknown=every.unknown,
        mapped=tuple(every.mapped),
        pointer=at,
    )


def _digest(text: str, where: str) -> ExpectedDigest:
    """The file's digest, ``ALGORITHM:HEX`` or bare hex (SHA-256)."""
    algorithm, colon, hexpart = text.partition(":")
    if not colon:
        algorithm, hexpart = "sha256", text
    return ExpectedDigest.parse(algorithm, hexpart, where)


def _arrays(raw: Any, where: str, at: str, found: fields_mod.Fields) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ManifestError(where, "'arrays' must be an object of name -> {dtype, shape}")
    arrays: dict[str, Any] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise ManifestError(where, f"arrays[{name!r}] must be an object {{dtype, shape}}")
        known, _ = found.read(spec, fields_mod.ARRAY, fields_mod.pointer(at, name))
        if set(known) != {"dtype", "shape"}:
            raise ManifestError(where, f"arrays[{name!r}] must have a dtype and a shape")
        if not isinstance(known["dtype"], str) or not known["dtype"]:
            raise ManifestError(where, f"arrays[{name!r}].dtype must be a dtype name")
        _shape(known["shape"], f"{where}: arrays[{name!r}].shape")
        arrays[name] = known
    return arrays


def _shape(raw: Any, where: str) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in raw
    ):
        raise ManifestError(where, "must be a list of non-negative integers")
    return tuple(raw)


def _tolerance(raw: Any, where: str, key: str = "tolerance") -> float | dict[str, Any] | None:
    if raw is None or isinstance(raw, dict):
        return raw
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or raw < 0
        or not math.isfinite(raw)
    ):
        raise ManifestError(
            where,
            f"{key!r} must be a finite non-negative number (mean absolute error) or an object",
        )
    return float(raw)


_NAMED = "metadata.intermediate_tolerance"


def _intermediates(
    known: Mapping[str, Any],
    keys: Mapping[str, str],
    tolerance: float | dict[str, Any] | None,
    where: str,
    *,
    found: fields_mod.Fields,
    at: str,
) -> tuple[float | dict[str, Any] | None, dict[str, Any]]:
    """The record's tolerance with the manifest's intermediate tolerance as its
    ``intermediates`` rule (a number: the largest mean absolute error), when the manifest
    gives their order and the record's own tolerance; otherwise the tolerance as it is, the
    intermediate tolerance kept as the named field ``metadata.intermediate_tolerance`` and an
    order without a rule kept as an unknown field, the report saying why."""
    rule_key, order_key = keys.get("intermediate_tolerance"), keys.get("intermediates")
    rule = _tolerance(known["intermediate_tolerance"], where, rule_key) if rule_key else None
    order = known.get("intermediates")
    why = None
    if order is None:
        why = "the parity model needs the intermediates' order: list their names in 'intermediates'"
    elif tolerance is None:
        why = "the parity model judges intermediates over the record's tolerance: give 'tolerance'"
    elif rule is None:
        why = "no intermediate tolerance: the order alone is kept"
    if why is not None:
        if order_key is not None:  # an order with nothing to order: kept as written
            here = fields_mod.pointer(at, order_key)
            found.mapped = [m for m in found.mapped if m.pointer != here]
            found.unknown[here] = order
        if rule_key is None:
            return tolerance, {}
        found.relabel(fields_mod.pointer(at, rule_key), _NAMED, why)
        return tolerance, {"intermediate_tolerance": known["intermediate_tolerance"]}
    if not isinstance(order, list) or not all(isinstance(n, str) and n for n in order):
        raise ManifestError(where, f"{order_key!r} must be a list of array names")
    for key, lands in (
        (rule_key, "tolerance.intermediates"),
        (order_key, "tolerance.intermediates.order"),
    ):
        found.relabel(fields_mod.pointer(at, str(key)), lands, None)  # reported under any name
    return {**_rule(tolerance), "intermediates": {"order": order, **_rule(rule)}}, {}


def _rule(value: float | dict[str, Any] | None) -> dict[str, Any]:
    """A manifest's tolerance as a record's rule: a number is the largest mean absolute error."""
    if isinstance(value, dict):
        return value
    return {"metric": fields_mod.MEAN_ABS, "max": value}


def _string(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ManifestError(where, f"{key!r} must be a non-empty string")
    return value


def _integer(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ManifestError(where, f"{key!r} must be an integer")
    return value


def _natural(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    value = _integer(raw, key, where)
    if value is not None and value < 0:
        raise ManifestError(where, f"{key!r} must be a non-negative integer")
    return value
