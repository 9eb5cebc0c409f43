"""Many arrays of one dtype judged under one tolerance at once: the fast path of a record of
thousands of small arrays.

:func:`judge_batch` lays the arrays end to end and computes every metric's error for all of them
in a handful of numpy calls (element-wise as :class:`~fixture_store.numerics.arrays.Errors`
does, then per array with :mod:`~fixture_store.numerics.segments`), so a record of 7,500 arrays
costs a few calls per metric instead of a few per array and metric. It decides only what it can
decide exactly as :func:`~fixture_store.numerics.arrays.judge_arrays` would, with the same bits:
an array that is bit-identical, or within every check with numbers only (no NaN or infinity,
no error past float64's range). Every other array (one outside a check, one holding a special
value, a cosine that needs rescaling) is left **undecided**, for the caller to judge alone
through ``judge_arrays``, the one definition; that path also writes the failure's reason.

What can be batched (:func:`batchable`): float16, float32 and float64 arrays (native byte
order) of the same dtype and shape on both sides, not empty, under a tolerance whose checks are
the metrics listed in :data:`BATCHED` with their plain bounds. Anything else goes alone. An
actual array whose rule reshapes or casts it (``shape: squeeze``, ``dtype: same_kind``) is
conformed first, as judging it alone conforms it
(:func:`~fixture_store.numerics.arrays.conform`), and then batches with the arrays of its dtype and
rule: a port whose references are ``(1, n)`` and candidates ``(n,)`` is still one batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from enum import IntEnum
from typing import Any

import numpy as np

from fixture_store.numerics import integers, segments, ulp
from fixture_store.numerics.arrays import _UNSCALED as UNSCALED
from fixture_store.numerics.arrays import _relative as relative
from fixture_store.registry.tolerance import ArrayTolerance, Check, Metric

_IEEE = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_CHECK_FIELDS = frozenset({"metric", "atol", "rtol", "bound", "floor"})
_RULE_FIELDS = frozenset({"dtype", "shape", "equal_nan", "why", "more"})

Array = np.ndarray[Any, Any]


class Status(IntEnum):
    IDENTICAL = 0  # the same bytes, numbers only
    WITHIN = 1  # every check holds
    UNDECIDED = 2  # judged alone: outside a check, a special value, or out of range


@dataclass(frozen=True)
class Batch:
    """Per array of a batch, in its order: the status and every metric's error (meaningful
    where the status is WITHIN), and the flat index of the largest error."""

    status: np.ndarray[Any, np.dtype[np.int8]]
    max_abs: Array
    mean_abs: Array
    max_rel: Array
    mean_rel: Array
    max_ulp: Array
    rms: Array
    cosine: Array
    worst: np.ndarray[Any, np.dtype[np.intp]]


def batchable(expected: Array, actual: Array, tolerance: ArrayTolerance) -> bool:
    """Whether this pair can be judged in a batch under ``tolerance`` (resolved: no
    ``default`` check left)."""
    return (
        batchable_dtype(expected.dtype)
        and batchable_pair(expected, actual)
        and batched_tolerance(tolerance)
    )


def batchable_dtype(dtype: np.dtype[Any]) -> bool:
    """float16, float32 or float64 in native byte order."""
    return dtype in _IEEE


def batchable_pair(expected: Array, actual: Array) -> bool:
    """The same dtype and shape on both sides, not empty."""
    return actual.dtype == expected.dtype and actual.shape == expected.shape and expected.size > 0


@functools.lru_cache(maxsize=256)
def batched_tolerance(tolerance: ArrayTolerance) -> bool:
    """Every check is one :data:`BATCHED` judges, and the tolerance sets nothing else (a
    field this module does not know, set, could change what ``judge_arrays`` decides)."""
    return _plain(tolerance, _RULE_FIELDS | _CHECK_FIELDS) and all(
        c.metric in BATCHED and _plain(c, _CHECK_FIELDS) for c in tolerance.checks
    )


def _plain(value: Any, known: frozenset[str]) -> bool:
    """Every field of ``value`` not in ``known`` holds its default."""
    for f in fields(value):
        if f.name in known:
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            return False
        if getattr(value, f.name) != default:
            return False
    return True


@dataclass(frozen=True)
class _Flat:
    """The arrays of a batch end to end, with the element-wise errors ``Errors`` computes."""

    starts: Array
    sizes: Array
    e: Array  # float64
    a: Array
    diff: Array  # |a - e|
    scale: Array  # |e|
    ulps: Array  # uint64 steps


def judge_batch(
    expected: Sequence[Array], actual: Sequence[Array], tolerance: ArrayTolerance
) -> Batch:
    """Judge each ``actual[i]`` against ``expected[i]`` (all :func:`batchable`, of one dtype)
    under ``tolerance``."""
    sizes = np.fromiter((x.size for x in expected), np.intp, len(expected))
    starts = segments.starts_of(sizes)
    exp = np.concatenate([x.reshape(-1) for x in expected])
    act = np.concatenate([x.reshape(-1) for x in actual])
    bits = _BITS[exp.dtype.itemsize]
    same_bytes = ~segments.any_of(exp.view(bits) != act.view(bits), starts)
    e, a = exp.astype(np.float64), act.astype(np.float64)
    numbers = segments.every(np.isfinite(e) & np.isfinite(a), starts)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(a - e)
    flat = _Flat(starts, sizes, e, a, diff, np.abs(e), ulp.steps(exp, act).count)
    max_abs = segments.maxima(diff, starts)
    # Past float64's range the errors are infinite: judged alone.
    decidable = numbers & np.isfinite(max_abs)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        summary = _summaries(flat, max_abs)
        cosine, in_range = _cosines(flat)
        summary["cosine"] = cosine
        within = np.ones(sizes.size, bool)
        for check in tolerance.checks:
            within &= BATCHED[check.metric](flat, summary, check)
    decidable &= in_range
    status = np.full(sizes.size, Status.UNDECIDED, np.int8)
    status[decidable & within] = Status.WITHIN
    status[same_bytes & numbers] = Status.IDENTICAL
    by_ulp = tolerance.metric is Metric.ULP
    # NaN ranks first, as argmax finds it (only in an array judged alone, where it matters).
    ranking = summary["ulps"] if by_ulp else np.where(np.isnan(diff), np.inf, diff)
    worst = segments.first_maxima(ranking, starts, sizes)
    del summary["ulps"]
    return Batch(status=status, worst=worst, **summary)


def _summaries(flat: _Flat, max_abs: Array) -> dict[str, Array]:
    """Every metric's error per array, with the arithmetic of ``Errors`` (rms scaled by the
    largest error; the mean relative error over the finite relative errors)."""
    starts, sizes, diff = flat.starts, flat.sizes, flat.diff
    rel = relative(diff, flat.scale)
    finite_rel = np.isfinite(rel)
    counted = segments.totals(finite_rel.astype(np.intp), starts)
    max_rel = segments.maxima(rel, starts)
    rel_sums = segments.totals(np.where(finite_rel, rel, 0.0), starts)
    mean_rel = np.where(counted > 0, rel_sums / np.maximum(counted, 1), max_rel)
    top = np.where(max_abs > 0, max_abs, 1.0)
    scaled = diff / np.repeat(top, sizes)
    rms = np.where(
        max_abs > 0, max_abs * np.sqrt(segments.totals(scaled * scaled, starts) / sizes), 0.0
    )
    ulps = flat.ulps.astype(np.float64)
    return {
        "max_abs": max_abs,
        "mean_abs": segments.totals(diff, starts) / sizes,
        "max_rel": max_rel,
        "mean_rel": mean_rel,
        "max_ulp": segments.maxima(ulps, starts),
        "rms": rms,
        "ulps": ulps,
    }


def _cosines(flat: _Flat) -> tuple[Array, Array]:
    """``1 - cos(a, e)`` per array, and where it was computed as ``Errors`` computes it
    unscaled (both largest magnitudes within :data:`UNSCALED`, or one of them zero)."""
    starts, e, a = flat.starts, flat.e, flat.a
    top_e, top_a = segments.maxima(flat.scale, starts), segments.maxima(np.abs(a), starts)
    zero = (top_e == 0) | (top_a == 0)
    low, high = UNSCALED
    in_range = zero | ((top_e > low) & (top_e < high) & (top_a > low) & (top_a < high))
    dot = segments.totals(e * a, starts)
    norms = np.sqrt(segments.totals(e * e, starts)) * np.sqrt(segments.totals(a * a, starts))
    cosine = np.minimum(2.0, np.maximum(0.0, 1.0 - dot / norms))
    cosine = np.where(zero, np.where(top_e == top_a, 0.0, 1.0), cosine)
    return cosine, in_range


# Whether each array holds under one check: one entry per metric a batch decides. "exact" never
# holds here (bit-identical arrays are decided before the checks).
BatchJudge = Callable[[_Flat, Mapping[str, Array], Check], Array]


def _exact(flat: _Flat, _summary: Mapping[str, Array], _check: Check) -> Array:
    return np.zeros(flat.sizes.size, bool)


def _allclose(flat: _Flat, _summary: Mapping[str, Array], check: Check) -> Array:
    outside = ~(flat.diff <= check.atol + check.rtol * flat.scale)
    return ~segments.any_of(outside, flat.starts)


def _max_rel(flat: _Flat, _summary: Mapping[str, Array], check: Check) -> Array:
    rel = relative(flat.diff, np.maximum(flat.scale, check.floor))
    return ~segments.any_of(rel > check.bound, flat.starts)


def _ulp(flat: _Flat, _summary: Mapping[str, Array], check: Check) -> Array:
    most = np.maximum.reduceat(flat.ulps, flat.starts)
    return ~integers.beyond(most, check.bound)


def _bounded(summary_key: str) -> BatchJudge:
    def judge(_flat: _Flat, summary: Mapping[str, Array], check: Check) -> Array:
        held: Array = ~(summary[summary_key] > check.bound)
        return held

    return judge


BATCHED: Mapping[Metric, BatchJudge] = {
    Metric.EXACT: _exact,
    Metric.ALLCLOSE: _allclose,
    Metric.MEAN_ABS: _bounded("mean_abs"),
    Metric.MAX_ABS: _bounded("max_abs"),
    Metric.ULP: _ulp,
    Metric.RMS: _bounded("rms"),
    Metric.MAX_REL: _max_rel,
    Metric.COSINE: _bounded("cosine"),
}
