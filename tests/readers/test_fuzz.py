"""Bounded fuzzing of the archive, NPY and safetensors readers: only typed errors may escape."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import fuzzing

FAST_EXAMPLES = int(os.environ.get("FIXTURE_STORE_FUZZ_EXAMPLES", "150"))
TARGETS = ("npy", "tar", "tar.lz4", "tar.zst", "zip", "safetensors")
SEEDS = fuzzing.seeds()


@pytest.mark.parametrize("target", TARGETS)
def test_seeds_are_accepted(tmp_path: Path, target: str) -> None:
    # The fuzz seeds are valid inputs: the mutations start from something the reader accepts.
    from fixture_store.readers import archives, safetensors
    from fixture_store.readers import npy as arrays

    for data in SEEDS[target]:
        if target == "safetensors":
            path = tmp_path / "seed.safetensors"
            path.write_bytes(data)
            assert len(safetensors.open_tensors(path, fuzzing.FUZZ_LIMITS)) > 0
        elif target == "npy":
            import io

            arrays.read_npy(io.BytesIO(data), fuzzing.FUZZ_LIMITS)
        else:
            path = tmp_path / f"seed.{target}"
            path.write_bytes(data)
            archives.scan(path, fuzzing.FUZZ_LIMITS)


@pytest.mark.parametrize("target", TARGETS)
@settings(
    max_examples=FAST_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed_index=st.integers(0, 2), rng_seed=st.integers(0, 2**32 - 1))
def test_mutated_inputs_raise_only_typed_errors(
    tmp_path: Path, target: str, seed_index: int, rng_seed: int
) -> None:
    corpus = SEEDS[target]
    data = fuzzing.mutate(corpus[seed_index % len(corpus)], random.Random(rng_seed))
    fuzzing.targets(tmp_path)[target](data)


@pytest.mark.parametrize("target", TARGETS)
@settings(
    max_examples=FAST_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes_raise_only_typed_errors(tmp_path: Path, target: str, data: bytes) -> None:
    fuzzing.targets(tmp_path)[target](data)


@pytest.mark.slow
@pytest.mark.parametrize("half", [0, 1])
def test_fuzz_campaign(half: int, campaign_summary: list[str]) -> None:
    """The campaign's time (FIXTURE_STORE_FUZZ_SECONDS, 120 s) in two halves of their own seeds,
    so the two run beside each other under xdist."""
    seconds = float(os.environ.get("FIXTURE_STORE_FUZZ_SECONDS", "120")) / 2
    seed = int(os.environ.get("FIXTURE_STORE_FUZZ_SEED", "1")) * 2 + half
    counts = fuzzing.campaign(seconds, seed=seed)
    campaign_summary.append(f"fuzz campaign (seed {seed}): {counts} total {sum(counts.values())}")
    assert all(n > 0 for n in counts.values())
