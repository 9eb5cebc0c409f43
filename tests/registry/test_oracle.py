"""The oracle field of a tolerance: parsed once, strictly, and printed back as written."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Tolerance, Where
from fixture_store.registry.oracle import Oracle

WHERE = Where("provenance/fam.json", "fam/x")
ORACLE = {"record": "up/f64.npz", "metric": "max_abs", "factor": 2, "floor": 1e-7}


def parse(raw: Any) -> Tolerance:
    return Tolerance.from_json(raw, WHERE)


def test_an_oracle_parses_once_and_prints_back() -> None:
    raw = {"metric": "max_abs", "max": 1e-2, "oracle": ORACLE}
    tol = parse(raw)
    assert tol.oracle == Oracle("up/f64.npz", "max_abs", 2.0, 1e-7)
    assert tol.to_json() == raw
    assert parse({"metric": "rms", "max": 1, "oracle": {**ORACLE, "floor": 0}}).oracle == Oracle(
        "up/f64.npz", "max_abs", 2.0
    )


def test_an_expectation_may_name_its_own_oracle() -> None:
    raw = {
        "metric": "max_abs",
        "max": 1e-2,
        "oracle": ORACLE,
        "expectations": {"dtype:bfloat16": {"oracle": {**ORACLE, "factor": 8}}},
    }
    from fixture_store.registry.environment import Environment

    entry = parse(raw).in_environment(Environment(dtype="bfloat16"))
    assert entry.oracle is not None and entry.oracle.factor == 8


@pytest.mark.parametrize(
    ("oracle", "field", "says"),
    [
        ([], "oracle", "must be an object"),
        ({**ORACLE, "colour": 1}, "oracle.colour", "unknown field"),
        ({**ORACLE, "record": ""}, "oracle.record", "must name"),
        ({**ORACLE, "metric": "allclose"}, "oracle.metric", "must be one of"),
        ({k: v for k, v in ORACLE.items() if k != "factor"}, "oracle.factor", "finite"),
        ({**ORACLE, "factor": -1}, "oracle.factor", "finite"),
        ({**ORACLE, "factor": float("nan")}, "oracle.factor", "finite"),
        ({**ORACLE, "factor": True}, "oracle.factor", "finite"),
        ({**ORACLE, "floor": float("inf")}, "oracle.floor", "finite"),
    ],
)
def test_a_bad_oracle_is_refused_naming_its_field(oracle: Any, field: str, says: str) -> None:
    with pytest.raises(RegistryError, match=says) as e:
        parse({"metric": "rms", "max": 1, "oracle": oracle})
    assert e.value.field == f"tolerance.{field}"


def test_an_oracle_on_a_per_array_rule_is_refused() -> None:
    with pytest.raises(RegistryError, match="unknown field") as e:
        parse({"metric": "rms", "max": 1, "per_array": {"y": {"oracle": ORACLE}}})
    assert e.value.field == "tolerance.per_array.y.oracle"
