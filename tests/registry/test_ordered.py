"""An ordered record's intermediates: their order, their rule, and refusals naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Tolerance, Where
from fixture_store.registry.ordered import natural

WHERE = Where("provenance/fam.json", "fam/x")
ARRAYS = ["embed", "blocks.0", "blocks.1", "blocks.2", "blocks.10", "norm", "logits"]
RAW = {
    "metric": "max_abs",
    "max": 1e-6,
    "per_dtype": {"float32": {"metric": "max_abs", "max": 1e-5}},
    "intermediates": {"order": ["embed", "blocks.*", "norm"], "metric": "rms", "max": 1e-3},
}


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_the_order_takes_names_and_patterns_in_natural_order() -> None:
    tol = parse(RAW)
    assert tol.to_json() == RAW
    steps = tol.intermediates
    assert steps is not None
    assert steps.sequence(sorted(ARRAYS)) == (
        "embed", "blocks.0", "blocks.1", "blocks.2", "blocks.10", "norm"
    )  # fmt: skip
    assert natural("blocks.2") < natural("blocks.10")


def test_an_exact_name_takes_its_own_place_before_a_pattern_matching_it() -> None:
    tol = parse({"metric": "exact", "intermediates": {"order": ["*", "embed"]}})
    assert tol.intermediates is not None
    assert tol.intermediates.sequence(["embed", "b", "a"]) == ("a", "b", "embed")


def test_intermediates_take_their_rule_before_a_dtype_rule_and_outputs_the_records() -> None:
    tol = parse(
        {**RAW, "per_array": {"blocks.1": {"metric": "max_abs", "max": 0.5, "why": "a known op"}}}
    )
    assert tol.for_array("blocks.10", dtype="float32").describe() == "rms <= 0.001"
    assert tol.for_array("blocks.1", dtype="float32").describe() == "max_abs <= 0.5"
    assert tol.for_array("logits", dtype="float32").describe() == "max_abs <= 1e-05"
    assert tol.for_array("logits", dtype="float64").describe() == "max_abs <= 1e-06"


def test_an_order_entry_naming_no_array_of_the_manifest_is_refused_naming_them() -> None:
    tol = parse({**RAW, "intermediates": {"order": ["embed", "block.*"]}})
    with pytest.raises(RegistryError) as info:
        tol.check_names(ARRAYS, WHERE)
    assert info.value.field == "tolerance.intermediates.order"
    assert "'block.*' names no array" in str(info.value) and "'blocks.10'" in str(info.value)
    parse(RAW).check_names(ARRAYS, WHERE)


@pytest.mark.parametrize(
    ("intermediates", "field", "says"),
    [
        (["embed"], "tolerance.intermediates", "must be an object"),
        ({"metric": "rms", "max": 1}, "tolerance.intermediates.order", "non-empty list"),
        ({"order": []}, "tolerance.intermediates.order", "non-empty list"),
        ({"order": ["a", 3]}, "tolerance.intermediates.order", "name or a pattern"),
        ({"order": ["a", "a"]}, "tolerance.intermediates.order", "twice"),
        ({"order": ["a"], "metric": "rms"}, "tolerance.intermediates.max", "needs its bound"),
        ({"order": ["a"], "per_array": {}}, "tolerance.intermediates.per_array", "unknown"),
    ],
)
def test_wrong_intermediates_are_refused_naming_the_field(
    intermediates: Any, field: str, says: str
) -> None:
    with pytest.raises(RegistryError) as info:
        parse({"metric": "max_abs", "max": 1, "intermediates": intermediates})
    assert info.value.field == field
    assert says in str(info.value)
