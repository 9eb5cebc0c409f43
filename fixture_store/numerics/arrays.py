"""Tolerance-aware comparison of arrays: bit-identical, within tolerance, or drift.

Every comparison goes through :func:`judge_arrays`: the comparators (a runtime's outputs vs a
case's expected outputs), regeneration (a candidate fixture vs the registered one), the parity
assertion (a maintainer's outputs vs the verified reference), which report it per array with
:func:`fixture_store.parity.arrays.compare_arrays`, and a video frame from another decoder (its
block means vs the recorded ones).
Shapes and dtypes must match exactly unless the tolerance allows otherwise (``dtype: same_kind``,
``shape: squeeze``): a float64 output where float32 is expected is drift however close the values
are. Every comparison measures max/mean absolute and relative errors and the max ULP distance
(:mod:`fixture_store.numerics.ulp`), whatever metric judges it.

The arithmetic, for every metric (each one an entry of :data:`JUDGES`):

- floats are compared in float64 (complex in complex128); a NaN matches only a NaN and an
  infinity only the same infinity; any other pair holding one is an infinite error, outside
  every bound (an infinite reference never widens ``atol + rtol * |e|`` to infinity);
- integers are compared as integers (:mod:`fixture_store.numerics.integers`): distances in
  uint64, bounds decided exactly, never through float64;
- booleans, strings and objects are equal or not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np

from fixture_store.numerics import aggregate, integers, segments, ulp
from fixture_store.registry.dtypes import DEFAULT_TABLE
from fixture_store.registry.tolerance import (
    ArrayTolerance,
    Check,
    DtypeRule,
    Metric,
    ShapeRule,
)

# Low-precision float types are compared in float32 with a relative tolerance widened to their
# precision (bfloat16 has 8 bits of mantissa: one ulp is 2**-7 relative).
WIDENED_RTOL = {"bfloat16": 1e-2}
_LOW_PRECISION_KINDS = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")


class Outcome(StrEnum):
    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"


@functools.lru_cache(maxsize=256)
def dtype_name(dtype: np.dtype[Any]) -> str:
    return str(dtype.name if hasattr(dtype, "name") else dtype)


def _is_low_precision(dtype: np.dtype[Any]) -> bool:
    name = dtype_name(dtype)
    return any(name.startswith(k) for k in _LOW_PRECISION_KINDS)


@dataclass(frozen=True)
class Judgement:
    """How an actual array compares with the expected one under a tolerance: its outcome, why,
    and its errors when they were measured (``None`` for bit-identical arrays, a dtype or shape
    mismatch, strings, objects and booleans)."""

    outcome: Outcome
    tolerance: ArrayTolerance
    reason: str = ""
    errors: Errors | None = None
    worst_index: tuple[int, ...] | None = None
    measured: bool = True

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.DRIFT


def judge_arrays(expected: Any, actual: Any, tolerance: ArrayTolerance | None = None) -> Judgement:
    """Judge ``actual`` against ``expected`` under ``tolerance`` (default: the ONNX runner's):
    the one comparison every caller goes through."""
    exp = np.asarray(expected)
    tol = resolved(tolerance or ArrayTolerance(), exp.dtype)
    judged = _judge_arrays(exp, np.asarray(actual), tol)
    if judged.ok or not tol.why:
        return judged
    return replace(judged, reason=f"{judged.reason} (why this rule: {tol.why})")


def resolved(tol: ArrayTolerance, dtype: np.dtype[Any]) -> ArrayTolerance:
    """``tol`` with each ``default`` check replaced by what :data:`DEFAULT_TABLE` gives the
    dtype: ``allclose`` with its row's ``rtol``/``atol``, or ``exact`` for a dtype it has no
    row for (integers, booleans, strings)."""
    if not any(c.metric is Metric.DEFAULT for c in tol.checks):
        return tol
    row = DEFAULT_TABLE.get(dtype_name(dtype))
    by_dtype = Check(Metric.EXACT) if row is None else Check(atol=row[1], rtol=row[0])
    return tol.with_checks(tuple(by_dtype if c.metric is Metric.DEFAULT else c for c in tol.checks))


def _judge_arrays(
    exp: np.ndarray[Any, Any], actual: np.ndarray[Any, Any], tol: ArrayTolerance
) -> Judgement:
    act, problem = conform(exp, actual, tol)
    if problem:
        return Judgement(Outcome.DRIFT, tol, problem, measured=False)
    low_precision = _is_low_precision(exp.dtype)
    exact_only = exp.dtype.kind in "OUSb" or (exp.dtype.kind == "V" and not low_precision)
    if (
        not exact_only
        and np.ascontiguousarray(exp).tobytes() == np.ascontiguousarray(act).tobytes()
        and (tol.equal_nan or not _has_nan(exp))
    ):
        return Judgement(Outcome.IDENTICAL, tol)
    if exact_only:
        equal = _exact_equal(exp, act)
        if equal is True:
            return Judgement(Outcome.IDENTICAL, tol)
        reason = "values differ (compared exactly: strings, objects and booleans)"
        return Judgement(Outcome.DRIFT, tol, reason, worst_index=equal or None, measured=False)
    if low_precision:
        tol = _widened(tol, WIDENED_RTOL.get(dtype_name(exp.dtype), 1e-1))
    errors = Errors.of(exp, act, equal_nan=tol.equal_nan)
    outcome, reason = _judge(errors, tol)
    return Judgement(outcome, tol, reason, errors, errors.worst(by_ulp=tol.metric is Metric.ULP))


def _widened(tol: ArrayTolerance, rtol: float) -> ArrayTolerance:
    """An ``allclose`` check over a low-precision dtype takes at least ``rtol``."""
    return tol.with_checks(
        tuple(
            replace(c, rtol=max(c.rtol, rtol)) if c.metric is Metric.ALLCLOSE else c
            for c in tol.checks
        )
    )


def _has_nan(values: np.ndarray[Any, Any]) -> bool:
    if values.dtype.kind not in "fcV":
        return False
    with np.errstate(invalid="ignore"):
        return bool(
            np.isnan(values.astype(np.complex128 if values.dtype.kind == "c" else np.float64)).any()
        )


def conform(
    exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any], tol: ArrayTolerance
) -> tuple[np.ndarray[Any, Any], str]:
    """``act`` as it is compared with ``exp`` (cast or reshaped where the tolerance allows it),
    or the reason it cannot be. A batch conforms its arrays with it too, so that arrays under a
    shape or dtype rule are judged together after the one transform each would get alone."""
    if exp.dtype != act.dtype:
        if tol.dtype is not DtypeRule.SAME_KIND or _kind(exp.dtype) != _kind(act.dtype):
            allows = " (dtype 'same_kind' allows another width)" if _kind(exp.dtype) else ""
            return act, (
                f"dtype {dtype_name(act.dtype)} where {dtype_name(exp.dtype)} is expected{allows}"
            )
        act = act.astype(exp.dtype)
    if exp.shape != act.shape:
        if tol.shape is not ShapeRule.SQUEEZE or _squeezed(exp.shape) != _squeezed(act.shape):
            return act, f"shape {act.shape} where {exp.shape} is expected"
        act = act.reshape(exp.shape)
    return act, ""


def _kind(dtype: np.dtype[Any]) -> str:
    """What ``same_kind`` keeps: floats, complex or integers ('' for anything else)."""
    if ulp.is_float(dtype):
        return "float"
    return {"c": "complex", "i": "integer", "u": "integer"}.get(dtype.kind, "")


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


@dataclass(frozen=True)
class Errors:
    """The element-wise errors of ``actual`` against ``expected``, their summaries, and the
    exact tests each metric judges them by.

    Floats (and complex numbers) are compared in float64 (complex128), as numpy's ``allclose``
    does, with their special values first: NaN against NaN and an infinity against the same
    infinity are no error (``matched``); any other pair holding a NaN or an infinity is an
    infinite error under every metric, whatever its bound (an infinite reference does not make
    ``atol + rtol * |e|`` infinite). Integers are compared as integers (:class:`IntegerErrors`).
    """

    diff: np.ndarray[Any, Any]  # |a - e|, float64: what reports show
    rel: np.ndarray[Any, Any]
    ulps: ulp.Steps
    matched: np.ndarray[Any, Any]
    finite: np.ndarray[Any, Any]  # both values are numbers
    scale: np.ndarray[Any, Any]  # |e| where finite, else 0

    # The values as compared (float64 or complex128; for integers, their float64 view).
    e: np.ndarray[Any, Any] = field(default_factory=lambda: _NO_VALUES)
    a: np.ndarray[Any, Any] = field(default_factory=lambda: _NO_VALUES)

    @classmethod
    def of(
        cls, exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any], *, equal_nan: bool = True
    ) -> Errors:
        """The errors of ``act`` against ``exp``; a NaN matches a NaN only with ``equal_nan``."""
        if _is_integer(exp.dtype):
            return IntegerErrors.of_integers(exp, act)
        wide = np.complex128 if np.iscomplexobj(exp) else np.float64
        e, a = exp.astype(wide), act.astype(wide)
        finite = np.isfinite(e) & np.isfinite(a)
        with np.errstate(invalid="ignore", over="ignore"):
            if finite.all():  # the usual case: no special value, no mask to apply
                diff, scale, matched = np.abs(a - e), np.abs(e), np.zeros(finite.shape, bool)
            else:
                matched = ~finite & _same_special(e, a, equal_nan=equal_nan)
                diff = np.where(finite, np.abs(a - e), np.where(matched, 0.0, np.inf))
                scale = np.where(finite, np.abs(e), 0.0)
        steps = ulp.steps(exp, act)
        if not equal_nan:
            steps = ulp.Steps(steps.count, steps.infinite | ~(finite | matched))
        return cls(diff, _relative(diff, scale), steps, matched, finite, scale, e, a)

    def rms_beyond(self, bound: float) -> bool:
        return self.rms > bound

    def rel_beyond(self, bound: float, floor: float) -> np.ndarray[Any, Any]:
        """Where ``|a - e| / max(|e|, floor) > bound``."""
        past: np.ndarray[Any, Any] = self.relative_to(floor) > bound
        return past

    def relative_to(self, floor: float) -> np.ndarray[Any, Any]:
        """``|a - e| / max(|e|, floor)`` per element (0 where equal, infinite over 0)."""
        return _relative(self.diff, np.maximum(self.scale, floor))

    def cosine_beyond(self, bound: float) -> bool:
        return self.cosine > bound

    @property
    def rms(self) -> float:
        """The root-mean-square of ``a - e`` (computed on ``|a - e|`` scaled by its largest
        value, so that squares of large errors do not overflow)."""
        if not self.diff.size:
            return 0.0
        top = float(self.diff.max())
        if top == 0.0 or not math.isfinite(top):
            return top
        scaled = self.diff.reshape(-1) / top
        return top * math.sqrt(segments.total(scaled * scaled) / scaled.size)

    @property
    def cosine(self) -> float:
        """``1 - cos(a, e)`` over the flattened arrays, in [0, 2]: infinite when a NaN or an
        infinity meets anything but its like (elements matched that way are left out), 0 when
        both are all zeros, 1 when only one is."""
        if self.all_finite:
            return _cosine(self.e.reshape(-1), self.a.reshape(-1))
        if not bool(np.all(self.finite | self.matched)):
            return math.inf
        return _cosine(self.e[self.finite], self.a[self.finite])

    def beyond(self, bound: float) -> np.ndarray[Any, Any]:
        """Where ``|a - e| > bound``."""
        past: np.ndarray[Any, Any] = self.diff > bound
        return past

    def outside(self, atol: float, rtol: float) -> np.ndarray[Any, Any]:
        """Where ``|a - e| <= atol + rtol * |e|`` does not hold (and the values are not the same
        special value)."""
        with np.errstate(invalid="ignore", over="ignore"):
            close = self.diff <= atol + rtol * self.scale
        if self.all_finite:
            return ~close
        out: np.ndarray[Any, Any] = ~((self.finite & close) | self.matched)
        return out

    def mean_beyond(self, bound: float) -> bool:
        return self.mean_abs > bound

    @functools.cached_property
    def all_finite(self) -> bool:
        return bool(self.finite.all())

    @property
    def specials(self) -> int:
        if self.all_finite:
            return 0
        return int(np.count_nonzero(~(self.finite | self.matched)))

    @property
    def max_abs(self) -> float:
        return float(self.diff.max()) if self.diff.size else 0.0

    @property
    def max_abs_finite(self) -> float:
        if self.all_finite:
            return self.max_abs
        numbers = self.diff[self.finite]
        return float(numbers.max()) if numbers.size else 0.0

    @property
    def mean_abs(self) -> float:
        with np.errstate(over="ignore"):  # a sum past float64's range is an infinite mean
            return segments.total(self.diff) / self.diff.size if self.diff.size else 0.0

    @property
    def max_rel(self) -> float:
        return float(self.rel.max()) if self.rel.size else 0.0

    @property
    def mean_rel(self) -> float:
        finite = np.isfinite(self.rel)
        count = int(np.count_nonzero(finite))
        if count:  # the sum with zeros in place of the infinite: as a batch sums it
            return segments.total(np.where(finite, self.rel, 0.0)) / count
        return self.max_rel if self.rel.size else 0.0

    @property
    def max_ulp(self) -> float:
        return float(self.ulps.as_float().max()) if self.diff.size else 0.0

    def _ranking(self, *, by_ulp: bool) -> np.ndarray[Any, Any]:
        return self.ulps.as_float() if by_ulp else self.diff

    def worst(self, *, by_ulp: bool = False) -> tuple[int, ...] | None:
        """The index of the largest error (in ULPs, or absolute)."""
        errors = self._ranking(by_ulp=by_ulp)
        if not errors.size:
            return None
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(errors)), errors.shape))


@dataclass(frozen=True)
class IntegerErrors(Errors):
    """Errors between integer arrays, decided exactly: ``count`` is ``|a - e|`` in uint64 (never
    through float64, which merges integers past 2**53) and ``magnitude`` is ``|e|``; ``diff``
    and ``rel`` are their float64 values for reports."""

    count: np.ndarray[Any, np.dtype[np.uint64]] = field(default_factory=lambda: _NO_COUNTS)
    magnitude: np.ndarray[Any, np.dtype[np.uint64]] = field(default_factory=lambda: _NO_COUNTS)
    # The values as int64/uint64, exact.
    exact: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] = field(
        default_factory=lambda: (_NO_COUNTS, _NO_COUNTS)
    )

    @classmethod
    def of_integers(cls, exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any]) -> IntegerErrors:
        count, mag = integers.difference(exp, act), integers.magnitude(exp)
        diff, scale = count.astype(np.float64), mag.astype(np.float64)
        every = np.ones(exp.shape, bool)
        steps = ulp.Steps(count, ~every)
        values = (exp.astype(np.float64), act.astype(np.float64))
        exact = (integers.as_integers(exp), integers.as_integers(act))
        return cls(
            diff, _relative(diff, scale), steps, ~every, every, scale, *values, count, mag, exact
        )

    def rms_beyond(self, bound: float) -> bool:
        """``sqrt(sum(d**2) / n) > bound``, exactly: ``sum(d**2) > bound**2 * n``."""
        squares = sum(d * d for d in self.count.tolist())
        return bool(self.count.size) and Fraction(squares) > Fraction(bound) ** 2 * self.count.size

    def rel_beyond(self, bound: float, floor: float) -> np.ndarray[Any, Any]:
        """``|a - e| > bound * max(|e|, floor)``, exactly: past both ``bound * |e|`` and
        ``bound * floor`` (``bound >= 0``: the larger denominator gives the larger threshold)."""
        past: np.ndarray[Any, Any] = ~integers.within_affine(
            self.count, self.magnitude, 0.0, bound
        ) & integers.beyond(self.count, Fraction(bound) * Fraction(floor))
        return past

    def cosine_beyond(self, bound: float) -> bool:
        """``1 - cos(a, e) > bound``, decided in exact integer arithmetic."""
        e, a = self.exact
        return not integers.cosine_within(e.tolist(), a.tolist(), bound)

    def beyond(self, bound: float) -> np.ndarray[Any, Any]:
        return integers.beyond(self.count, bound)

    def outside(self, atol: float, rtol: float) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = ~integers.within_affine(self.count, self.magnitude, atol, rtol)
        return out

    def mean_beyond(self, bound: float) -> bool:
        return integers.mean_beyond(self.count, bound)

    @property
    def mean_abs(self) -> float:
        return integers.total(self.count) / self.count.size if self.count.size else 0.0

    def _ranking(self, *, by_ulp: bool) -> np.ndarray[Any, Any]:  # noqa: ARG002
        return self.count  # one ULP per unit: both rankings are the exact distance


_NO_COUNTS: np.ndarray[Any, np.dtype[np.uint64]] = np.zeros(0, np.uint64)
_NO_VALUES: np.ndarray[Any, np.dtype[np.float64]] = np.zeros(0, np.float64)


_UNSCALED = (2.0**-400, 2.0**400)  # magnitudes whose squares' sums stay normal floats


def _cosine(e: np.ndarray[Any, Any], a: np.ndarray[Any, Any]) -> float:
    """``1 - Re<e, a> / (|e| |a|)`` in float64, each side scaled by its largest magnitude first
    (the cosine does not change; the squares cannot overflow), clipped to [0, 2]."""
    top_e = float(np.max(np.abs(e))) if e.size else 0.0
    top_a = float(np.max(np.abs(a))) if a.size else 0.0
    if top_e == 0.0 or top_a == 0.0:
        return 0.0 if top_e == top_a else 1.0
    if e.dtype.kind != "c" and all(_UNSCALED[0] < t < _UNSCALED[1] for t in (top_e, top_a)):
        # No square can overflow and the largest cannot underflow: no copies scaled.
        dot, norm_e, norm_a = (segments.total(x * y) for x, y in ((e, a), (e, e), (a, a)))
        return min(2.0, max(0.0, 1.0 - dot / (math.sqrt(norm_e) * math.sqrt(norm_a))))
    es, as_ = e / top_e, a / top_a
    dot = float(np.real(np.vdot(es, as_)))
    norms = math.sqrt(float(np.real(np.vdot(es, es)))) * math.sqrt(
        float(np.real(np.vdot(as_, as_)))
    )
    return min(2.0, max(0.0, 1.0 - dot / norms))


def _is_integer(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in "iu" or (dtype.kind == "V" and dtype.name.startswith(("int", "uint")))


def _same_special(
    e: np.ndarray[Any, Any], a: np.ndarray[Any, Any], *, equal_nan: bool = True
) -> np.ndarray[Any, Any]:
    """Where ``e`` and ``a`` are the same value, NaN counting as NaN's like only with
    ``equal_nan`` (each part of a complex number on its own: ``inf+1j`` is not ``inf+2j``)."""
    if np.iscomplexobj(e):
        same: np.ndarray[Any, Any] = _same_special(
            e.real, a.real, equal_nan=equal_nan
        ) & _same_special(e.imag, a.imag, equal_nan=equal_nan)
        return same
    out: np.ndarray[Any, Any] = e == a
    if equal_nan:
        out |= np.isnan(e) & np.isnan(a)
    return out


def _relative(diff: np.ndarray[Any, Any], scale: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``diff / scale``: 0 where there is no error, infinite where the reference is 0 (or not a
    number) and there is one."""
    with np.errstate(invalid="ignore", over="ignore"):
        rel: np.ndarray[Any, Any] = np.where(
            diff == 0,
            0.0,
            np.divide(diff, scale, out=np.full_like(diff, np.inf), where=scale != 0),
        )
    return rel


# How each metric judges the errors: "" within, else why not. One entry per Metric; a new metric
# is a new entry here over the same Errors.
Judge = Callable[[Errors, Check], str]


def _exact(_errors: Errors, _check: Check) -> str:
    return "values differ and the tolerance is 'exact'"


def _allclose(errors: Errors, check: Check) -> str:
    what = f"outside atol={check.atol:g} rtol={check.rtol:g}"
    return _count(errors.outside(check.atol, check.rtol), what)


def _mean_abs(errors: Errors, check: Check) -> str:
    if not errors.mean_beyond(check.bound):
        return ""
    return f"mean |a-b| {errors.mean_abs:.3g} above mean_abs max={check.bound:g}"


def _max_abs(errors: Errors, check: Check) -> str:
    return _count(errors.beyond(check.bound), f"more than max_abs={check.bound:g} apart")


def _ulp(errors: Errors, check: Check) -> str:
    what = f"more than {check.bound:g} ULP apart (ulp max; worst {errors.max_ulp:g})"
    return _count(errors.ulps.beyond(check.bound), what)


def _rms(errors: Errors, check: Check) -> str:
    if not errors.rms_beyond(check.bound):
        return ""
    return f"rms of a-b {errors.rms:.3g} above rms max={check.bound:g}"


def _max_rel(errors: Errors, check: Check) -> str:
    what = f"more than max_rel={check.bound:g} apart relative to max(|e|, {check.floor:g})"
    return _count(errors.rel_beyond(check.bound, check.floor), what)


def _cosine_judge(errors: Errors, check: Check) -> str:
    if not errors.cosine_beyond(check.bound):
        return ""
    return f"1 - cosine similarity {errors.cosine:.3g} above cosine max={check.bound:g}"


def _default(_errors: Errors, _check: Check) -> str:  # resolved by dtype before judging
    raise AssertionError("a 'default' check is resolved to its dtype's before it is judged")


def _count(outside: np.ndarray[Any, Any], what: str) -> str:
    count = int(np.count_nonzero(outside))
    return f"{count} of {outside.size} elements {what}" if count else ""


JUDGES: Mapping[Metric, Judge] = {
    Metric.EXACT: _exact,
    Metric.ALLCLOSE: _allclose,
    Metric.MEAN_ABS: _mean_abs,
    Metric.MAX_ABS: _max_abs,
    Metric.ULP: _ulp,
    Metric.RMS: _rms,
    Metric.MAX_REL: _max_rel,
    Metric.COSINE: _cosine_judge,
    Metric.DEFAULT: _default,
}


def _judge(errors: Errors, tol: ArrayTolerance) -> tuple[Outcome, str]:
    """Within the tolerance or drift, and why (the values already differ): one check's reason
    as it is, several checks' each named."""
    checks = tol.checks
    failing = [(c, (aggregate.judge if c.over else JUDGES[c.metric])(errors, c)) for c in checks]
    failing = [(c, reason) for c, reason in failing if reason]
    if not failing:
        return Outcome.WITHIN, ""
    if len(checks) == 1:
        return Outcome.DRIFT, failing[0][1]
    reason = "; ".join(f"check {c.describe()} fails: {why}" for c, why in failing)
    return Outcome.DRIFT, f"{len(failing)} of {len(checks)} checks fail: {reason}"


def _exact_equal(exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any]) -> bool | tuple[int, ...]:
    """True if equal element by element, else the first differing index."""
    flat_e, flat_a = exp.reshape(-1), act.reshape(-1)
    for i in range(flat_e.size):
        if flat_e[i] != flat_a[i]:
            return tuple(int(x) for x in np.unravel_index(i, exp.shape))
    return True
