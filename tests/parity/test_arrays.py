"""Array comparison: one tolerance judges, and every comparison reports the same errors."""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixture_store.numerics.arrays import JUDGES
from fixture_store.parity.arrays import Outcome, compare_arrays
from fixture_store.registry import ArrayTolerance, Metric
from fixture_store.registry.tolerance import DtypeRule, ShapeRule

ONE_ULP = np.float32(np.nextafter(np.float32(1), np.float32(2)) - np.float32(1))


def _ref() -> np.ndarray:
    return np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)


def test_identical_bytes_are_bit_identical_under_any_metric() -> None:
    for metric in Metric:
        result = compare_arrays("x", _ref(), _ref(), ArrayTolerance(metric, bound=0))
        assert result.outcome is Outcome.IDENTICAL
        assert (result.max_abs, result.max_ulp) == (0, 0)


def test_every_comparison_reports_abs_rel_and_ulp_errors() -> None:
    exp = _ref()
    act = exp.copy()
    act[2, 1] = np.nextafter(np.nextafter(exp[2, 1], np.float32(9)), np.float32(9))
    result = compare_arrays("x", exp, act)
    assert result.outcome is Outcome.WITHIN
    assert result.max_ulp == 2
    assert result.worst_index == (2, 1)
    assert result.max_abs == pytest.approx(float(act[2, 1] - exp[2, 1]))
    assert result.mean_abs == pytest.approx(result.max_abs / 12)
    assert result.max_rel == pytest.approx(result.max_abs / float(exp[2, 1]))
    assert result.to_json()["max_ulp"] == 2


def test_mean_abs_judges_the_mean_not_the_worst_element() -> None:
    exp = np.zeros(1000, np.float32)
    act = exp.copy()
    act[7] = 0.4  # one large outlier: mean 4e-4
    tol = ArrayTolerance(Metric.MEAN_ABS, bound=5e-4)
    assert compare_arrays("x", exp, act, tol).outcome is Outcome.WITHIN
    act[8] = 0.2  # mean 6e-4
    result = compare_arrays("x", exp, act, tol)
    assert result.outcome is Outcome.DRIFT
    assert result.reason == "mean |a-b| 0.0006 above mean_abs max=0.0005"
    assert result.worst_index == (7,)


def test_max_abs_judges_every_element() -> None:
    exp = _ref()
    tol = ArrayTolerance(Metric.MAX_ABS, bound=1e-3)
    assert compare_arrays("x", exp, exp + np.float32(9e-4), tol).outcome is Outcome.WITHIN
    act = exp.copy()
    act[1, 1] += np.float32(2e-3)
    result = compare_arrays("x", exp, act, tol)
    assert result.outcome is Outcome.DRIFT
    assert result.reason == "1 of 12 elements more than max_abs=0.001 apart"


def test_ulp_judges_in_units_of_the_dtype() -> None:
    exp = _ref()
    act = np.nextafter(np.nextafter(exp, np.float32(9)), np.float32(9))
    assert compare_arrays("x", exp, act, ArrayTolerance(Metric.ULP, bound=2)).ok
    result = compare_arrays("x", exp, act, ArrayTolerance(Metric.ULP, bound=1))
    assert result.outcome is Outcome.DRIFT
    assert "12 of 12 elements more than 1 ULP apart" in result.reason
    # The worst element is the one furthest in ULPs: the smallest value, not the largest diff.
    tiny = np.array([1e-30, 1.0], np.float32)
    off = np.array([1.1e-30, 1.0 + 2 * ONE_ULP], np.float32)
    by_ulp = compare_arrays("x", tiny, off, ArrayTolerance(Metric.ULP, bound=1))
    assert by_ulp.max_ulp > 1e5
    assert by_ulp.worst_index == (0,)


def test_ulp_in_bfloat16_counts_its_own_steps() -> None:
    exp = np.array([1.0, 2.0, 3.0], ml_dtypes.bfloat16)
    act = (exp.view(np.uint16) + np.uint16(3)).view(ml_dtypes.bfloat16)
    result = compare_arrays("x", exp, act, ArrayTolerance(Metric.ULP, bound=3))
    assert result.outcome is Outcome.WITHIN and result.max_ulp == 3


def test_a_nan_where_a_number_is_expected_is_drift_under_every_bound() -> None:
    exp, act = _ref(), _ref()
    act[0, 0] = np.nan
    for metric in (Metric.MEAN_ABS, Metric.MAX_ABS, Metric.ULP):
        result = compare_arrays("x", exp, act, ArrayTolerance(metric, bound=1e6))
        assert result.outcome is Outcome.DRIFT, metric
        assert result.max_ulp == np.inf
    both = compare_arrays("x", np.array([np.nan, 1]), np.array([np.nan, 1 + 1e-16]))
    assert both.ok and both.max_ulp == 0


def test_dtype_and_shape_are_exact_unless_the_tolerance_allows_otherwise() -> None:
    exp = _ref()
    wide = exp.astype(np.float64)
    result = compare_arrays("x", exp, wide)
    assert result.outcome is Outcome.DRIFT
    assert result.reason.startswith("dtype float64 where float32 is expected")
    same_kind = ArrayTolerance(dtype=DtypeRule.SAME_KIND)
    assert compare_arrays("x", exp, wide, same_kind).outcome is Outcome.IDENTICAL
    ints = compare_arrays("x", exp, exp.astype(np.int32), same_kind)
    assert ints.reason.startswith("dtype int32 where float32 is expected")
    batched = exp[None]
    assert compare_arrays("x", exp, batched).reason == "shape (1, 3, 4) where (3, 4) is expected"
    squeeze = ArrayTolerance(shape=ShapeRule.SQUEEZE)
    assert compare_arrays("x", exp, batched, squeeze).outcome is Outcome.IDENTICAL
    assert not compare_arrays("x", exp, exp.reshape(4, 3), squeeze).ok


def test_exact_is_drift_on_one_ulp() -> None:
    exp = _ref()
    up = np.nextafter(exp, np.float32(9))
    result = compare_arrays("x", exp, up, ArrayTolerance(Metric.EXACT))
    assert result.outcome is Outcome.DRIFT and result.max_ulp == 1


# -- the arithmetic against a reference written from the definitions ----------------------------
#
# What each metric means, element by element, in pure Python over lists: floats in Python's own
# float (IEEE float64, as the comparison computes), integers as Python ints (exact), and ULPs on
# each float's bit pattern. A NaN or an infinity is no error against its like and an infinite
# one against anything else; booleans are equal or not.

FLOATS = [np.float16, np.float32, np.float64]
INTEGERS = [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64]
_PACK = {2: "e", 4: "f", 8: "d"}


_SIGNED = {2: "h", 4: "i", 8: "q"}


def _ordinal(x: float, itemsize: int) -> int:
    """The float's place in the ordered values of its width: sign and magnitude of its bits."""
    bits = int(struct.unpack(f"<{_SIGNED[itemsize]}", struct.pack(f"<{_PACK[itemsize]}", x))[0])
    magnitude = bits & ((1 << (8 * itemsize - 1)) - 1)
    return -magnitude if bits < 0 else magnitude


def _same(e: float, a: float) -> bool:
    return (math.isnan(e) and math.isnan(a)) or e == a


def _within(e: Any, a: Any, tol: ArrayTolerance, itemsize: int) -> bool:
    """One element under an element-wise metric."""
    if isinstance(e, int):
        err = abs(a - e)
        if tol.metric is Metric.ALLCLOSE:
            return bool(Fraction(err) <= Fraction(tol.atol) + Fraction(tol.rtol) * abs(e))
        return bool(err <= tol.bound)  # Python compares an int with a float exactly
    if not (math.isfinite(e) and math.isfinite(a)):
        return _same(e, a)
    if tol.metric is Metric.ALLCLOSE:
        return bool(abs(a - e) <= tol.atol + tol.rtol * abs(e))
    if tol.metric is Metric.ULP:
        return abs(_ordinal(a, itemsize) - _ordinal(e, itemsize)) <= tol.bound
    return bool(abs(a - e) <= tol.bound)


def _error(e: Any, a: Any) -> Any:
    if isinstance(e, int):
        return abs(int(a) - int(e))
    if not (math.isfinite(e) and math.isfinite(a)):
        return 0.0 if _same(e, a) else math.inf
    return abs(a - e)


def _reference_ok(exp: list[Any], act: list[Any], tol: ArrayTolerance, itemsize: int) -> bool:
    if isinstance(exp[0], bool):  # booleans are equal or not, under every metric
        return exp == act
    if tol.metric is Metric.EXACT:
        return all(
            struct.pack(f"<{_PACK[itemsize]}", e) == struct.pack(f"<{_PACK[itemsize]}", a)
            if isinstance(e, float)
            else e == a
            for e, a in zip(exp, act, strict=True)
        )
    if tol.metric is Metric.MEAN_ABS:
        errors = [_error(e, a) for e, a in zip(exp, act, strict=True)]
        if isinstance(exp[0], int):
            return Fraction(sum(errors)) <= Fraction(tol.bound) * len(errors)
        return bool(sum(errors) / len(errors) <= tol.bound)
    return all(_within(e, a, tol, itemsize) for e, a in zip(exp, act, strict=True))


def _values(dtype: Any) -> st.SearchStrategy[Any]:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
        ints = [lo, hi, lo + 1, hi - 1, 0, 1, 2**53, 2**53 + 1, -(2**53)]
        return st.one_of(st.integers(lo, hi), st.sampled_from([v for v in ints if lo <= v <= hi]))
    big = float(np.finfo(dt).max)
    edges = [math.inf, -math.inf, math.nan, big, -big, 0.0, -0.0, 1.0]
    return st.one_of(
        hnp.from_dtype(dt, allow_nan=True, allow_infinity=True).map(float),
        st.sampled_from(edges),
    )


def _tolerances() -> st.SearchStrategy[ArrayTolerance]:
    bounds = st.one_of(
        st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e-3, 2.0**53, 2.0**63, 1e300]),
        st.floats(0, 1e20, allow_nan=False),
    )
    return st.builds(
        ArrayTolerance, st.sampled_from(list(Metric)), atol=bounds, rtol=bounds, bound=bounds
    )


@given(data=st.data())
@settings(max_examples=400, deadline=None)
def test_every_metric_agrees_with_its_definition(data: st.DataObject) -> None:
    dtype = np.dtype(data.draw(st.sampled_from([*FLOATS, *INTEGERS, np.bool_]), label="dtype"))
    n = data.draw(st.integers(1, 5), label="n")
    exp = data.draw(st.lists(_values(dtype), min_size=n, max_size=n), label="expected")
    # The actual values: independent, or the expected ones with a few replaced.
    act = list(exp)
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=n), label="replaced"):
        act[i] = data.draw(_values(dtype))
    tol = data.draw(_tolerances(), label="tolerance")
    e, a = np.array(exp, dtype), np.array(act, dtype)
    result = compare_arrays("x", e, a, tol)
    want = _reference_ok(e.tolist(), a.tolist(), tol, dtype.itemsize)
    if tol.metric is Metric.MEAN_ABS and dtype.kind == "f":
        mean = sum(_error(x, y) for x, y in zip(e.tolist(), a.tolist(), strict=True)) / n
        # numpy sums pairwise and Python left to right: at the bound itself they may round apart.
        assume(not math.isclose(mean, tol.bound, rel_tol=1e-12))
    assert result.ok == want, (result.reason, exp, act)
    if dtype.kind in "iu":
        errors = [_error(x, y) for x, y in zip(e.tolist(), a.tolist(), strict=True)]
        assert result.max_abs == float(max(errors))
        assert (result.mean_abs == sum(errors) / n) or result.outcome is Outcome.IDENTICAL


@pytest.mark.parametrize("value", [0.0, -np.inf, 3e38, np.nan, np.finfo(np.float32).max])
def test_an_infinite_reference_accepts_only_the_same_infinity(value: float) -> None:
    exp = np.array([np.inf, 1.0], np.float32)
    act = np.array([value, 1.0], np.float32)
    for tol in (
        ArrayTolerance(),
        ArrayTolerance(atol=1e30, rtol=1e30),
        ArrayTolerance(Metric.MAX_ABS, bound=1e300),
        ArrayTolerance(Metric.MEAN_ABS, bound=1e300),
        ArrayTolerance(Metric.ULP, bound=1e300),
    ):
        result = compare_arrays("x", exp, act, tol)
        assert result.outcome is Outcome.DRIFT, tol
        assert result.max_abs == np.inf and result.specials == 1


@pytest.mark.parametrize(
    ("dtype", "big"), [(np.int64, 2**53), (np.int64, 2**63 - 2), (np.uint64, 2**64 - 2)]
)
def test_integers_are_compared_as_integers(dtype: Any, big: int) -> None:
    exp, act = np.array([big], dtype), np.array([big + 1], dtype)
    for metric in (Metric.MAX_ABS, Metric.ULP):
        result = compare_arrays("x", exp, act, ArrayTolerance(metric, bound=0))
        assert result.outcome is Outcome.DRIFT and result.max_abs == 1
        assert compare_arrays("x", exp, act, ArrayTolerance(metric, bound=1)).ok
    assert not compare_arrays("x", exp, act, ArrayTolerance(Metric.MEAN_ABS, bound=0.5)).ok
    assert not compare_arrays("x", exp, act, ArrayTolerance(atol=0.5, rtol=0)).ok


def test_integer_bounds_are_decided_exactly_where_float64_would_round() -> None:
    # float64 rounds the distance 2**53 + 1 to 2**53: only exact arithmetic tells it is past.
    exp, act = np.array([0], np.int64), np.array([2**53 + 1], np.int64)
    assert not compare_arrays("x", exp, act, ArrayTolerance(atol=2.0**53, rtol=0)).ok
    assert compare_arrays("x", exp, act, ArrayTolerance(atol=2.0**53 + 2, rtol=0)).ok
    assert not compare_arrays("x", exp, act, ArrayTolerance(Metric.MEAN_ABS, bound=2.0**53)).ok
    # A relative bound at an exact tie: |a - e| == rtol * |e| holds, one more does not.
    big = np.array([2**60], np.int64)
    tie = ArrayTolerance(atol=0, rtol=0.5)
    assert compare_arrays("x", big, big + 2**59, tie).ok
    assert not compare_arrays("x", big, big + 2**59 + 1, tie).ok


def test_int64_extremes_do_not_overflow() -> None:
    info = np.iinfo(np.int64)
    exp, act = np.array([info.min, info.max]), np.array([info.max, info.min])
    result = compare_arrays("x", exp, act, ArrayTolerance(Metric.MAX_ABS, bound=2.0**64))
    assert result.ok and result.max_abs == 2.0**64 - 1
    assert not compare_arrays("x", exp, act, ArrayTolerance(Metric.MAX_ABS, bound=2.0**63)).ok


def test_every_metric_has_a_judge() -> None:
    assert set(JUDGES) == set(Metric)
