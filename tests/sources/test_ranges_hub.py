"""Verified partial fetch from a hub source, against the loopback Hub and its CDN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from fixture_store.errors import IntegrityError
from fixture_store.sources import SourceError
from tests.sources.test_hub import COMMIT, hub, hub_src  # noqa: F401 - the hub fixture
from tests.sources.test_ranges import WEIGHTS, _project
from tests.support.hubserver import HubState


def _last(fixtures: object) -> str:
    """The tensor whose bytes come last in the file."""
    arrays = fixtures.record("ckpt/big").arrays  # type: ignore[attr-defined]
    return max(WEIGHTS, key=lambda k: int(arrays[k]["offset"]))


def test_one_tensor_comes_by_a_range_of_the_hub_file(
    hub: HubState,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    data = save(WEIGHTS)
    hub.add("org/tiny", "model.safetensors", data, lfs=True)
    fixtures, _ = _project(tmp_path, hub_src("model.safetensors"))
    np.testing.assert_array_equal(fixtures.tensor("ckpt/big", "small"), WEIGHTS["small"])
    ranges = [h.get("Range") or h.get("range") for m, _p, h in hub.requests if m == "GET"]
    assert ranges and all(r and r.startswith("bytes=") for r in ranges)
    assert not fixtures.store.has(fixtures.record("ckpt/big").object)


@pytest.mark.parametrize(
    ("fault", "error", "said"),
    [
        ("lie", IntegrityError, r"do not have the tensor's sha256"),
        # a body shorter than its Content-Length: the client sees a cut connection
        ("truncate", SourceError, r"the range request failed: .*received \d+ bytes"),
    ],
)
def test_a_lying_or_short_hub_answer_is_refused(
    hub: HubState,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    fault: str,
    error: type[Exception],
    said: str,
) -> None:
    data = save(WEIGHTS)
    served = save({k: v + 1 for k, v in WEIGHTS.items()}) if fault == "lie" else data
    hub.add("org/tiny", "model.safetensors", served, lfs=True, fault=fault, announce=data)
    fixtures, _ = _project(tmp_path, hub_src("model.safetensors"))
    key = _last(fixtures)
    with pytest.raises(error, match=rf"ckpt/big: .*{said}"):
        fixtures.tensor("ckpt/big", key)


def test_a_hub_answering_for_another_commit_reads_no_range(
    hub: HubState,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    hub.add("org/tiny", "model.safetensors", save(WEIGHTS), lfs=True)
    hub.answered_commit = "f" * 40
    fixtures, _ = _project(tmp_path, hub_src("model.safetensors"))
    with pytest.raises(SourceError, match=rf"ckpt/big: .*not the pinned {COMMIT}"):
        fixtures.tensor("ckpt/big", "small")
    assert not [m for m, _p, _h in hub.requests if m == "GET"]
