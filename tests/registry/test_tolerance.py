"""Tolerances: parsed once, printed back as written, resolved per array for every comparison."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import ArrayTolerance, Metric, Tolerance, Where
from fixture_store.registry.tolerance import DEFAULT_ATOL, DEFAULT_RTOL, DtypeRule, ShapeRule

PROJECT = Path(__file__).resolve().parents[2]
WHERE = Where("provenance/fam.json", "fam/x")


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_every_committed_tolerance_round_trips() -> None:
    seen = 0
    for path in sorted((PROJECT / "provenance").glob("*.json")):
        for name, record in json.loads(path.read_text())["records"].items():
            if "tolerance" in record:
                raw = record["tolerance"]
                assert Tolerance.from_json(raw, Where(record=name)).to_json() == raw, name
                seen += 1
    assert seen > 0


@pytest.mark.parametrize(
    "raw",
    [
        {"metric": "exact"},
        {"metric": "allclose", "atol": 1},
        {"metric": "allclose", "atol": 0, "rtol": 0.5},
        {"metric": "allclose", "rtol": 1e-3, "per_array": {}},
        {"metric": "allclose", "per_array": {"y": {"rtol": 0.05}, "z": {"metric": "exact"}}},
        {"metric": "exact", "per_array": {"y": {}}},
        {"metric": "mean_abs", "max": 0.0005},
        {"metric": "max_abs", "max": 1e-3, "dtype": "same_kind", "shape": "squeeze"},
        {"metric": "ulp", "max": 4, "per_array": {"y": {"max": 8}, "z": {"metric": "exact"}}},
        {"metric": "allclose", "per_array": {"y": {"metric": "mean_abs", "max": 1e-4}}},
    ],
)
def test_the_json_comes_back_as_written(raw: dict[str, Any]) -> None:
    out = parse(raw).to_json()
    assert out == raw
    # Numbers keep their JSON form: an integer bound is not rewritten as a float.
    assert json.dumps(out, sort_keys=True) == json.dumps(raw, sort_keys=True)


def test_no_tolerance_means_the_onnx_runner_defaults() -> None:
    assert Tolerance().for_array("y") == ArrayTolerance(Metric.ALLCLOSE, 1e-7, 1e-3)
    assert ArrayTolerance() == ArrayTolerance(Metric.ALLCLOSE, DEFAULT_ATOL, DEFAULT_RTOL)


def test_an_override_applies_over_the_record_default() -> None:
    tol = parse(
        {
            "metric": "allclose",
            "atol": 1e-6,
            "rtol": 1e-4,
            "per_array": {"y": {"atol": 1e-5}, "z": {"metric": "exact"}, "w": {}},
        }
    )
    assert tol.for_array("x") == ArrayTolerance(Metric.ALLCLOSE, 1e-6, 1e-4)
    assert tol.for_array("y") == ArrayTolerance(Metric.ALLCLOSE, 1e-5, 1e-4)
    assert tol.for_array("z") == ArrayTolerance(Metric.EXACT, 1e-6, 1e-4)
    assert tol.for_array("w") == tol.for_array("x")
    assert tol.override("y") == Tolerance(atol=1e-5)
    assert tol.override("x") is None


def test_the_first_name_with_an_override_wins() -> None:
    tol = parse({"metric": "allclose", "per_array": {"out:a": {"rtol": 0.5}, "out": {"rtol": 0.1}}})
    assert tol.for_array("out:a", "out").rtol == 0.5
    assert tol.for_array("out:b", "out").rtol == 0.1
    assert tol.for_array("other", "more").rtol == DEFAULT_RTOL


def test_a_bound_written_as_an_integer_compares_as_a_float() -> None:
    bound = parse({"metric": "allclose", "atol": 1}).for_array("x")
    assert bound.atol == 1.0 and isinstance(bound.atol, float)
    assert bound.to_json() == {"metric": "allclose", "atol": 1.0, "rtol": DEFAULT_RTOL}


def test_a_tolerance_crosses_process_boundaries() -> None:
    tol = parse({"metric": "allclose", "per_array": {"y": {"rtol": 0.05}}})
    assert pickle.loads(pickle.dumps(tol)) == tol
    assert hash(tol) == hash(pickle.loads(pickle.dumps(tol)))


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        ([], "tolerance", "must be an object"),
        ({"atol": 1}, "tolerance.metric", "missing required field"),
        ({"metric": "close-enough"}, "tolerance.metric", "unknown metric 'close-enough'"),
        ({"metric": ["exact"]}, "tolerance.metric", "unknown metric"),
        ({"metric": "allclose", "rtol": -1}, "tolerance.rtol", "non-negative number"),
        ({"metric": "allclose", "atol": math.nan}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "atol": True}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "atol": "0.1"}, "tolerance.atol", "non-negative number"),
        ({"metric": "allclose", "ulps": 4}, "tolerance.ulps", "unknown field"),
        ({"metric": "mean_abs"}, "tolerance.max", "needs its bound"),
        ({"metric": "ulp", "atol": 1, "max": 1}, "tolerance.atol", "takes max"),
        ({"metric": "allclose", "max": 1}, "tolerance.max", "takes atol and rtol"),
        ({"metric": "exact", "atol": 0.1}, "tolerance.atol", "takes no bound"),
        ({"metric": "max_abs", "max": -1e-3}, "tolerance.max", "non-negative number"),
        ({"metric": "ulp", "max": math.inf}, "tolerance.max", "non-negative number"),
        ({"metric": "exact", "dtype": "cast"}, "tolerance.dtype", "one of ('exact', 'same_kind')"),
        ({"metric": "exact", "shape": True}, "tolerance.shape", "one of ('exact', 'squeeze')"),
        (
            {"metric": "allclose", "per_array": {"y": {"metric": "ulp"}}},
            "tolerance.per_array.y.max",
            "needs its bound",
        ),
        (
            {"metric": "mean_abs", "max": 1e-3, "per_array": {"y": {"rtol": 0.1}}},
            "tolerance.per_array.y.rtol",
            "metric 'mean_abs' takes max",
        ),
        ({"metric": "allclose", "per_array": []}, "tolerance.per_array", "must be an object"),
        ({"metric": "allclose", "per_array": {"y": 1}}, "tolerance.per_array.y", "an object"),
        (
            {"metric": "allclose", "per_array": {"y": {"rtol": -0.1}}},
            "tolerance.per_array.y.rtol",
            "non-negative number",
        ),
        (
            {"metric": "allclose", "per_array": {"y": {"metric": "fuzzy"}}},
            "tolerance.per_array.y.metric",
            "unknown metric",
        ),
        (
            {"metric": "allclose", "per_array": {"y": {"per_array": {}}}},
            "tolerance.per_array.y.per_array",
            "unknown field",
        ),
    ],
)
def test_refusals_name_the_field(raw: Any, field: str, needle: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse(raw)
    assert info.value.field == field and info.value.record == "fam/x"
    assert needle in str(info.value)


def test_an_override_needs_no_metric() -> None:
    tol = parse({"metric": "allclose", "per_array": {"y": {"atol": 0.1}}})
    assert tol.override("y") == Tolerance(atol=0.1)


@pytest.mark.parametrize("bound", [float("inf"), 1e400, float("nan"), -1.0])
def test_a_bound_that_would_pass_any_drift_is_refused(bound: float) -> None:
    raw = {"metric": "allclose", "rtol": bound, "atol": 0}
    with pytest.raises(RegistryError, match="must be a finite, non-negative number"):
        Tolerance.from_json(raw, Where("provenance/f.json", "f/r"))


def test_each_metric_resolves_with_its_bound() -> None:
    tol = parse(
        {
            "metric": "mean_abs",
            "max": 5e-4,
            "per_array": {
                "a": {"max": 1e-3},
                "b": {"metric": "ulp", "max": 2},
                "c": {"metric": "allclose", "rtol": 0.1},
                "d": {"metric": "mean_abs", "dtype": "same_kind"},
            },
        }
    )
    assert tol.for_array("x") == ArrayTolerance(Metric.MEAN_ABS, bound=5e-4)
    assert tol.for_array("a") == ArrayTolerance(Metric.MEAN_ABS, bound=1e-3)
    assert tol.for_array("b") == ArrayTolerance(Metric.ULP, bound=2.0)
    assert tol.for_array("c") == ArrayTolerance(Metric.ALLCLOSE, DEFAULT_ATOL, 0.1, bound=5e-4)
    # The same metric again inherits the bound; only a switch to another one must give its own.
    assert tol.for_array("d") == ArrayTolerance(
        Metric.MEAN_ABS, bound=5e-4, dtype=DtypeRule.SAME_KIND
    )


@pytest.mark.parametrize(
    ("tolerance", "text", "printed"),
    [
        (ArrayTolerance(), "allclose atol=1e-07 rtol=0.001", {"atol": 1e-7, "rtol": 1e-3}),
        (ArrayTolerance(Metric.EXACT), "exact", {}),
        (ArrayTolerance(Metric.MEAN_ABS, bound=5e-4), "mean_abs <= 0.0005", {"max": 5e-4}),
        (ArrayTolerance(Metric.ULP, bound=4, shape=ShapeRule.SQUEEZE), "ulp <= 4", {"max": 4}),
    ],
)
def test_an_array_tolerance_prints_only_what_applies(
    tolerance: ArrayTolerance, text: str, printed: dict[str, Any]
) -> None:
    assert tolerance.describe() == text
    out = tolerance.to_json()
    assert out.pop("metric") == tolerance.metric.value
    assert out.pop("shape", None) == (None if tolerance.shape is ShapeRule.EXACT else "squeeze")
    assert out == printed
