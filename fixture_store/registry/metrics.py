"""A tolerance's vocabulary: its metrics and the bounds each takes, the dtype and shape rules,
and the parsers of a rule's plain fields (each refusal names the file, the record and the field).
:mod:`fixture_store.registry.tolerance` builds rules of them."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from fixture_store.registry.where import Where

# The onnx backend test runner's defaults.
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-7


class Metric(StrEnum):
    EXACT = "exact"
    ALLCLOSE = "allclose"
    MEAN_ABS = "mean_abs"
    MAX_ABS = "max_abs"
    ULP = "ulp"
    RMS = "rms"
    MAX_REL = "max_rel"
    COSINE = "cosine"
    DEFAULT = "default"  # allclose with the dtype's row of DEFAULT_TABLE

    @property
    def bounds(self) -> tuple[str, ...]:
        """The JSON fields that bound this metric."""
        return BOUNDS_OF[self]


class DtypeRule(StrEnum):
    EXACT = "exact"
    SAME_KIND = "same_kind"  # floats of another width compare in the expected dtype


class ShapeRule(StrEnum):
    EXACT = "exact"
    SQUEEZE = "squeeze"  # equal once size-1 axes are dropped


BOUND = "max"  # the one bound of mean_abs, max_abs, ulp, rms, max_rel and cosine
FLOOR = "floor"  # max_rel's denominator floor
BOUNDS_OF: Mapping[Metric, tuple[str, ...]] = {
    Metric.EXACT: (),
    Metric.ALLCLOSE: ("atol", "rtol"),
    Metric.MEAN_ABS: (BOUND,),
    Metric.MAX_ABS: (BOUND,),
    Metric.ULP: (BOUND,),
    Metric.RMS: (BOUND,),
    Metric.MAX_REL: (BOUND, FLOOR),
    Metric.COSINE: (BOUND,),
    Metric.DEFAULT: (),
}
METRICS = tuple(m.value for m in Metric)
ALL_BOUNDS = ("atol", "rtol", BOUND, FLOOR)
RULES: Mapping[str, tuple[str, ...]] = {
    "dtype": tuple(r.value for r in DtypeRule),
    "shape": tuple(r.value for r in ShapeRule),
}


def parse_metric(raw: Mapping[str, Any], where: Where, field: str) -> Metric | None:
    metric = raw.get("metric")
    if metric is None:
        return None
    if metric not in METRICS:
        raise where.fail(
            f"{field}.metric",
            f"unknown metric {metric!r}{did_you_mean(metric, METRICS)}; one of {METRICS}",
        )
    return Metric(metric)


def did_you_mean(word: object, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for a mistyped name close to one of ``choices``, else ``""``."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word.lower(), choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def refuse_orphan_bounds(raw: Mapping[str, Any], where: Where, field: str) -> None:
    """Under a record judged by several checks an override has no one metric to bound."""
    for key in ALL_BOUNDS:
        if key in raw:
            raise where.fail(
                f"{field}.{key}",
                "the record is judged by several checks: an override with a bound names its "
                "metric (or its own checks)",
            )


def check_bounds(
    raw: Mapping[str, Any], where: Where, field: str, metric: Metric, *, switched: Metric | None
) -> None:
    """Each bound given is a finite, non-negative number the metric uses; a metric ``switched``
    to here that has a ``max`` gets it here (it is not inherited from another metric)."""
    for key in ALL_BOUNDS:
        if key not in raw:
            continue
        if key not in metric.bounds:
            uses = f"takes {' and '.join(metric.bounds)}" if metric.bounds else "takes no bound"
            raise where.fail(f"{field}.{key}", f"does not apply: metric {metric.value!r} {uses}")
        if not is_bound(raw[key]):
            raise where.fail(f"{field}.{key}", "must be a finite, non-negative number")
    if switched is not None and BOUND in switched.bounds and BOUND not in raw:
        raise where.fail(
            f"{field}.{BOUND}",
            f"missing required field: metric {switched.value!r} needs its bound, "
            f'e.g. {{"metric": "{switched.value}", "{BOUND}": 0.0005}}',
        )


def parse_rule(raw: Mapping[str, Any], key: str, where: Where, field: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if value not in RULES[key]:
        raise where.fail(f"{field}.{key}", f"must be one of {RULES[key]}, not {value!r}")
    return str(value)


def parse_flag(raw: Mapping[str, Any], key: str, where: Where, field: str) -> bool | None:
    if key not in raw:
        return None
    if not isinstance(raw[key], bool):
        raise where.fail(f"{field}.{key}", "must be true or false")
    return bool(raw[key])


def parse_why(raw: Mapping[str, Any], where: Where, field: str) -> str | None:
    if "why" not in raw:
        return None
    why = raw["why"]
    if not isinstance(why, str) or not why.strip():
        raise where.fail(f"{field}.why", "must be a non-empty string: the reason failures print")
    return why


def is_bound(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        # NaN is no bound, and an infinite one (``Infinity``, ``1e400``) passes any drift.
        and not (isinstance(value, float) and not math.isfinite(value))
    )
