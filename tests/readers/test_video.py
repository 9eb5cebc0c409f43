"""The video reader under its limits: hostile containers are refused with the rule named, before
their frames are decoded, and a stream that never ends stops at a limit."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np
import pytest

from fixture_store import limits
from fixture_store.errors import HostileContentError
from fixture_store.readers.video import (
    DEFAULT_TOLERANCE,
    Decoder,
    Description,
    FrameMatch,
    Header,
    block_means,
    container_for,
    describe,
    encode_blocks,
    match,
    open_clip,
)
from fixture_store.registry import ArrayTolerance, Metric, Where
from tests.support.clips import Endless, as_binary, encode

TINY = limits.tighten(limits.DEFAULT, video_frames=50, video_bytes=4 << 20)


def _describe(path: Path, profile: limits.Limits = limits.DEFAULT) -> Description:
    with open(path, "rb") as f:
        return describe(
            f, artifact="video/x", size=os.path.getsize(path), limits=profile, filename=path.name
        )


def _refused(path: Path, rule: str, profile: limits.Limits = limits.DEFAULT) -> str:
    with pytest.raises(HostileContentError) as e:
        _describe(path, profile)
    assert e.value.rule == rule, e.value.message
    return e.value.message


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return encode(tmp_path_factory.mktemp("clips") / "clip.mp4")


def test_a_clip_is_described_frame_by_frame(clip: Path) -> None:
    d = _describe(clip)
    assert (d.frames, d.header.width, d.header.height, d.header.pixel_format) == (
        12,
        64,
        48,
        "yuv420p",
    )
    assert len(set(d.frame_digests)) == 12 and all(
        len(block_means(b)) == 48 for b in d.frame_blocks
    )
    assert Description.from_json(d.to_json(), Where()) == d


def test_a_clip_read_through_seeks_is_bounded_by_position_not_bytes_read(tmp_path: Path) -> None:
    # Its index (moov) is at the end, past the demuxer's first buffer: read first, then the
    # frames, so more bytes are read than the file holds, and none past its end.
    big = encode(tmp_path / "big.mp4", frames=30, width=320, height=240, noise=128)
    assert big.stat().st_size > 1 << 19 and big.read_bytes().rindex(b"moov") > 1 << 19
    assert _describe(big).frames == 30


def test_a_truncated_mp4_is_refused(clip: Path, tmp_path: Path) -> None:
    data = clip.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])  # the index (moov) is at the end: unreadable
    assert "not a readable video container" in _refused(cut, "video_container")


def test_a_truncated_faststart_mp4_is_refused_naming_how_far_it_decoded(tmp_path: Path) -> None:
    full = encode(tmp_path / "fast.mp4", frames=24, options={"movflags": "faststart"})
    cut = tmp_path / "fastcut.mp4"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size * 2 // 3])  # index intact
    message = _refused(cut, "video_decode")
    decoded = int(re.search(r"cannot be decoded after (\d+) frame", message).group(1))  # type: ignore[union-attr]
    assert 0 < decoded < 24


def test_a_header_claiming_65536_squared_is_refused_before_decoding(tmp_path: Path) -> None:
    y4m = tmp_path / "huge.y4m"
    y4m.write_bytes(b"YUV4MPEG2 W65536 H65536 F30:1 C420jpeg\nFRAME\n" + bytes(1000))
    _refused(y4m, "video_container")  # FFmpeg itself refuses a frame that large
    big = tmp_path / "big.y4m"
    big.write_bytes(b"YUV4MPEG2 W8192 H8192 F30:1 C420jpeg\nFRAME\n" + bytes(1000))
    assert "8192x8192" in _refused(big, "video_pixels")


def test_a_header_past_the_profile_is_refused_before_any_frame(clip: Path) -> None:
    message = _refused(clip, "video_pixels", limits.tighten(limits.DEFAULT, video_pixels=64 * 47))
    assert "64x48" in message
    _refused(clip, "video_frames", limits.tighten(limits.DEFAULT, video_frames=11))
    _refused(
        clip, "video_decoded_bytes", limits.tighten(limits.DEFAULT, video_decoded_bytes=9216 * 11)
    )


def test_a_container_that_is_not_what_its_extension_says(clip: Path, tmp_path: Path) -> None:
    npy = tmp_path / "frames.mp4"
    np.save(tmp_path / "a.npy", np.zeros((4, 4), np.uint8))
    npy.write_bytes((tmp_path / "a.npy").read_bytes())
    _refused(npy, "video_container")
    mkv = tmp_path / "clip.mkv"
    mkv.write_bytes(clip.read_bytes())
    assert "not the promised 'matroska'" in _refused(mkv, "video_container")
    assert container_for("x.MP4") == "mp4" and container_for("x.bin") is None


def test_a_stream_that_never_ends_stops_at_a_limit() -> None:
    endless = Endless()
    with pytest.raises(HostileContentError) as e:
        describe(
            as_binary(endless),
            artifact="video/endless",
            size=1 << 40,
            limits=TINY,
            filename="e.y4m",
        )
    assert e.value.rule == "video_bytes"  # the container is longer than the profile allows
    endless = Endless()
    with (
        open_clip(
            as_binary(endless), artifact="video/endless", size=TINY.video_bytes, limits=TINY
        ) as c,
        pytest.raises(HostileContentError) as e,
    ):
        for _ in c.rgb_frames():
            pass
    assert e.value.rule == "video_frames"  # 50 small frames come long before 4 MiB
    assert endless.served <= TINY.video_bytes + (1 << 16)


def test_a_file_object_past_its_declared_size_is_cut(clip: Path) -> None:
    data = clip.read_bytes()
    with pytest.raises(HostileContentError) as e:
        describe(
            io.BytesIO(data),
            artifact="video/x",
            size=len(data) // 4,
            limits=limits.DEFAULT,
            filename="x.mp4",
        )
    assert e.value.rule == "video_bytes"


def test_a_stream_that_grows_mid_way_is_refused_before_its_decoded_bytes_pass_the_bound(
    tmp_path: Path,
) -> None:
    small = encode(tmp_path / "small.h264", frames=3, width=64, height=48)
    large = encode(tmp_path / "large.h264", frames=3, width=320, height=240)
    grows = tmp_path / "grows.h264"  # one raw H.264 stream whose second part is 25x larger
    grows.write_bytes(small.read_bytes() + large.read_bytes())
    bound = 6 * 64 * 48 * 3  # every frame at the header's size fits
    tight = limits.tighten(limits.DEFAULT, video_decoded_bytes=bound)
    handed: list[int] = []

    def decode_all() -> None:
        with (
            open(grows, "rb") as f,
            open_clip(f, artifact="video/x", size=grows.stat().st_size, limits=tight) as c,
        ):
            handed.extend(rgb.nbytes for rgb in c.rgb_frames())

    with pytest.raises(HostileContentError) as e:
        decode_all()
    assert e.value.rule == "video_geometry" and "frame 3 is 320x240" in e.value.message
    assert sum(handed) == 3 * 64 * 48 * 3 <= bound


def _described(blocks: str) -> Description:
    header = Header("mp4", "h264", "yuv420p", 64, 48, 1, "24", "1/12288")
    return Description(header, Decoder("1", "2"), ("sha256:" + "0" * 64,), (blocks,))


OTHER_BITS = "sha256:" + "1" * 64


def _moved(blocks: str, delta: float, *, only: int | None = None) -> str:
    means = list(block_means(blocks))
    for i in range(len(means)) if only is None else (only,):
        means[i] += delta
    return encode_blocks(means)


def test_an_exact_frame_tolerance_wants_every_frame_bit_identical() -> None:
    recorded = encode_blocks([100.0] * 48)
    desc = _described(recorded)
    near = _moved(recorded, 0.5)  # within the default atol of one level
    assert match(desc, 0, OTHER_BITS, near, DEFAULT_TOLERANCE) is FrameMatch.WITHIN
    exact = ArrayTolerance(Metric.EXACT)
    assert match(desc, 0, OTHER_BITS, near, exact) is FrameMatch.DRIFT
    # Other bits with the very same block means: still not the recorded frame.
    assert match(desc, 0, OTHER_BITS, recorded, exact) is FrameMatch.DRIFT
    assert match(desc, 0, desc.frame_digests[0], recorded, exact) is FrameMatch.IDENTICAL


def test_a_frame_tolerance_is_judged_by_its_own_metric() -> None:
    recorded = encode_blocks([100.0] * 48)
    desc = _described(recorded)
    max_abs = ArrayTolerance(Metric.MAX_ABS, bound=2.0)
    assert match(desc, 0, OTHER_BITS, _moved(recorded, 1.5), max_abs) is FrameMatch.WITHIN
    assert match(desc, 0, OTHER_BITS, _moved(recorded, 2.5, only=7), max_abs) is FrameMatch.DRIFT
    mean_abs = ArrayTolerance(Metric.MEAN_ABS, bound=0.5)
    assert match(desc, 0, OTHER_BITS, _moved(recorded, 4.0, only=7), mean_abs) is (
        FrameMatch.WITHIN  # one block of 48 moved 4 levels: a mean of 1/12
    )
    assert match(desc, 0, OTHER_BITS, _moved(recorded, 1.0), mean_abs) is FrameMatch.DRIFT
