"""The video stage classifies a clip frame by frame against its record; accepting a changed
description rewrites only the description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fixture_store.objects.store import Store
from fixture_store.parity import parts
from fixture_store.regenerate import regenerate
from fixture_store.registry import LocalSource, load
from tests.support.clips import NAME, edit_record, project, shifted
from tests.support.regen_project import PYTHON


@pytest.fixture
def clip(tmp_path: Path) -> tuple[Path, Store]:
    return project(tmp_path)


def _again(
    root: Path,
    store: Store,
    tmp_path: Path,
    *,
    accept: bool = False,
    part: parts.Part = parts.Part.ALL,
) -> dict[str, Any]:
    report = regenerate(
        root, store, "video", scratch=tmp_path / "again", accept=accept, python=PYTHON
    )
    return report.to_json(part)


def test_the_same_decoder_decodes_bit_identical(clip: tuple[Path, Store], tmp_path: Path) -> None:
    doc = _again(*clip, tmp_path)
    assert doc["counts"]["bit-identical"] == 1 and doc["ok"]
    assert doc["details"]["pinned_decoder"]["av"]


def test_frames_are_classified_one_by_one(clip: tuple[Path, Store], tmp_path: Path) -> None:
    root, store = clip
    meta = load(root).get(NAME).metadata or {}
    digests, blocks = list(meta["frame_digests"]), list(meta["frame_blocks"])
    digests[2] = digests[7] = "sha256:" + "2" * 64
    blocks[7] = shifted(blocks[7], 3.0, only=0)
    edit_record(root, NAME, frame_digests=digests, frame_blocks=blocks)
    doc = _again(root, store, tmp_path)
    [art] = doc["artifacts"]
    assert art["verdict"] == "drift" and not doc["ok"]
    by_frame = {m["path"]: m["verdict"] for m in art["members"]}
    assert by_frame == {"frame 2": "within-tolerance", "frame 7": "drift"}
    assert "1 of 12 frames drift: frame 7" in art["reason"]
    assert doc["file_counts"]["bit-identical"] == 10  # counted frame by frame
    # The tracked file: the frame that passes is not listed, whichever way it passed.
    tracked = _again(root, store, tmp_path, part=parts.Part.TRACKED)
    [art] = tracked["artifacts"]
    assert [(m["path"], m["verdict"]) for m in art["members"]] == [("frame 7", "drift")]
    assert tracked["file_counts"]["pass"] == 11 and tracked["file_counts"]["drift"] == 1


def test_a_changed_header_is_drift(clip: tuple[Path, Store], tmp_path: Path) -> None:
    root, store = clip
    edit_record(root, NAME, frame_rate="25")
    [art] = _again(root, store, tmp_path)["artifacts"]
    assert art["verdict"] == "drift" and "frame_rate '25' -> '24'" in art["reason"]


def test_accepting_rewrites_the_description_only(clip: tuple[Path, Store], tmp_path: Path) -> None:
    root, store = clip
    before = load(root).get(NAME)
    edit_record(root, NAME, decoder={"av": "0.0.0", "ffmpeg": "0.0"})
    assert _again(root, store, tmp_path, accept=True)["accepted"] == [NAME]
    after = load(root).get(NAME)
    assert after == before  # decoder back to the pinned one; digest and source unchanged
    assert isinstance(after.source, LocalSource)
