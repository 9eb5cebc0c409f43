"""Array comparison: one tolerance judges, and every comparison reports the same errors."""

from __future__ import annotations

import math
import struct
from dataclasses import replace
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
from fixture_store.parity.parts import Part
from fixture_store.registry import ArrayTolerance, Metric
from fixture_store.registry.tolerance import Check, DtypeRule, ShapeRule

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


# torch.testing.assert_close's table, (rtol, atol), as "default" resolves it; any other dtype
# (integers here) is exact.
TORCH_TABLE = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def _same(e: float, a: float, equal_nan: bool = True) -> bool:
    return (equal_nan and math.isnan(e) and math.isnan(a)) or e == a


def _within_int(e: int, a: int, c: Check) -> bool:
    err = abs(a - e)
    if c.metric is Metric.ALLCLOSE:
        return bool(Fraction(err) <= Fraction(c.atol) + Fraction(c.rtol) * abs(e))
    if c.metric is Metric.MAX_REL:
        scale: Fraction = max(Fraction(abs(e)), Fraction(c.floor))
        return bool(Fraction(err) <= Fraction(c.bound) * scale)
    return bool(err <= c.bound)  # Python compares an int with a float exactly


def _within(e: Any, a: Any, c: Check, itemsize: int, equal_nan: bool) -> bool:
    """One element under an element-wise metric."""
    if isinstance(e, int):
        return _within_int(e, a, c)
    if not (math.isfinite(e) and math.isfinite(a)):
        return _same(e, a, equal_nan)
    if c.metric is Metric.ALLCLOSE:
        return bool(abs(a - e) <= c.atol + c.rtol * abs(e))
    if c.metric is Metric.ULP:
        return abs(_ordinal(a, itemsize) - _ordinal(e, itemsize)) <= c.bound
    if c.metric is Metric.MAX_REL:
        err, denominator = abs(a - e), max(abs(e), c.floor)
        return bool(err == 0 or (denominator != 0 and err / denominator <= c.bound))
    return bool(abs(a - e) <= c.bound)


def _error(e: Any, a: Any, equal_nan: bool = True) -> Any:
    if isinstance(e, int):
        return abs(int(a) - int(e))
    if not (math.isfinite(e) and math.isfinite(a)):
        return 0.0 if _same(e, a, equal_nan) else math.inf
    return abs(a - e)


def _cosine_distance(exp: list[Any], act: list[Any]) -> Fraction | None:
    """``1 - cos(a, e)`` exactly where it is rational, else ``None`` (an irrational value is
    never exactly at a rational bound; the float comparison decides it)."""
    d = sum(Fraction(e) * Fraction(a) for e, a in zip(exp, act, strict=True))
    p = sum(Fraction(e) ** 2 for e in exp) * sum(Fraction(a) ** 2 for a in act)
    if p == 0:
        return Fraction(0) if not any(exp) and not any(act) else Fraction(1)
    root = math.isqrt(p.numerator * p.denominator)
    if root * root != p.numerator * p.denominator:
        return None
    return 1 - d / (Fraction(root) / p.denominator)


def _cosine_ok(exp: list[Any], act: list[Any], bound: float, equal_nan: bool) -> bool:
    pairs = []
    for e, a in zip(exp, act, strict=True):
        if isinstance(e, float) and not (math.isfinite(e) and math.isfinite(a)):
            if not _same(e, a, equal_nan):
                return False
            continue
        pairs.append((e, a))
    es, as_ = [e for e, _ in pairs], [a for _, a in pairs]
    exact = _cosine_distance(es, as_)
    if exact is not None:
        return exact <= Fraction(bound)
    d = sum(Fraction(e) * Fraction(a) for e, a in pairs)
    p = sum(Fraction(e) ** 2 for e in es) * sum(Fraction(a) ** 2 for a in as_)
    cosine = math.sqrt(float(d * d / p)) * (1 if d >= 0 else -1)
    distance = 1 - cosine
    # Within float64 rounding of the bound the definition and the float computation may part.
    assume(not math.isclose(distance, bound, rel_tol=1e-9, abs_tol=1e-12))
    return distance <= bound


def _check_ok(exp: list[Any], act: list[Any], c: Check, itemsize: int, nan: bool) -> bool:
    pairs = list(zip(exp, act, strict=True))
    if c.metric is Metric.DEFAULT:
        row = TORCH_TABLE.get(f"float{8 * itemsize}") if isinstance(exp[0], float) else None
        c = Check(Metric.EXACT) if row is None else Check(atol=row[1], rtol=row[0])
    if c.metric is Metric.EXACT:
        return all(
            struct.pack(f"<{_PACK[itemsize]}", e) == struct.pack(f"<{_PACK[itemsize]}", a)
            and (nan or not math.isnan(e))
            if isinstance(e, float)
            else e == a
            for e, a in pairs
        )
    if c.metric is Metric.COSINE:
        return _cosine_ok(exp, act, c.bound, nan)
    if c.metric in (Metric.MEAN_ABS, Metric.RMS):
        return _aggregate_ok(exp, [_error(e, a, nan) for e, a in pairs], c)
    return all(_within(e, a, c, itemsize, nan) for e, a in pairs)


def _aggregate_ok(exp: list[Any], errors: list[Any], c: Check) -> bool:
    """mean_abs and rms, over every element's error."""
    if c.metric is Metric.MEAN_ABS:
        if isinstance(exp[0], int):
            return Fraction(sum(errors)) <= Fraction(c.bound) * len(errors)
        mean = sum(errors) / len(errors)
        # numpy sums pairwise and Python left to right: at the bound itself they may round apart.
        assume(not math.isclose(mean, c.bound, rel_tol=1e-12))
        return bool(mean <= c.bound)
    if math.inf in errors:  # rms
        return False
    squares = sum(Fraction(err) ** 2 for err in errors) / len(errors)
    if not isinstance(exp[0], int):
        rms = math.sqrt(float(squares)) if squares < 2**1000 else math.inf
        assume(not math.isclose(rms, c.bound, rel_tol=1e-9))
    return squares <= Fraction(c.bound) ** 2


def _reference_ok(exp: list[Any], act: list[Any], tol: ArrayTolerance, itemsize: int) -> bool:
    """Every check of ``tol`` holds, each by its definition."""
    if isinstance(exp[0], bool):  # booleans are equal or not, under every metric
        return exp == act
    return all(_check_ok(exp, act, c, itemsize, tol.equal_nan) for c in tol.checks)


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


_BOUNDS = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 1e-3, 2.0**53, 2.0**63, 1e300]),
    st.floats(0, 1e20, allow_nan=False),
)


def _checks() -> st.SearchStrategy[Check]:
    return st.builds(
        Check,
        st.sampled_from(list(Metric)),
        atol=_BOUNDS,
        rtol=_BOUNDS,
        bound=_BOUNDS,
        floor=_BOUNDS,
    )


def _tolerances() -> st.SearchStrategy[ArrayTolerance]:
    return st.builds(
        lambda checks, nan: ArrayTolerance.of_checks(tuple(checks), equal_nan=nan),
        st.lists(_checks(), min_size=1, max_size=3),
        st.booleans(),
    )


@given(data=st.data())
@settings(max_examples=600, deadline=None)
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
    want = _reference_ok(e.tolist(), a.tolist(), tol, dtype.itemsize)
    result = compare_arrays("x", e, a, tol)
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


# -- rms, max_rel, cosine, equal_nan, default: each semantic for every metric ---------------------

NEW = (
    ArrayTolerance(Metric.RMS, bound=1e300),
    ArrayTolerance(Metric.MAX_REL, bound=1e300, floor=1.0),
    ArrayTolerance(Metric.COSINE, bound=2.0),
)


def test_rms_catches_what_mean_abs_lets_through() -> None:
    exp = np.zeros(100, np.float32)
    act = exp.copy()
    act[7] = 0.1  # mean |a - e| 0.001, rms 0.01
    assert compare_arrays("x", exp, act, ArrayTolerance(Metric.MEAN_ABS, bound=5e-3)).ok
    result = compare_arrays("x", exp, act, ArrayTolerance(Metric.RMS, bound=5e-3))
    assert not result.ok and "rms of a-b 0.01 above rms max=0.005" in result.reason
    assert result.rms == pytest.approx(0.01, rel=1e-6)
    assert compare_arrays("x", exp, act, ArrayTolerance(Metric.RMS, bound=0.011)).ok


def test_max_rel_divides_by_the_floor_near_zero() -> None:
    exp = np.array([100.0, 1e-9, 0.0])
    act = np.array([101.0, 2e-9, 1e-7])
    no_floor = compare_arrays("x", exp, act, ArrayTolerance(Metric.MAX_REL, bound=0.02))
    assert not no_floor.ok and "2 of 3 elements more than max_rel=0.02" in no_floor.reason
    floored = ArrayTolerance(Metric.MAX_REL, bound=0.02, floor=1e-5)
    assert compare_arrays("x", exp, act, floored).ok
    assert not compare_arrays("x", exp, act * 1.05, floored).ok


def test_cosine_is_one_minus_cosine_similarity() -> None:
    exp = np.array([1.0, 2.0, 3.0], np.float32)
    tol = ArrayTolerance(Metric.COSINE, bound=1e-6)
    assert compare_arrays("x", exp, exp * 2, tol).ok  # parallel: distance 0
    result = compare_arrays("x", exp, np.array([3.0, 2.0, 1.0], np.float32), tol)
    assert not result.ok and result.cosine == pytest.approx(1 - 10 / 14)
    zeros = np.zeros(3, np.float32)
    assert compare_arrays("x", zeros, zeros + 0.0, tol).ok
    assert compare_arrays("x", zeros, exp, tol).cosine == 1.0
    # Large values do not overflow the squares.
    big = np.array([1e300, -1e300])
    assert compare_arrays("x", big, big * (1 + 1e-15), tol).ok


@pytest.mark.parametrize("value", [0.0, -np.inf, 3e38, np.nan])
@pytest.mark.parametrize("tol", NEW, ids=lambda t: t.metric.value)
def test_an_infinity_matches_only_the_same_infinity_under_new_metrics(
    value: float, tol: ArrayTolerance
) -> None:
    exp = np.array([np.inf, 1.0], np.float32)
    assert compare_arrays("x", exp, exp.copy(), tol).ok
    result = compare_arrays("x", exp, np.array([value, 1.0], np.float32), tol)
    assert not result.ok
    assert compare_arrays("x", exp, np.array([np.inf, 2.0], np.float32), tol).rms == 0.5**0.5


@pytest.mark.parametrize("metric", [m for m in Metric if m is not Metric.DEFAULT])
def test_nan_equals_nothing_unless_equal_nan(metric: Metric) -> None:
    exp = np.array([np.nan, 1.0], np.float64)
    act = np.array([np.nan, 1.0], np.float64)
    loose = ArrayTolerance(metric, atol=1e300, bound=1e300, floor=1.0)
    if metric is Metric.COSINE:
        loose = ArrayTolerance(metric, bound=2.0)
    assert compare_arrays("x", exp, act, loose).ok  # equal_nan defaults to true
    strict = compare_arrays("x", exp, act, replace(loose, equal_nan=False))
    assert not strict.ok, metric
    assert not compare_arrays("x", exp, np.array([1.0, 1.0]), loose).ok


@pytest.mark.parametrize(
    "tol",
    [
        ArrayTolerance(Metric.RMS, bound=0.5),
        ArrayTolerance(Metric.MAX_REL, bound=2.0**-60),
        ArrayTolerance(Metric.COSINE, bound=0.0),
    ],
    ids=lambda t: t.metric.value,
)
def test_integers_are_compared_as_integers_under_new_metrics(tol: ArrayTolerance) -> None:
    exp = np.array([2**53, 3], np.int64)
    act = np.array([2**53 + 1, 3], np.int64)  # one value in float64
    assert not compare_arrays("x", exp, act, tol).ok
    assert compare_arrays("x", exp, exp.copy(), tol).ok


def test_integer_rms_and_max_rel_are_decided_exactly() -> None:
    exp = np.array([0, 0, 0, 0], np.uint64)
    act = np.array([2, 0, 0, 0], np.uint64)  # rms exactly 1
    assert compare_arrays("x", exp, act, ArrayTolerance(Metric.RMS, bound=1.0)).ok
    assert not compare_arrays("x", exp, act, ArrayTolerance(Metric.RMS, bound=0.999)).ok
    floored = ArrayTolerance(Metric.MAX_REL, bound=0.5, floor=4.0)  # |2| <= 0.5 * 4
    assert compare_arrays("x", exp, act, floored).ok
    assert not compare_arrays("x", exp, act, replace(floored, floor=3.9)).ok


@pytest.mark.parametrize("metric", list(Metric))
def test_booleans_are_equal_or_not_under_every_metric(metric: Metric) -> None:
    exp = np.array([True, False])
    tol = ArrayTolerance(metric, atol=1e300, bound=1e300)
    assert compare_arrays("x", exp, exp.copy(), tol).ok
    assert not compare_arrays("x", exp, ~exp, tol).ok


@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [
        ("float16", 1e-3, 1e-5),
        ("bfloat16", 1.6e-2, 1e-5),
        ("float32", 1.3e-6, 1e-5),
        ("float64", 1e-7, 1e-7),
        ("complex64", 1.3e-6, 1e-5),
        ("float8_e4m3fn", 0.125, 0.0),
    ],
)
def test_default_takes_the_dtype_row_of_torch_table(dtype: str, rtol: float, atol: float) -> None:
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    exp = np.array([1.0, 4.0]).astype(dt)
    result = compare_arrays("x", exp, exp.copy() * 2, ArrayTolerance(Metric.DEFAULT))
    assert result.tolerance is not None and result.tolerance.metric is Metric.ALLCLOSE
    assert result.tolerance.atol == atol
    # The low-precision floor of allclose still applies (bfloat16 1e-2, float8 0.1).
    assert result.tolerance.rtol == max(rtol, {"bfloat16": 1e-2}.get(dtype, rtol))
    assert not result.ok


def test_default_is_exact_for_integers() -> None:
    exp = np.array([1, 2], np.int32)
    result = compare_arrays("x", exp, exp + 1, ArrayTolerance(Metric.DEFAULT))
    assert result.tolerance is not None and result.tolerance.metric is Metric.EXACT
    assert not result.ok


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_small_floats_are_judged_in_float64_under_new_metrics(dtype: Any) -> None:
    exp = np.array([1.0, 2.0, 4.0]).astype(dtype)
    act = np.array([1.0, 2.0, 4.5]).astype(dtype)
    rms = compare_arrays("x", exp, act, ArrayTolerance(Metric.RMS, bound=0.3))
    assert rms.ok and rms.rms == pytest.approx(0.5 / 3**0.5)
    assert not compare_arrays("x", exp, act, ArrayTolerance(Metric.MAX_REL, bound=0.1)).ok


def test_every_comparison_reports_every_metric_in_its_run_part() -> None:
    exp = np.array([1.0, 2.0, 3.0])
    result = compare_arrays("x", exp, exp + 0.5, ArrayTolerance(Metric.MAX_ABS, bound=1))
    run = result.to_json(Part.RUN)
    assert run["rms"] == 0.5 and run["cosine"] > 0 and run["max_rel"] == 0.5
    assert "rms" not in result.to_json(Part.TRACKED)
    assert "cosine" not in result.to_json(Part.TRACKED)


def test_several_checks_must_all_hold_and_each_failure_is_named() -> None:
    exp = np.zeros(100)
    act = exp.copy()
    act[3] = 0.01
    tol = ArrayTolerance.of_checks(
        (Check(Metric.RMS, bound=1e-5), Check(Metric.MAX_ABS, bound=1e-3)), why="upstream's rule"
    )
    result = compare_arrays("x", exp, act, tol)
    assert not result.ok
    assert result.reason.startswith("2 of 2 checks fail: check rms <= 1e-05 fails: rms of a-b")
    assert "check max_abs <= 0.001 fails: 1 of 100 elements" in result.reason
    assert result.reason.endswith("(why this rule: upstream's rule)")
    act[3] = 2e-4  # rms 2e-5
    one = compare_arrays("x", exp, act, tol)
    assert "1 of 2 checks fail: check rms <= 1e-05" in one.reason and "max_abs" not in one.reason
    assert compare_arrays("x", exp, exp + 1e-6, tol).ok
