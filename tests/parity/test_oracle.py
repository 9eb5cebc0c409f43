"""Parity judged relative to the upstream's own error against an oracle (FlashAttention's rule:
at most twice PyTorch's error against a float64 computation)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import RegistryError
from fixture_store.objects.store import Store
from fixture_store.parity import oracle
from fixture_store.parity.assertion import ParityError, assert_parity
from fixture_store.registry.files import write_family
from fixture_store.registry.oracle import Oracle

NAME = "port/attn.npz"
ORACLE = "port/attn_f64.npz"
RNG = np.random.default_rng(7)
TRUTH = RNG.standard_normal(256)  # the upstream in float64
UPSTREAM = (TRUTH + RNG.standard_normal(256) * 1e-4).astype(np.float32)  # its float32 output
UPSTREAM_ERR = float(np.max(np.abs(UPSTREAM.astype(np.float64) - TRUTH)))


def _fixtures(project: Path, store: Store, rule: dict[str, object]) -> Fixtures:
    for name, values in ((NAME, UPSTREAM), (ORACLE, TRUTH)):
        path = project / name.split("/")[1]
        np.savez(path, y=values)
        ingest.add(store, registry_mod.load(project), path, name=name, kind="array")
    registry = registry_mod.load(project)
    records = dict(registry.families["port"].records)
    records[NAME] = registry_mod.parse_record(
        NAME, {**records[NAME].to_json(), "tolerance": rule}, file="t"
    )
    write_family(registry, "port", records.values())
    return Fixtures(store, registry_mod.load(project))


RULE = {
    "metric": "max_abs",
    "max": 0.1,
    "oracle": {"record": ORACLE, "metric": "max_abs", "factor": 2, "floor": 0},
}


def test_a_candidate_within_twice_the_upstreams_error_passes_and_one_beyond_fails(
    project: Path, store: Store
) -> None:
    fixtures = _fixtures(project, store, RULE)
    near = (TRUTH + np.sign(UPSTREAM - TRUTH) * 1.5 * UPSTREAM_ERR * 0.99).astype(np.float32)
    report = assert_parity(NAME, {"y": near}, fixtures=fixtures)
    (judged,) = report.oracle
    assert judged.ok and judged.reference_error == pytest.approx(UPSTREAM_ERR)
    far = TRUTH.astype(np.float32).copy()
    far[3] += np.float32(3 * UPSTREAM_ERR)  # inside the rule's max 0.1, beyond the oracle's
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"y": far}, fixtures=fixtures)
    text = str(info.value)
    assert "(1 problem)" in text
    assert "oracle: y: max_abs(candidate, oracle) " in text
    assert f"above 2 x max_abs(reference, oracle) {UPSTREAM_ERR:.3g} + floor 0" in text
    assert f"(oracle {ORACLE})" in text
    assert not info.value.report.oracle[0].ok


def test_an_oracle_that_lacks_an_array_is_a_registry_error(project: Path, store: Store) -> None:
    with pytest.raises(RegistryError, match="holds no array 'x'"):
        oracle.judge(Oracle(ORACLE, "rms", 2.0), {"y": TRUTH}, {"x": TRUTH}, {"x": TRUTH})
    fixtures = _fixtures(
        project,
        store,
        {**RULE, "oracle": {**RULE["oracle"], "record": "port/none.npz"}},  # type: ignore[dict-item]
    )
    with pytest.raises(Exception, match=r"port/none\.npz"):
        assert_parity(NAME, {"y": UPSTREAM}, fixtures=fixtures)


def _reference(metric: str, truth: np.ndarray, values: np.ndarray) -> float:
    """The error from its definition, in float64, for finite values."""
    d = values.astype(np.float64) - truth
    if metric == "max_abs":
        return float(np.max(np.abs(d)))
    if metric == "mean_abs":
        return float(np.mean(np.abs(d)))
    return float(math.sqrt(float(np.mean(d * d))))


FINITE = hnp.arrays(np.float64, 16, elements=st.floats(-1e3, 1e3))


@given(
    truth=FINITE,
    ref=FINITE,
    cand=FINITE,
    metric=st.sampled_from(["max_abs", "mean_abs", "rms"]),
    factor=st.floats(0, 8),
    floor=st.floats(0, 1),
)
def test_the_judgement_is_the_inequality_of_its_definition(
    truth: np.ndarray,
    ref: np.ndarray,
    cand: np.ndarray,
    metric: str,
    factor: float,
    floor: float,
) -> None:
    (j,) = oracle.judge(Oracle("o", metric, factor, floor), {"a": truth}, {"a": ref}, {"a": cand})
    c, r = _reference(metric, truth, cand), _reference(metric, truth, ref)
    assert j.candidate_error == pytest.approx(c, rel=1e-9, abs=1e-12)
    assert j.reference_error == pytest.approx(r, rel=1e-9, abs=1e-12)
    bound = factor * r + floor
    if abs(c - bound) > 1e-9 * max(1.0, bound):  # away from the edge, the verdicts agree
        assert j.ok == (c <= bound)


def test_a_nan_or_an_unmatched_infinity_in_the_candidate_never_passes() -> None:
    truth = np.array([1.0, np.inf])
    for bad in (np.array([np.nan, np.inf]), np.array([1.0, -np.inf]), np.array([1.0, 3e38])):
        (j,) = oracle.judge(
            Oracle("o", "max_abs", 1e9, 1e9), {"a": truth}, {"a": truth}, {"a": bad}
        )
        assert not j.ok, bad
