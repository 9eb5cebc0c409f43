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
object besides ``locked_environment``. Each file needs its ``sha256``; ``tolerance`` is a number
(the largest mean absolute error) or a metric object; fields not named here are kept as the
record's metadata, and so is ``locked_environment``. Duplicate keys are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fixture_store.importers.entry import (
    ExpectedDigest,
    ManifestEntry,
    ManifestError,
    Upstream,
    load_json,
    refuse_duplicates,
)

FORMAT = "json"
_TOP = frozenset({"format_version", "locked_environment"})
_KNOWN = frozenset(
    {"sha256", "size", "url", "arrays", "tolerance", "upstream", "seed", "input_shape", "generator"}
)


class _Duplicate(Exception):  # not a ValueError: load_json reads those as the parser's
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def parse(text: str, shown: str) -> tuple[ManifestEntry, ...]:
    try:
        doc = load_json(text, shown, object_pairs_hook=_unique)
    except _Duplicate as e:
        raise ManifestError(shown, f"duplicate key {e.args[0]!r}") from e
    if not isinstance(doc, dict) or "format_version" not in doc:
        raise ManifestError(shown, "must be an object with a 'format_version'")
    environment = doc.get("locked_environment")
    if environment is not None and not isinstance(environment, dict):
        raise ManifestError(f"{shown}: 'locked_environment'", "must be an object")
    files = _file_map(doc, shown)
    base = {"locked_environment": environment} if environment is not None else {}
    return refuse_duplicates(
        [_entry(name, raw, f"{shown}: {name!r}", base) for name, raw in files.items()]
    )


def looks_like(text: str, shown: str) -> bool:
    return shown.endswith(".json") and '"format_version"' in text


def _file_map(doc: dict[str, Any], shown: str) -> dict[str, Any]:
    maps = [key for key in doc if key not in _TOP]
    if len(maps) != 1 or not isinstance(doc[maps[0]], dict):
        raise ManifestError(
            shown,
            f"needs exactly one map of file name -> entry besides {sorted(_TOP)}; found "
            f"{maps or 'none'}",
        )
    files: dict[str, Any] = doc[maps[0]]
    return files


def _entry(name: str, raw: Any, where: str, base: Mapping[str, Any]) -> ManifestEntry:
    if not isinstance(raw, dict):
        raise ManifestError(where, "must be an object with a 'sha256'")
    if not isinstance(raw.get("sha256"), str):
        raise ManifestError(where, "missing 'sha256'", fix="sha256sum FILE gives it")
    digest = ExpectedDigest.parse("sha256", raw["sha256"].removeprefix("sha256:"), where)
    return ManifestEntry(
        name,
        (digest,),
        where,
        size=_natural(raw, "size", where),
        url=_string(raw, "url", where),
        arrays=_arrays(raw.get("arrays"), where),
        tolerance=_tolerance(raw.get("tolerance"), where),
        upstream=Upstream.from_json(raw["upstream"], where) if "upstream" in raw else None,
        seed=_integer(raw, "seed", where),
        input_shape=_shape(raw.get("input_shape"), f"{where}: 'input_shape'"),
        generator=_string(raw, "generator", where),
        metadata={**base, **{k: v for k, v in raw.items() if k not in _KNOWN}},
    )


def _arrays(raw: Any, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ManifestError(where, "'arrays' must be an object of name -> {dtype, shape}")
    for name, spec in raw.items():
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}:
            raise ManifestError(where, f"arrays[{name!r}] must be exactly {{dtype, shape}}")
        if not isinstance(spec["dtype"], str) or not spec["dtype"]:
            raise ManifestError(where, f"arrays[{name!r}].dtype must be a dtype name")
        _shape(spec["shape"], f"{where}: arrays[{name!r}].shape")
    return raw


def _shape(raw: Any, where: str) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in raw
    ):
        raise ManifestError(where, "must be a list of non-negative integers")
    return tuple(raw)


def _tolerance(raw: Any, where: str) -> float | dict[str, Any] | None:
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
            "'tolerance' must be a finite non-negative number (mean absolute error) or an object",
        )
    return float(raw)


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
