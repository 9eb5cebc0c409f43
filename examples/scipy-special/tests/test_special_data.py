"""scipy.special's ``tests/test_data.py`` (test_boost, test_gsl, test_local), ported.

The original judges each special function against a table of reference values another
implementation computed (Boost's test data, GSL, or scipy's own high-precision runs), shipped in
the wheel as ``scipy/special/tests/data/{boost,gsl,local}.npz``: ``FuncData(func, table,
param_columns, result_columns, rtol=..., atol=...)`` evaluates ``func`` on the parameter columns
and requires ``|got - wanted| <= atol + rtol * |wanted|`` (default ``rtol = 5 eps``, ``atol = 5
tiny``), NaN where NaN is wanted and the same infinity where one is.

Here each NPZ is a record pinned to the file inside the ``scipy==1.17.1`` wheel and read only once
it verified; its rule is in the registry: ``allclose`` with the original's default for the record
and, per data set, the rtol/atol the original gives the functions judged on it (``per_array``).
The function, its columns and its parameter filters are the original's own (its list of
``FuncData`` is imported from the installed test module); the tolerances are not taken from it but
from the registry, and ``test_the_rules_are_the_originals`` proves them equal.

Not ported (named in ``NOT_PORTED``): the original's known failures (it xfails them), and the
tests on the Boost data sets that the original judges under *different* tolerances for different
implementations (``eval_legendre`` vs ``lqn`` on one table, say): a reference array has one rule
in fixture-store, so one of them would be judged looser or stricter than the original does.
"""

from __future__ import annotations

import functools
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from scipy.special._testutils import FuncData  # type: ignore[import-untyped]
from scipy.special.tests import test_data as original  # type: ignore[import-untyped]

from fixture_store.parity.assertion import compare, message

RECORDS = {
    label: f"scipy-special/scipy/special/tests/data/{label}.npz"
    for label in ("boost", "gsl", "local")
}
KNOWN_FAILURES = 5  # the original's knownfailure= entries (it xfails them)
ORIGINAL = {
    "boost": original.BOOST_TESTS,
    "gsl": original.GSL_TESTS,
    "local": original.LOCAL_TESTS,
}


def _rules(tests: list[FuncData]) -> dict[str, set[tuple[float, float]]]:
    rules: dict[str, set[tuple[float, float]]] = defaultdict(set)
    for test in tests:
        if not test.knownfailure:
            rtol, atol = test.get_tolerances(np.float64)
            rules[test.dataname].add((float(rtol), float(atol)))
    return rules


def _split() -> tuple[list[Any], list[str]]:
    ported, not_ported = [], []
    for label, tests in ORIGINAL.items():
        rules = _rules(tests)
        for i, test in enumerate(tests):
            why = (
                "known failure in the original"
                if test.knownfailure
                else "judged under several tolerances in the original"
                if len(rules[test.dataname]) > 1
                else ""
            )
            test_id = f"{label}-{i}-{test.func.__name__}-{test.dataname}"
            if why:
                not_ported.append(f"{test_id}: {why}")
                continue
            marks = pytest.mark.fixture_store(RECORDS[label])
            ported.append(pytest.param(label, test, id=test_id, marks=marks))
    return ported, not_ported


PORTED, NOT_PORTED = _split()


@functools.cache
def _reference(fixture_store: Any, label: str) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = fixture_store.arrays(RECORDS[label])
    return arrays


def _candidate(test: FuncData, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``table`` with the function's outputs in its result columns, where the original judges
    them (rows its parameter filters keep), and those rows; as ``FuncData.check`` computes them."""
    data = table.astype(np.float64)
    rows = np.ones(data.shape[0], bool)
    for j, keep in zip(test.param_columns, test.param_filter, strict=False):
        if keep:
            rows &= list(keep(data[:, j]))
    judged = data[rows]
    params = [
        judged[:, int(j.imag)].astype(complex) if np.iscomplexobj(j) else judged[:, j]
        for j in test.param_columns
    ]
    if test.vectorized:
        got = test.func(*params)
    else:
        got = np.asarray([test.func(*point) for point in zip(*params, strict=True)])
    outputs = got if isinstance(got, tuple) else (got,)
    candidate = data.copy()
    for column, values in zip(test.result_columns, outputs, strict=True):
        candidate[rows, column] = values
    return candidate, rows


def _run(test: FuncData, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The candidate, with the original's floating-point and warning settings."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _candidate(test, table)


@pytest.mark.parametrize(("label", "test"), PORTED)
def test_special_function_is_at_parity_with_its_reference(
    fixture_store: Any, label: str, test: FuncData
) -> None:
    table = _reference(fixture_store, label)[test.dataname]
    candidate, _rows = _run(test, table)
    fixture_store.assert_parity(RECORDS[label], {test.dataname: candidate}, only=[test.dataname])


@pytest.mark.parametrize(("label", "test"), PORTED)
def test_the_rules_are_the_originals(fixture_store: Any, label: str, test: FuncData) -> None:
    rule = fixture_store.tolerance(RECORDS[label], test.dataname)
    rtol, atol = test.get_tolerances(np.float64)
    assert (rule.metric.value, rule.rtol, rule.atol) == ("allclose", rtol, atol)


@pytest.mark.parametrize(("label", "test"), PORTED)
def test_a_perturbation_the_original_catches_is_caught(
    fixture_store: Any, label: str, test: FuncData
) -> None:
    """One judged output moved three times its allowance from the reference value: the
    original's own ``FuncData.check`` fails on it and so does the port; unmoved, both pass."""
    table = _reference(fixture_store, label)[test.dataname]
    candidate, rows = _run(test, table)
    rtol, atol = test.get_tolerances(np.float64)
    column = test.result_columns[0]
    wanted = table[:, column]
    if not rows.any():
        pytest.skip("the original's parameter filter keeps no row of this data set: it judges none")
    with np.errstate(over="ignore", invalid="ignore"):
        # Three allowances away; where only infinities are wanted, the largest finite float.
        shifted = np.where(
            np.isfinite(wanted), wanted + 3 * (atol + rtol * np.abs(wanted)), np.finfo(float).max
        )
    i = int(np.flatnonzero(rows & np.isfinite(shifted) & ~np.isnan(wanted))[0])
    moved = candidate.copy()
    moved[i, column] = shifted[i]

    def original_check(values: np.ndarray) -> None:
        outputs = tuple(values[rows][:, c] for c in test.result_columns)
        FuncData(
            lambda *_params: outputs,
            np.asarray(table),
            test.param_columns,
            test.result_columns,
            rtol=test.rtol,
            atol=test.atol,
            param_filter=test.param_filter,
            dataname=test.dataname,
        ).check(dtype=np.float64)

    original_check(candidate)  # the real outputs pass the original ...
    with pytest.raises(AssertionError):
        original_check(moved)  # ... which catches the moved one
    tolerance = fixture_store.record(RECORDS[label]).tolerance
    expected = {test.dataname: table}
    report = compare(RECORDS[label], expected, {test.dataname: moved}, tolerance)
    assert not report.ok, message(report, expected, {test.dataname: moved}, tolerance)


def test_what_is_not_ported_is_named() -> None:
    """The known failures (5, xfailed by the original) and the tests on the Boost data sets
    judged under several tolerances: every other test of the original is ported."""
    known = [n for n in NOT_PORTED if n.endswith("known failure in the original")]
    several = [n for n in NOT_PORTED if n.endswith("several tolerances in the original")]
    assert len(known) == KNOWN_FAILURES
    assert all(n.startswith("boost-") for n in several)
    total = sum(len(tests) for tests in ORIGINAL.values())
    assert len(PORTED) + len(NOT_PORTED) == total
