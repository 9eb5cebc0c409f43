"""Array roles: a record's inputs, parsed into its tolerance, and refusals naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Tolerance, Where
from fixture_store.registry.environment import Environment
from fixture_store.registry.metrics import Metric

WHERE = Where("provenance/fam.json", "fam/x")
ARRAYS = ["pixel_values", "mask/a", "mask/b", "logits", "hidden"]


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_inputs_are_names_and_patterns_that_round_trip_and_environments_inherit() -> None:
    raw = {
        "metric": "max_abs",
        "max": 1e-4,
        "inputs": ["pixel_values", "mask/*"],
        "expectations": {"device:cuda": {"max": 1e-3}},
    }
    tol = parse(raw)
    tol.check_names(ARRAYS, WHERE)
    assert tol.to_json() == raw and tol.inputs is not None
    assert [n for n in ARRAYS if tol.inputs.holds(n)] == ["pixel_values", "mask/a", "mask/b"]
    there = tol.in_environment(Environment.parse("device:cuda"))
    assert there.inputs == tol.inputs and there.for_array("logits").bound == 1e-3


@pytest.mark.parametrize(
    ("inputs", "extra", "says"),
    [
        ("pixel_values", {}, "non-empty list"),
        ([], {}, "non-empty list"),
        ([3], {}, "not 3"),
        (["mask/*", "mask/*"], {}, "twice"),
        (["pixels"], {}, "'pixels' names no array"),
        (["masks/*"], {}, "a pattern matching none"),
        (["*"], {}, "every array of the record is an input"),
        (["pixel_values"], {"per_array": {"pixel_values": {"max": 1}}}, "has a rule of its own"),
        (["hidden"], {"intermediates": {"order": ["hidden"]}}, "has a rule of its own"),
    ],
)
def test_bad_inputs_are_refused_naming_the_field(
    inputs: Any, extra: dict[str, Any], says: str
) -> None:
    with pytest.raises(RegistryError, match=says) as info:
        parse({"metric": "max_abs", "max": 1e-4, "inputs": inputs, **extra}).check_names(
            ARRAYS, WHERE
        )
    assert info.value.field == "tolerance.inputs" and info.value.file == "provenance/fam.json"


def test_a_pattern_rule_matching_inputs_applies_to_the_outputs_it_matches() -> None:
    tol = parse(
        {"metric": "max_abs", "max": 1e-4, "inputs": ["mask/a"], "per_array": {"mask/*": {}}}
    )
    tol.check_names(ARRAYS, WHERE)  # mask/b is an output the pattern judges


def test_an_expectation_cannot_state_inputs() -> None:
    raw = {"metric": "max_abs", "max": 1e-4, "expectations": {"device:cuda": {"inputs": ["x"]}}}
    with pytest.raises(RegistryError, match="unknown field") as info:
        parse(raw)
    assert info.value.field == "tolerance.expectations.device:cuda.inputs"


def test_an_input_is_judged_exactly_by_every_comparison_whatever_rule_matches_it() -> None:
    """The role before any rule: ``for_array`` (the one lookup the parity assertion,
    regeneration, the runtime comparators and calibration use) gives an input the exact rule,
    even where a pattern, the dtype rule or an environment's rule would match it."""
    tol = parse(
        {
            "metric": "max_abs",
            "max": 1e-4,
            "inputs": ["mask/*"],
            "per_array": {"*": {"max": 1e-2}},
            "per_dtype": {"float32": {"max": 1}},
            "expectations": {"device:cuda": {"max": 1e-3}},
        }
    )
    there = tol.in_environment(Environment.parse("device:cuda"))
    for rules in (tol, there):
        exact = rules.for_array("mask/a", dtype="float32")
        assert exact.metric is Metric.EXACT and "input" in exact.why
        assert rules.for_array("logits", dtype="float32").metric is Metric.MAX_ABS
