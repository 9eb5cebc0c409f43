"""Expectations per environment: a record's rules, and its reference, where a comparison runs.

A tolerance's ``expectations`` maps a conjunction of conditions (the language of
:mod:`fixture_store.registry.conditions`: ``device:cuda``, ``runtime:onnxruntime,
provider:CUDAExecutionProvider``, ``dtype:bfloat16``, ...) to an entry layered over the record's
tolerance where they all hold::

    "tolerance": {
      "metric": "rms", "max": 1e-6,
      "expectations": {
        "device:cuda": {"max": 1e-4, "why": "TF32 matmuls"},
        "device:cuda,dtype:bfloat16": {"metric": "max_abs", "max": 0.05,
                                       "reference": "m/out_bf16.npz"}
      }
    }

An entry takes every field of a rule (``metric``, bounds, ``checks``, ``dtype``, ``shape``,
``equal_nan``, ``why``, ``per_array``, ``per_dtype``, ``oracle``) and ``reference``, another
record whose object is the reference there (where outputs legitimately differ). Its fields replace
the record's; one naming ``metric`` or ``checks`` replaces the record's metric, checks and bounds;
its ``per_array``/``per_dtype`` entries replace the record's of the same key and keep the others.
Each entry is layered and checked once, when the registry is read.

Which entry applies (:func:`select`): of those whose conditions all hold, the one with the most
conditions; two that hold with as many conditions are an error naming both. None: the record's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store import bounded_json
from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import conditions
from fixture_store.registry.environment import Environment
from fixture_store.registry.where import Where

KEY = "expectations"
REFERENCE = "reference"
# A rule's fields that an entry naming its own metric or checks drops from the record's.
_JUDGING = ("metric", "checks", "atol", "rtol", "max", "floor")
_MERGED = ("per_array", "per_dtype")


@dataclass(frozen=True)
class Expectation:
    """One entry: its key as written, its conditions, the entry as written (JSON text, so the
    value stays hashable and prints back), the record's tolerance with it layered over, and the
    record that is the reference where it applies (``None``: the record's own)."""

    key: str
    conditions: tuple[str, ...]
    written: str
    tolerance: Any  # a Tolerance (this module is below tolerance.py)
    reference: str | None = None

    def holds(self, where: Environment | None) -> bool:
        return all(conditions.holds(c, where) for c in self.conditions)

    def to_json(self) -> Any:
        return bounded_json.loads(self.written)


def parse(
    raw: Mapping[str, Any],
    where: Where,
    field: str,
    parse_rule: Callable[[Mapping[str, Any], Where, str], Any],
    allowed: frozenset[str],
) -> tuple[Expectation, ...] | None:
    """The ``expectations`` of a tolerance ``raw`` (``None`` when it has none); each entry is
    layered over ``raw`` and parsed with ``parse_rule`` (errors name the entry's field)."""
    if KEY not in raw:
        return None
    entries = raw[KEY]
    at = f"{field}.{KEY}"
    if not isinstance(entries, Mapping) or not entries:
        raise where.fail(at, 'must be an object of conditions -> rule, e.g. {"device:cuda": {...}}')
    out = []
    for key, entry in entries.items():
        here = f"{at}.{key}"
        try:
            conds = conditions.parse_all(str(key))
        except UsageError as e:
            raise where.fail(here, e.message, fix=e.fix) from None
        if not isinstance(entry, Mapping):
            raise where.fail(here, "must be an object: the rule's fields that differ there")
        unknown = sorted(set(entry) - allowed - {REFERENCE}, key=str)
        if unknown:
            keys = sorted({*allowed, REFERENCE})
            raise where.fail(f"{here}.{unknown[0]}", f"unknown field; one of {keys}")
        reference = entry.get(REFERENCE)
        if REFERENCE in entry and (not isinstance(reference, str) or not reference):
            raise where.fail(f"{here}.{REFERENCE}", "must be the name of a registered record")
        tolerance = parse_rule(layered(raw, entry), where, here)
        out.append(Expectation(str(key), conds, json.dumps(entry), tolerance, reference))
    return tuple(out)


def layered(record: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """The record's tolerance JSON with ``entry``'s fields over it (without expectations)."""
    out = {k: v for k, v in record.items() if k != KEY}
    if any(k in entry for k in ("metric", "checks")):
        for k in _JUDGING:
            out.pop(k, None)
    for k, v in entry.items():
        if k == REFERENCE:
            continue
        if k in _MERGED and isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def select(found: tuple[Expectation, ...] | None, where: Environment | None) -> Expectation | None:
    """The entry that applies in ``where``: the most specific of those that hold; a
    RegistryError when two hold and are equally specific."""
    holding = [e for e in found or () if e.holds(where)]
    if not holding:
        return None
    holding.sort(key=lambda e: conditions.specificity(e.conditions), reverse=True)
    first = holding[0]
    if len(holding) > 1 and len(holding[1].conditions) == len(first.conditions):
        second = holding[1]
        both = ",".join(dict.fromkeys((*first.conditions, *second.conditions)))
        raise RegistryError(
            f"expectations {first.key!r} and {second.key!r} both hold in the environment "
            f"{where} and are equally specific: which rule applies is not defined",
            field=f"tolerance.{KEY}",
            fix=f"add an entry for {both!r}, or make one of them more specific",
        )
    return first
