"""numpy's ``test_umath_accuracy.py::test_validate_transcendentals``, ported to fixture-store.

The original reads ``numpy/_core/tests/data/umath-validation-set-<func>.csv`` from the installed
package (rows of dtype, input and expected output as hex bit patterns, and an ULP bound; the
outputs were computed with a higher-precision library and rounded to the dtype) and asserts
``np.testing.assert_array_max_ulp(np.<func>(inputs), outputs, max(bound))`` per dtype.

Here each CSV is a record pinned to the file inside the ``numpy==2.4.6`` wheel (by the wheel's
SHA-256: ``fixture-store fetch`` brings it back on any machine) and read only once it verified;
its rule is in the registry, one ``ulp`` bound per dtype (``per_dtype``), the largest
``ulperrortol`` the file lists for that dtype, as the original takes it. Three tests per
function: the real outputs pass; one output moved one ULP past the bound is caught by the port
*and* by the original's own check; one moved exactly to the bound passes both (the port is
neither looser nor stricter).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from fixture_store.parity.assertion import compare, message

_BITS = {"float32": np.uint32, "float64": np.uint64}
# Each test runs once per record of the family (numpy-umath/<function>.csv), verified first.
each_function = pytest.mark.fixture_store(family="numpy-umath", argname="name")


def _avx() -> bool:
    from numpy._core._multiarray_umath import __cpu_features__  # type: ignore[import-not-found]

    features: dict[str, bool] = __cpu_features__
    return features.get("AVX512F", False) or (features.get("FMA3", False) and features["AVX2"])


# The original's own condition: elsewhere the platform's libm gives other (valid) results.
platform = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and _avx()),
    reason="numpy validates these sets only on linux with AVX (numpy/numpy#20448)",
)


def _table(text: str) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Per dtype: inputs, expected outputs (their bit patterns read as the dtype) and the
    largest ULP bound, read as the original reads the file (comment lines ``$``/``#`` out)."""
    rows: dict[str, list[tuple[int, int, int]]] = {}
    for line in text.splitlines()[1:]:
        if not line.strip() or line[0] in "$#":
            continue
        dtype, inp, out, ulp = line.split(",")
        rows.setdefault(dtype.removeprefix("np."), []).append(
            (int(inp, 16), int(out, 16), int(ulp))
        )
    table = {}
    for dtype, values in rows.items():
        bits = np.array([(i, o) for i, o, _ in values], _BITS[dtype]).view(dtype)
        table[dtype] = (bits[:, 0].copy(), bits[:, 1].copy(), max(u for *_, u in values))
    return table


def _case(fixture_store: Any, name: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    function = name.removeprefix("numpy-umath/").removesuffix(".csv")
    table = _table(fixture_store.read_bytes(name).decode())
    expected = {dtype: out for dtype, (_inp, out, _u) in table.items()}
    with np.errstate(all="ignore"):
        actual = {dtype: getattr(np, function)(inp) for dtype, (inp, _o, _u) in table.items()}
    return table, expected, actual


def _moved(values: np.ndarray, index: int, steps: int) -> np.ndarray:
    """``values`` with one element moved ``steps`` ULPs away from zero (bit pattern + steps)."""
    out = values.copy()
    out.view(_BITS[str(values.dtype)])[index] += steps
    return out


def _judged_element(expected: np.ndarray, bound: int) -> int:
    """A finite output that stays finite ``bound + 1`` ULPs further from zero."""
    far = _moved(expected, 0, 0)
    for i in np.flatnonzero(np.isfinite(expected)):
        far = _moved(expected, int(i), bound + 1)
        if np.isfinite(far[i]) and expected[i] != 0:
            return int(i)
    raise AssertionError("no finite output to move")


@platform
@each_function
def test_validate_transcendentals(fixture_store: Any, name: str) -> None:
    _, expected, actual = _case(fixture_store, name)
    tolerance = fixture_store.record(name).tolerance
    report = compare(name, expected, actual, tolerance)
    assert report.ok, message(report, expected, actual, tolerance)


@each_function
def test_the_rules_are_the_originals_bounds(fixture_store: Any, name: str) -> None:
    """The registry's bound per dtype is the largest ``ulperrortol`` of the verified file."""
    table = _table(fixture_store.read_bytes(name).decode())
    for dtype, (_inp, _out, bound) in table.items():
        rule = fixture_store.record(name).tolerance.for_array(dtype, dtype=dtype)
        assert (rule.metric.value, rule.bound) == ("ulp", bound), (dtype, rule)


@platform
@each_function
def test_a_perturbation_the_original_catches_is_caught_and_the_bound_is_not(
    fixture_store: Any, name: str
) -> None:
    table, _expected, _actual = _case(fixture_store, name)
    tolerance = fixture_store.record(name).tolerance
    for dtype, (_inp, out, bound) in table.items():
        i = _judged_element(out, bound)
        past, at = _moved(out, i, bound + 1), _moved(out, i, bound)
        # The original's check catches the value one ULP past its bound ...
        with pytest.raises(AssertionError):
            np.testing.assert_array_max_ulp(past, out, maxulp=bound)
        report = compare(name, {dtype: out}, {dtype: past}, tolerance)
        assert not report.ok, dtype
        assert report.comparisons[0].max_ulp == bound + 1, dtype
        # ... and both accept the value exactly at it.
        np.testing.assert_array_max_ulp(at, out, maxulp=bound)
        assert compare(name, {dtype: out}, {dtype: at}, tolerance).ok, dtype
