"""Tolerance-aware comparison of arrays: bit-identical, within tolerance, or drift.

Used by the comparators (a runtime's outputs vs a case's expected outputs), by regeneration (a
candidate fixture vs the registered one) and by the parity assertion (a maintainer's outputs vs
the verified reference).
Shapes and dtypes must match exactly unless the tolerance allows otherwise (``dtype: same_kind``,
``shape: squeeze``): a float64 output where float32 is expected is drift however close the values
are. Every comparison reports max/mean absolute and relative errors and the max ULP distance
(:mod:`fixture_store.parity.ulp`), whatever metric judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from fixture_store.parity import parts, ulp
from fixture_store.registry.tolerance import ArrayTolerance, DtypeRule, Metric, ShapeRule

# Low-precision float types are compared in float32 with a relative tolerance widened to their
# precision (bfloat16 has 8 bits of mantissa: one ulp is 2**-7 relative).
WIDENED_RTOL = {"bfloat16": 1e-2}
_LOW_PRECISION_KINDS = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")


class Outcome(StrEnum):
    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"


@dataclass(frozen=True)
class ArrayComparison:
    """How one actual array compares with the expected one.

    Its errors, worst index and reason are run numbers (:mod:`fixture_store.parity.parts`):
    they depend on the machine's kernels even where every machine is within the tolerance.
    """

    name: str = field(metadata=parts.KEY)
    outcome: Outcome
    max_abs: float = field(default=0.0, metadata=parts.RUN)
    mean_abs: float = field(default=0.0, metadata=parts.RUN)
    max_rel: float = field(default=0.0, metadata=parts.RUN)
    mean_rel: float = field(default=0.0, metadata=parts.RUN)
    worst_index: tuple[int, ...] | None = field(default=None, metadata=parts.RUN)
    reason: str = field(default="", metadata=parts.RUN)
    tolerance: ArrayTolerance | None = None
    max_ulp: float = field(default=0.0, metadata=parts.RUN)
    # False when nothing was measured: a dtype or shape mismatch, strings or objects.
    measured: bool = True

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.DRIFT

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        return parts.fields_json(self, part, skip=("measured",))


def dtype_name(dtype: np.dtype[Any]) -> str:
    return str(dtype.name if hasattr(dtype, "name") else dtype)


def _is_low_precision(dtype: np.dtype[Any]) -> bool:
    name = dtype_name(dtype)
    return any(name.startswith(k) for k in _LOW_PRECISION_KINDS)


def compare_arrays(
    name: str, expected: Any, actual: Any, tolerance: ArrayTolerance | None = None
) -> ArrayComparison:
    """Compare ``actual`` with ``expected`` under ``tolerance`` (default: the ONNX runner's)."""
    tol = tolerance or ArrayTolerance()
    exp = np.asarray(expected)
    act, problem = _conform(exp, np.asarray(actual), tol)
    if problem:
        return ArrayComparison(name, Outcome.DRIFT, reason=problem, tolerance=tol, measured=False)
    low_precision = _is_low_precision(exp.dtype)
    exact_only = exp.dtype.kind in "OUSb" or (exp.dtype.kind == "V" and not low_precision)
    if not exact_only and np.ascontiguousarray(exp).tobytes() == (
        np.ascontiguousarray(act).tobytes()
    ):
        return ArrayComparison(name, Outcome.IDENTICAL, tolerance=tol)
    if exact_only:
        equal = _exact_equal(exp, act)
        if equal is True:
            return ArrayComparison(name, Outcome.IDENTICAL, tolerance=tol)
        return ArrayComparison(
            name,
            Outcome.DRIFT,
            worst_index=equal or None,
            reason="values differ (compared exactly: strings, objects and booleans)",
            tolerance=tol,
            measured=False,
        )
    if low_precision and tol.metric is Metric.ALLCLOSE:
        tol = replace(tol, rtol=max(tol.rtol, WIDENED_RTOL.get(dtype_name(exp.dtype), 1e-1)))
    errors = Errors.of(exp, act)
    outcome, reason = _judge(errors, tol)
    return ArrayComparison(
        name,
        outcome,
        errors.max_abs,
        errors.mean_abs,
        errors.max_rel,
        errors.mean_rel,
        errors.worst(by_ulp=tol.metric is Metric.ULP),
        reason,
        tol,
        errors.max_ulp,
    )


def _conform(
    exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any], tol: ArrayTolerance
) -> tuple[np.ndarray[Any, Any], str]:
    """``act`` as it is compared with ``exp`` (cast or reshaped where the tolerance allows it),
    or the reason it cannot be."""
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
    """The element-wise errors of ``actual`` against ``expected`` and their summaries.

    NaN against NaN and an infinity against the same one are no error (``matched``); any other
    NaN or infinity is an infinite one.
    """

    diff: np.ndarray[Any, Any]
    scale: np.ndarray[Any, Any]
    rel: np.ndarray[Any, Any]
    ulps: np.ndarray[Any, Any]
    matched: np.ndarray[Any, Any]

    @classmethod
    def of(cls, exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any]) -> Errors:
        wide = np.complex128 if np.iscomplexobj(exp) else np.float64
        e, a = exp.astype(wide), act.astype(wide)
        matched = (np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (e == a))
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(matched, 0.0, np.abs(a - e))
            diff = np.where(np.isnan(diff), np.inf, diff)
            scale = np.abs(e)
            rel = np.where(
                diff == 0,
                0.0,
                np.divide(diff, scale, out=np.full_like(diff, np.inf), where=scale != 0),
            )
        return cls(diff, scale, rel, ulp.distance(exp, act), matched)

    @property
    def max_abs(self) -> float:
        return float(self.diff.max()) if self.diff.size else 0.0

    @property
    def mean_abs(self) -> float:
        return float(self.diff.mean()) if self.diff.size else 0.0

    @property
    def max_rel(self) -> float:
        return float(self.rel.max()) if self.rel.size else 0.0

    @property
    def mean_rel(self) -> float:
        finite = self.rel[np.isfinite(self.rel)]
        return float(finite.mean()) if finite.size else (self.max_rel if self.rel.size else 0.0)

    @property
    def max_ulp(self) -> float:
        return float(self.ulps.max()) if self.ulps.size else 0.0

    def worst(self, *, by_ulp: bool = False) -> tuple[int, ...] | None:
        """The index of the largest error (in ULPs, or absolute)."""
        errors = self.ulps if by_ulp else self.diff
        if not errors.size:
            return None
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(errors)), errors.shape))


def _judge(errors: Errors, tol: ArrayTolerance) -> tuple[Outcome, str]:
    """Within the tolerance or drift, and why (the values already differ)."""
    size = errors.diff.size
    if tol.metric is Metric.EXACT:
        return Outcome.DRIFT, "values differ and the tolerance is 'exact'"
    if tol.metric is Metric.MEAN_ABS:
        if errors.mean_abs <= tol.bound:
            return Outcome.WITHIN, ""
        return Outcome.DRIFT, f"mean |a-b| {errors.mean_abs:.3g} above mean_abs max={tol.bound:g}"
    if tol.metric is Metric.ALLCLOSE:
        with np.errstate(invalid="ignore", over="ignore"):
            outside = ~((errors.diff <= tol.atol + tol.rtol * errors.scale) | errors.matched)
        what = f"outside atol={tol.atol:g} rtol={tol.rtol:g}"
    elif tol.metric is Metric.MAX_ABS:
        outside = errors.diff > tol.bound
        what = f"more than max_abs={tol.bound:g} apart"
    else:
        outside = errors.ulps > tol.bound
        what = f"more than {tol.bound:g} ULP apart (ulp max; worst {errors.max_ulp:g})"
    count = int(np.count_nonzero(outside))
    if not count:
        return Outcome.WITHIN, ""
    return Outcome.DRIFT, f"{count} of {size} elements {what}"


def _exact_equal(exp: np.ndarray[Any, Any], act: np.ndarray[Any, Any]) -> bool | tuple[int, ...]:
    """True if equal element by element, else the first differing index."""
    flat_e, flat_a = exp.reshape(-1), act.reshape(-1)
    for i in range(flat_e.size):
        if flat_e[i] != flat_a[i]:
            return tuple(int(x) for x in np.unravel_index(i, exp.shape))
    return True
