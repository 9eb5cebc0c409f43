"""The oracle judgement: the candidate's error against an oracle, bounded by the reference's own.

For each array the reference and the candidate both hold, ``error(candidate, oracle) <= factor *
error(reference, oracle) + floor`` (:mod:`fixture_store.registry.oracle`), each error the
``metric`` that every comparison reports (:func:`~fixture_store.parity.arrays.compare_arrays`:
its integer, infinity and NaN semantics included) with the candidate and the reference converted
to the oracle's dtype (a float32 port against a float64 oracle; ULPs are the oracle's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.parity.arrays import compare_arrays
from fixture_store.registry.metrics import DtypeRule
from fixture_store.registry.oracle import Oracle
from fixture_store.registry.tolerance import ArrayTolerance

_MEASURE = ArrayTolerance(dtype=DtypeRule.SAME_KIND)
_ATTRIBUTE = {"ulp": "max_ulp"}  # the comparison's name of a metric, where it differs


@dataclass(frozen=True)
class OracleJudgement:
    """One array judged against the oracle: both errors, the factor and floor, the verdict."""

    name: str
    oracle: str  # the oracle's record
    metric: str
    candidate_error: float
    reference_error: float
    factor: float
    floor: float

    @property
    def bound(self) -> float:
        return self.factor * self.reference_error + self.floor

    @property
    def ok(self) -> bool:
        return not math.isnan(self.candidate_error) and self.candidate_error <= self.bound

    def describe(self) -> str:
        verdict = "within" if self.ok else "above"
        return (
            f"{self.name}: {self.metric}(candidate, oracle) {self.candidate_error:.3g} {verdict} "
            f"{self.factor:g} x {self.metric}(reference, oracle) {self.reference_error:.3g} + "
            f"floor {self.floor:g} = {self.bound:.3g} (oracle {self.oracle})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "array": self.name,
            "oracle": self.oracle,
            "metric": self.metric,
            "candidate_error": self.candidate_error,
            "reference_error": self.reference_error,
            "factor": self.factor,
            "floor": self.floor,
            "ok": self.ok,
        }


def judge(
    oracle: Oracle,
    truth: Mapping[str, Any],
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
) -> tuple[OracleJudgement, ...]:
    """Every array of ``expected`` that ``actual`` holds, judged against ``truth`` (the oracle
    record's arrays); a RegistryError when the oracle lacks one of them."""
    names = [n for n in sorted(expected) if n in actual]
    lacking = [n for n in names if n not in truth]
    if lacking:
        raise RegistryError(
            f"the oracle {oracle.record} holds no array {', '.join(map(repr, lacking))} "
            f"(it holds {sorted(truth)})",
            field="tolerance.oracle.record",
            fix="name an oracle record with an array of each name the reference holds",
        )
    return tuple(
        OracleJudgement(
            name,
            oracle.record,
            oracle.metric,
            error(oracle.metric, truth[name], actual[name]),
            error(oracle.metric, truth[name], expected[name]),
            oracle.factor,
            oracle.floor,
        )
        for name in names
    )


def error(metric: str, truth: Any, values: Any) -> float:
    """``metric`` of ``values`` against ``truth``; infinite where they cannot be measured (a
    shape or kind that differs)."""
    found = compare_arrays("oracle", truth, values, _MEASURE)
    if not found.measured:
        return math.inf
    return float(getattr(found, _ATTRIBUTE.get(metric, metric)))
