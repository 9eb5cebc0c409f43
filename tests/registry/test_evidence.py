"""A calibrated rule's evidence: kept as written, refused when malformed."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import Tolerance, Where

WHERE = Where("provenance/fam.json", "fam/x")
EVIDENCE = {
    "observed": {"rms": 1.2e-6, "ulp": 3},
    "runs": 3,
    "environments": ["device:cpu"],
    "margin": "2x the largest",
}


def test_evidence_prints_back_on_a_rule_and_an_override() -> None:
    raw = {
        "metric": "rms",
        "max": 3e-6,
        "evidence": EVIDENCE,
        "per_array": {"a": {"metric": "ulp", "max": 6, "evidence": EVIDENCE}},
    }
    assert Tolerance.from_json(raw, WHERE).to_json() == raw


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"runs": 0}, "tolerance.evidence.runs"),
        ({"runs": True}, "tolerance.evidence.runs"),
        ({"observed": {}}, "tolerance.evidence.observed"),
        ({"observed": {"rms": -1}}, "tolerance.evidence.observed"),
        ({"observed": {"rms": float("inf")}}, "tolerance.evidence.observed"),
        ({"environments": "device:cpu"}, "tolerance.evidence.environments"),
        ({"margin": " "}, "tolerance.evidence.margin"),
        ({"extra": 1}, "tolerance.evidence"),
    ],
)
def test_malformed_evidence_is_refused_naming_the_field(change: Any, field: str) -> None:
    raw = {"metric": "rms", "max": 1, "evidence": {**EVIDENCE, **change}}
    with pytest.raises(RegistryError) as info:
        Tolerance.from_json(raw, WHERE)
    assert info.value.field == field
