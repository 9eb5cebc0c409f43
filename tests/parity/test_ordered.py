"""An ordered record: the first intermediate that diverges, and every one before it held."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import ParityError, assert_parity
from fixture_store.registry.files import write_family

NAME = "port/activations.npz"
RNG = np.random.default_rng(1)
# A model's activations in the order it computes them (blocks.10 after blocks.9), and its output.
ORDER = ["embed", *(f"blocks.{i}" for i in range(12)), "norm"]
ARRAYS = {name: RNG.standard_normal((2, 8)).astype(np.float32) for name in [*ORDER, "logits"]}
TOLERANCE = {
    "metric": "max_abs",
    "max": 1e-6,
    "why": "the outputs are the upstream's to 1e-6",
    "intermediates": {
        "order": ["embed", "blocks.*", "norm"],
        "metric": "rms",
        "max": 1e-3,
        "why": "activations drift within the upstream's own run-to-run RMS",
    },
}


@pytest.fixture
def fixtures(project: Path, store: Store) -> Fixtures:
    path = project / "activations.npz"
    np.savez(path, **ARRAYS)  # type: ignore[arg-type]
    ingest.add(store, registry_mod.load(project), path, name=NAME, kind="array")
    registry = registry_mod.load(project)
    records = dict(registry.families["port"].records)
    raw = {**records[NAME].to_json(), "tolerance": TOLERANCE}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="t")
    write_family(registry, "port", records.values())
    return Fixtures(store, registry_mod.load(project))


def _diverging_from(index: int) -> dict[str, np.ndarray]:
    """The port's activations: exact up to ORDER[index], then off by more at every layer."""
    out = dict(ARRAYS)
    for k, name in enumerate(ORDER[index:], 1):
        out[name] = ARRAYS[name] + np.float32(0.01 * k)
    out["logits"] = ARRAYS["logits"] + np.float32(1.0)
    return out


def test_a_failure_names_the_first_divergent_intermediate_not_the_worst(
    fixtures: Fixtures,
) -> None:
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, _diverging_from(4), fixtures=fixtures)  # blocks.3
    lines = str(info.value).splitlines()
    assert lines[1] == (
        "first divergence: blocks.3 (intermediate 5 of 14 in order); "
        "the 4 before it held (embed, blocks.0, blocks.1, blocks.2)"
    )
    assert lines[2].startswith("first divergent array: blocks.3 float32[2, 8]: rms of a-b 0.01")
    assert lines[2].endswith(
        "(why this rule: activations drift within the upstream's own run-to-run RMS)"
    )
    assert lines[3] == "  tolerance: rms <= 0.001"
    divergence = info.value.report.divergence
    assert divergence is not None
    assert divergence.held == ("embed", "blocks.0", "blocks.1", "blocks.2")
    assert divergence.order == tuple(ORDER)  # blocks.10 after blocks.9, not after blocks.1


def test_intermediates_and_outputs_take_their_own_rules(fixtures: Fixtures) -> None:
    within = {n: a + np.float32(5e-4) if n in ORDER else a for n, a in ARRAYS.items()}
    assert assert_parity(NAME, within, fixtures=fixtures).ok  # rms 5e-4 <= 1e-3
    out = {**within, "logits": ARRAYS["logits"] + np.float32(5e-4)}  # max_abs 5e-4 > 1e-6
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, out, fixtures=fixtures)
    text = str(info.value)
    assert text.splitlines()[1] == (
        "every intermediate held (14 of 14, in order); the outputs diverge: logits"
    )
    assert "worst array: logits float32[2, 8]" in text
    assert "(why this rule: the outputs are the upstream's to 1e-6)" in text


def test_a_missing_intermediate_is_where_parity_breaks(fixtures: Fixtures) -> None:
    given = dict(ARRAYS)
    del given["blocks.0"]
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, given, fixtures=fixtures)
    text = str(info.value)
    assert (
        "first divergence: blocks.0 (intermediate 2 of 14 in order); the 1 before it held" in text
    )
    assert "missing: ['blocks.0']" in text


def test_the_first_intermediate_diverging_says_so(fixtures: Fixtures) -> None:
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, _diverging_from(0), fixtures=fixtures)
    assert str(info.value).splitlines()[1] == (
        "first divergence: embed (intermediate 1 of 14 in order); it is the first in order"
    )
