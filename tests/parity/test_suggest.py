"""The calibration's arithmetic: one significant digit rounded up, the margin, the dtype floor."""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.parity.suggest import accept, dtype_floor, propose, round_up, suggest
from fixture_store.registry.tolerance import Metric


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        (2.4e-6, 3e-6),
        (3e-6, 3e-6),
        (9.1e-4, 1e-3),
        (0.0007, 0.0007),
        (1.0000001, 2.0),
        (2.0000000000000018e-3, 2e-3),  # float noise past 12 digits is not a larger error
        (0.0, 0.0),
    ],
)
def test_round_up_keeps_one_significant_digit(value: float, rounded: float) -> None:
    assert round_up(value) == rounded


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_round_up_is_the_least_one_digit_number_not_below_the_value(value: float) -> None:
    up = round_up(value)
    digits = Decimal(repr(up)).normalize().as_tuple().digits
    assert up >= value * (1 - 1e-11) and len(digits) == 1
    step = 10.0 ** math.floor(math.log10(up))
    assert up - step < value * (1 + 1e-12)  # one step less would be below it


def test_propose_is_twice_the_observed_never_below_the_dtype_floor() -> None:
    assert propose(3.1e-4, Metric.RMS, "float32") == 7e-4  # 6.2e-4, rounded up
    assert propose(1e-9, Metric.MAX_ABS, "float32") == 1e-5  # float32's default atol
    assert propose(1e-9, Metric.MAX_REL, "float64") == 1e-7  # float64's default rtol
    assert propose(0.0, Metric.MAX_ABS, "int64") == 0.0  # integers: exact
    assert propose(2.5, Metric.ULP, "float32") == 5.0 and propose(0.0, Metric.ULP, "float32") == 1
    assert propose(math.inf, Metric.RMS, "float32") is None
    assert dtype_floor(Metric.COSINE, "float32") == 9e-13  # (1.3e-6)**2 / 2, rounded up


def test_accept_writes_nothing_over_a_reference_that_changed_since_it_was_observed(
    project: Path, store: Store
) -> None:
    np.savez(project / "ref.npz", x=np.ones(4))
    np.savez(project / "run.npz", x=np.ones(4) + 1e-3)
    ingest.add(
        store, registry_mod.load(project), project / "ref.npz", name="m/ref.npz", kind="array"
    )
    registry = registry_mod.load(project)
    found = suggest(Fixtures(store, registry), "m/ref.npz", [project / "run.npz"])
    before = (project / "provenance" / "m.json").read_text()
    moved = dataclasses.replace(found, digest="sha256:" + "0" * 64)
    with pytest.raises(UsageError) as info:
        accept(registry, moved)
    assert "changed since the candidates were compared with it" in str(info.value)
    assert (project / "provenance" / "m.json").read_text() == before
    assert "m/ref.npz (after)" in accept(registry, found)
