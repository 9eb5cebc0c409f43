"""A known mismatch's error against its entry's bounds: values between numbers, special values
counted apart."""

from __future__ import annotations

import numpy as np

from fixture_store.parity.arrays import compare_arrays
from fixture_store.parity.results import KnownError
from fixture_store.registry.known_failures import KnownFailure


def _masked_scores() -> tuple[np.ndarray, np.ndarray]:
    """A causal mask as the spec writes it (-inf) and as a runtime may (float32's lowest)."""
    expected = np.array([[0.5, -np.inf, -np.inf], [0.25, 0.75, -np.inf]], np.float32)
    actual = np.where(np.isinf(expected), np.finfo(np.float32).min, expected + 1e-7)
    return expected, actual.astype(np.float32)


def test_an_unmatched_infinity_is_excused_only_by_a_count_of_special_values() -> None:
    comparison = compare_arrays("scores", *_masked_scores())
    assert not comparison.ok and comparison.max_abs == np.inf
    assert comparison.specials == 3 and 0 < comparison.max_abs_finite < 1e-6

    unbounded = KnownFailure("ort", "fam/x", "mask", "mismatch", max_abs=1e-6)
    error = KnownError.of([comparison], unbounded)
    assert error.max_abs == comparison.max_abs_finite  # the error between numbers
    assert error.exceeded() == [("special_values", 3, 0)]  # no finite max_abs excuses them

    counted = KnownFailure("ort", "fam/x", "mask", "mismatch", max_abs=1e-6, special_values=3)
    assert KnownError.of([comparison], counted).exceeded() == []
    fewer = KnownFailure("ort", "fam/x", "mask", "mismatch", max_abs=1e-6, special_values=2)
    assert KnownError.of([comparison], fewer).exceeded() == [("special_values", 3, 2)]
    assert KnownError.of([comparison], counted).to_json()["special_values_bound"] == 3


def test_a_nan_where_a_number_is_expected_is_a_special_value_too() -> None:
    expected = np.array([1.0, 2.0], np.float32)
    comparison = compare_arrays("y", expected, np.array([1.0, np.nan], np.float32))
    entry = KnownFailure("ort", "fam/x", "nan", "mismatch", max_abs=1e9)
    assert KnownError.of([comparison], entry).exceeded() == [("special_values", 1, 0)]
