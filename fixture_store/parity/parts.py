"""The two parts of every report value: what is the same on every machine, and what is not.

A file a DVC stage tracks in ``dvc.lock`` (``reports/*.json``, ``reports/compare.html``,
``metrics/*.json``, ``plots/*.csv``) holds only the **tracked** part: what every machine that
passes computes alike (outcomes, bounds, counts, names, structural facts). What a machine's
kernels, clock or platform decide (the errors of values within their tolerance, timings, the
platform, local paths, a runtime's own messages) is the **run** part: it goes to the untracked
run report beside the tracked file (:func:`run_path`: ``reports/run/…``), never into it.

The split is declared once, on the value's fields: metadata :data:`RUN` marks a field of the run
part, :data:`KEY` a field that names the value in both parts (so a run entry can be matched to its
tracked one); every other field is tracked. A report value has a ``to_json(part)`` made with
:func:`fields_json`, which writes its fields of one part; a report value nested in a tracked
field is split by its own declarations, so a report can only put
a run number into a tracked file by declaring the field tracked.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

_PART = "fixture_store.part"
# Where a tracked file's run report goes, relative to the tracked file's folder.
RUN_FOLDER = "run"


class Part(StrEnum):
    """Which part of a value to write: all of it (``--json``), the tracked or the run part."""

    ALL = "all"
    TRACKED = "tracked"
    RUN = "run"


class _Role(StrEnum):
    TRACKED = "tracked"
    RUN = "run"
    KEY = "key"


# A field's metadata that puts it in the run part, or makes it a key of both:
# ``max_abs: float = field(default=0.0, metadata=parts.RUN)``. A run field has a default (what
# :func:`without_run` sets it back to); every field without either is tracked.
RUN: Mapping[str, Any] = MappingProxyType({_PART: _Role.RUN})
KEY: Mapping[str, Any] = MappingProxyType({_PART: _Role.KEY})


def role(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get(_PART, _Role.TRACKED))


def declares_parts(value: Any) -> bool:
    """Whether ``value`` is a report value: a dataclass instance declaring its parts."""
    return (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and any(_PART in f.metadata for f in dataclasses.fields(value))
    )


def _wanted(f: dataclasses.Field[Any], part: Part) -> bool:
    r = role(f)
    return part is Part.ALL or r in (_Role.KEY, part)


def fields_json(
    value: Any,
    part: Part,
    *,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    skip: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The fields of dataclass ``value`` that belong to ``part``, as JSON, in field order.

    A tracked field holding report values (one, or a tuple of them) is written by their own
    ``to_json(part)``; in the run part it is left out when they hold no run number. A run or
    key field is written whole. ``convert``
    writes a field its own way (its part still decides whether it is written); ``skip`` leaves
    fields out of every part (the caller writes them).
    """
    convert = convert or {}
    doc: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        if f.name in skip:
            continue
        item = getattr(value, f.name)
        if f.name in convert:
            if _wanted(f, part):
                doc[f.name] = convert[f.name](item)
            continue
        if role(f) == _Role.TRACKED and _nested(item):
            # A tracked field holding report values: each is split by its own fields.
            if part is not Part.RUN or _has_run(item):
                doc[f.name] = _nested_json(item, part)
            continue
        if _wanted(f, part):
            doc[f.name] = plain(item)
    return doc


def _nested(item: Any) -> bool:
    if isinstance(item, tuple | list):
        return bool(item) and all(declares_parts(i) for i in item)
    return declares_parts(item)


def _nested_json(item: Any, part: Part) -> Any:
    if isinstance(item, tuple | list):
        return [i.to_json(part) for i in item]
    return item.to_json(part)


def _has_run(item: Any) -> bool:
    """Whether a nested value (or any of a tuple of them) declares a run field."""
    items = item if isinstance(item, tuple | list) else (item,)
    for i in items:
        for f in dataclasses.fields(i):
            if role(f) == _Role.RUN:
                return True
            value = getattr(i, f.name)
            if role(f) == _Role.TRACKED and _nested(value) and _has_run(value):
                return True
    return False


def plain(item: Any) -> Any:
    """A field's value as JSON: enums by value, paths and digests as text, tuples as lists."""
    if isinstance(item, enum.Enum):
        return item.value
    if item is None or isinstance(item, bool | int | float | str):
        return item
    if isinstance(item, tuple | list):
        return [plain(i) for i in item]
    if isinstance(item, Mapping):
        return {str(k): plain(v) for k, v in item.items()}
    text = getattr(item, "text", None)
    if isinstance(text, str) or isinstance(item, Path):
        return text if isinstance(text, str) else str(item)
    to_json = getattr(item, "to_json", None)
    if not callable(to_json):
        raise TypeError(f"no JSON form for a {type(item).__name__}")
    return to_json()


def without_run(value: Any) -> Any:
    """``value`` with every run field set back to its default, in the report values nested in
    its tracked fields too: what a page made for a tracked file may show."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if role(f) == _Role.RUN:
            if f.default is not dataclasses.MISSING:
                changes[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                changes[f.name] = f.default_factory()
            else:
                raise TypeError(f"{type(value).__name__}.{f.name}: a run field needs a default")
        elif role(f) == _Role.TRACKED and _nested(item):
            changes[f.name] = (
                tuple(without_run(i) for i in item)
                if isinstance(item, tuple | list)
                else without_run(item)
            )
    return dataclasses.replace(value, **changes)


def run_path(tracked: Path) -> Path:
    """The run report beside the tracked file ``tracked``: ``<folder>/run/<name>``."""
    return tracked.parent / RUN_FOLDER / tracked.name
