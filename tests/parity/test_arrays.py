"""Array comparison: one tolerance judges, and every comparison reports the same errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

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
