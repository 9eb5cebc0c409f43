"""The stat check of a warm verify (``fixture_store.objects.statcheck``): every object's four
proved stats compared, the second half of a long list by a second process beside this one,
and any failure of that process a miss, never a pass."""

from __future__ import annotations

import array
import hashlib
import os
import sys
from pathlib import Path

import pytest

from fixture_store.objects import statcheck

COUNT = 12


def _objects(root: Path) -> tuple[str, array.array[int]]:
    """``COUNT`` object files under ``root``'s shard folders, sorted by digest, and their stats."""
    hexes = sorted(hashlib.sha256(bytes([i])).hexdigest() for i in range(COUNT))
    stats = array.array("q")
    for hexpart in hexes:
        path = root / hexpart[:2] / hexpart[2:]
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(hexpart.encode())
        st = os.lstat(path)
        stats.extend((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return "".join(hexes), stats


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lists of two objects or more are cut in two, whatever the machine's cores."""
    monkeypatch.setattr(statcheck, "SPLIT_AT", 2)
    monkeypatch.setattr(statcheck, "_cores", lambda: 2)


@pytest.mark.usefixtures("split")
@pytest.mark.parametrize("at", [0, COUNT // 2 - 1, COUNT // 2, COUNT - 1])
@pytest.mark.parametrize("field", range(4))
def test_each_stat_is_compared_in_either_half(tmp_path: Path, at: int, field: int) -> None:
    objects, stats = _objects(tmp_path)
    assert statcheck.holds(str(tmp_path), objects, stats)
    other = array.array("q", stats)
    other[4 * at + field] += 1
    assert not statcheck.holds(str(tmp_path), objects, other)
    assert not statcheck.matches(str(tmp_path), objects, other)


@pytest.mark.usefixtures("split")
@pytest.mark.parametrize("at", [0, COUNT - 1])
def test_a_removed_object_in_either_half_is_a_miss(tmp_path: Path, at: int) -> None:
    objects, stats = _objects(tmp_path)
    hexpart = objects[at * 64 : (at + 1) * 64]
    (tmp_path / hexpart[:2] / hexpart[2:]).unlink()
    assert not statcheck.holds(str(tmp_path), objects, stats)


@pytest.mark.usefixtures("split")
@pytest.mark.parametrize(
    "executable",
    [
        pytest.param("/bin/false", id="exits-at-once"),
        pytest.param("/bin/cat", id="echoes-its-input"),
    ],
)
def test_a_child_that_does_not_answer_yes_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executable: str
) -> None:
    objects, stats = _objects(tmp_path)
    monkeypatch.setattr(sys, "executable", executable)
    assert not statcheck.holds(str(tmp_path), objects, stats)


@pytest.mark.usefixtures("split")
def test_a_child_that_cannot_start_leaves_the_check_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects, stats = _objects(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-interpreter"))
    assert statcheck.holds(str(tmp_path), objects, stats)
    other = array.array("q", stats)
    other[-1] += 1
    assert not statcheck.holds(str(tmp_path), objects, other)


def test_a_shard_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    objects, stats = _objects(tmp_path / "real")
    (tmp_path / "store").mkdir()
    for shard in {objects[i : i + 2] for i in range(0, len(objects), 64)}:
        (tmp_path / "store" / shard).symlink_to(tmp_path / "real" / shard)
    assert statcheck.matches(str(tmp_path / "real"), objects, stats)
    assert not statcheck.matches(str(tmp_path / "store"), objects, stats)
