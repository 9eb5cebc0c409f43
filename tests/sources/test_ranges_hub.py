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


def test_npy_rows_come_by_the_range_of_their_chunks_of_the_hub_file(
    hub: HubState,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    from tests.sources.test_ranges_arrays import BIG, ROWS_PER_CHUNK, _file
    from tests.sources.test_ranges_arrays import _project as array_project

    data = _file("npy", {"big": BIG})
    hub.add("org/tiny", "big.npy", data, lfs=True)
    fixtures, _ = array_project(tmp_path, "npy", hub_src("big.npy"), {"big": BIG})
    rows = (ROWS_PER_CHUNK + 3, ROWS_PER_CHUNK + 9)
    np.testing.assert_array_equal(
        fixtures.tensor("ref/big.npy", "big", rows=rows), BIG[rows[0] : rows[1]]
    )
    offset = int(fixtures.record("ref/big.npy").arrays["big"]["offset"])  # type: ignore[index]
    chunk = offset + 4 * 1024 * 1024
    ranges = [h.get("Range") or h.get("range") for m, _p, h in hub.requests if m == "GET"]
    assert [r for r in ranges if r] == [f"bytes={chunk}-{chunk + 4 * 1024 * 1024 - 1}"]  # chunk 1
    assert not fixtures.store.has(fixtures.record("ref/big.npy").object)
