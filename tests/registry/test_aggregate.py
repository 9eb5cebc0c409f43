"""An aggregate's fields as a record states them: parsed, printed back, refused when wrong."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Tolerance, Where
from fixture_store.registry.aggregate import Aggregate, Reduce

WHERE = Where("provenance/fam.json", "fam/x")


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_a_rule_and_a_check_take_an_aggregate_and_print_it_back() -> None:
    raw = {"metric": "max_abs", "reduce": "median", "axis": 0, "max": 0.01}
    tol = parse(raw)
    assert tol.to_json() == raw
    assert tol.for_array("x").checks[0].over == Aggregate(Reduce.MEDIAN, 0)
    listed = {"checks": [raw, {"metric": "rms", "max": 1e-5}]}
    assert parse(listed).to_json() == listed
    assert [c.over for c in parse(listed).for_array("x").checks] == [
        Aggregate(Reduce.MEDIAN, 0),
        None,
    ]


def test_an_override_keeps_the_aggregate_of_its_metric_and_drops_it_when_it_switches() -> None:
    tol = parse(
        {
            "metric": "max_abs",
            "reduce": "max",
            "axis": -1,
            "max": 0.01,
            "per_array": {"a": {"max": 0.1}, "b": {"metric": "rms", "max": 1e-3}},
        }
    )
    assert tol.for_array("a").describe() == "max over axis -1 of max_abs <= 0.1"
    assert tol.for_array("b").describe() == "rms <= 0.001"


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ({"metric": "allclose", "reduce": "max", "axis": 0}, "tolerance.reduce", "element by"),
        ({"metric": "max_abs", "max": 1, "reduce": "max"}, "tolerance.axis", "both"),
        ({"metric": "max_abs", "max": 1, "axis": 0}, "tolerance.reduce", "both"),
        ({"metric": "max_abs", "max": 1, "reduce": "p90", "axis": 0}, "tolerance.reduce", "one of"),
        (
            {"metric": "max_abs", "max": 1, "reduce": "max", "axis": True},
            "tolerance.axis",
            "integer",
        ),
        (
            {"metric": "max_abs", "max": 1, "reduce": "max", "axis": 0.5},
            "tolerance.axis",
            "integer",
        ),
        (
            {"checks": [{"metric": "rms", "max": 1}], "reduce": "max", "axis": 0},
            "tolerance.axis",
            "beside 'checks'",
        ),
        (
            {"checks": [{"metric": "exact", "reduce": "max", "axis": 0}]},
            "tolerance.checks[0].reduce",
            "element by",
        ),
    ],
)
def test_a_wrong_aggregate_is_refused_naming_the_field(raw: Any, field: str, says: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse(raw)
    assert info.value.field == field
    assert says in str(info.value)


def test_an_axis_an_array_of_the_manifest_does_not_have_is_refused_when_the_record_is_read() -> (
    None
):
    arrays = {
        "frames": {"dtype": "float32", "shape": [5, 4, 4]},
        "score": {"dtype": "float32", "shape": [5]},
    }
    tol = parse(
        {
            "metric": "max_abs",
            "max": 1e-3,
            "per_array": {"frames": {"reduce": "median", "axis": 2}},
        }
    )
    tol.check_names(arrays, WHERE)  # frames has axis 2
    wrong = parse({"metric": "max_abs", "max": 1e-3, "reduce": "max", "axis": 1})
    with pytest.raises(RegistryError) as info:
        wrong.check_names(arrays, WHERE)  # score has one axis
    assert "axis 1 is out of range for array 'score' of shape [5]" in str(info.value)
    assert info.value.fix is not None and "per_array" in info.value.fix
    wrong.check_names(["frames", "score"], WHERE)  # an ONNX case's outputs: no shapes to check
