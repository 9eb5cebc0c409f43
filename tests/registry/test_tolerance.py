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
from fixture_store.registry.tolerance import DEFAULT_ATOL, DEFAULT_RTOL

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
    tol = parse({"metric": "exact", "per_array": {"y": {"atol": 0.1}}})
    assert tol.override("y") == Tolerance(atol=0.1)


@pytest.mark.parametrize("bound", [float("inf"), 1e400, float("nan"), -1.0])
def test_a_bound_that_would_pass_any_drift_is_refused(bound: float) -> None:
    raw = {"metric": "allclose", "rtol": bound, "atol": 0}
    with pytest.raises(RegistryError, match="must be a finite, non-negative number"):
        Tolerance.from_json(raw, Where("provenance/f.json", "f/r"))
