"""Encoded video under a limits profile: the header is checked before any frame is decoded.

A clip is described by what its decoder makes of it (a
:class:`~fixture_store.registry.video.Description`, part of its record): container, codec,
pixel format, size, frame count, frame rate, time base, the decoder's versions, and per frame
the SHA-256 of its RGB24 pixels (and their BLAKE3, for fast re-checks) with its block means: the
mean of each colour over a 4 x 4 grid of blocks. RGB24 rather than the native pixel format
because it is what a test consumes (``frames`` hands out RGB24 arrays), so the digest covers the
colour conversion as well as the decoding; the block means let a frame from another decoder be
judged under the record's tolerance, where its digest may legitimately differ. (Whole-frame
means are too weak for that: they accept most frames of a heavily compressed copy of a clip;
4 x 4 block means refuse every one of them, see docs/video.md.) A frame from another decoder
is judged by :func:`match`, through the one array comparison every tolerance goes through.

Decoding is PyAV's (the ``video`` extra), imported only when a clip is opened. Reads through
:func:`open_clip` are bounded three ways: container bytes (a stream that never ends stops at
``video_bytes``), the header's claims (``video_pixels``, ``video_frames``,
``video_decoded_bytes``, refused before the first frame), and the frames actually decoded
(refused one past the limit, whatever the header said). Nothing is written anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3
import numpy as np

from fixture_store._extras import require
from fixture_store.errors import HostileContentError
from fixture_store.limits import Limits
from fixture_store.numerics.arrays import judge_arrays
from fixture_store.registry import ArrayTolerance, Metric
from fixture_store.registry.video import (
    BLOCK_CHARS,
    CHANNELS,
    FRAME_FORMAT,
    GRID,
    Decoder,
    Description,
    Header,
    block_means,
    encode_blocks,
)

if TYPE_CHECKING:
    import av.container
    import av.video.stream

# The container format names an extension promises (PyAV's ``format.name`` lists aliases).
EXTENSION_FORMATS: Mapping[str, str] = {
    ".mp4": "mp4",
    ".m4v": "mp4",
    ".mov": "mov",
    ".mkv": "matroska",
    ".webm": "webm",
    ".avi": "avi",
    ".y4m": "yuv4mpegpipe",
}
# What a frame from another decoder is judged under when its record names no tolerance: its
# block means within one level of 255.
DEFAULT_TOLERANCE = ArrayTolerance(atol=1.0, rtol=0.0)


class FrameMatch(StrEnum):
    """How a decoded frame compares with its recorded description."""

    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"


def match(
    desc: Description, index: int, digest: str, blocks: str, tolerance: ArrayTolerance
) -> FrameMatch:
    """How frame ``index`` with ``digest`` and block means ``blocks`` compares with ``desc``'s:
    its block means judged under ``tolerance`` like any array (every metric), except that
    ``exact`` wants the frame itself bit-identical, not only its block means."""
    if digest == desc.frame_digests[index]:
        return FrameMatch.IDENTICAL
    if tolerance.metric is Metric.EXACT:
        return FrameMatch.DRIFT
    judged = judge_arrays(
        np.array(block_means(desc.frame_blocks[index])),
        np.array(block_means(blocks)),
        tolerance,
    )
    return FrameMatch.WITHIN if judged.ok else FrameMatch.DRIFT


def frame_digest(rgb: np.ndarray[Any, Any]) -> str:
    return "sha256:" + hashlib.sha256(np.ascontiguousarray(rgb).data).hexdigest()


def frame_blake3(rgb: np.ndarray[Any, Any]) -> str:
    return str(blake3.blake3(np.ascontiguousarray(rgb).data).hexdigest())


def frame_blocks(rgb: np.ndarray[Any, Any]) -> str:
    """The frame's block means, written as the record holds them (see the module's docstring)."""
    h, w = rgb.shape[:2]
    out = []
    for i in range(GRID):
        rows = rgb[h * i // GRID : h * (i + 1) // GRID]
        for j in range(GRID):
            block = rows[:, w * j // GRID : w * (j + 1) // GRID]
            for mean in block.reshape(-1, CHANNELS).mean(axis=0, dtype=np.float64):
                out.append(encode_blocks([float(mean)]))
    return "".join(out)


class _Bounded:
    """A read-only file that refuses to serve a byte past position ``limit``.

    Positions, not bytes read, are bounded: a demuxer seeks (an MP4 index at the end is read
    first), so it may read some bytes twice; a stream that never ends still stops at ``limit``.
    """

    def __init__(self, raw: BinaryIO, limit: int, artifact: str) -> None:
        self._raw, self._limit, self._artifact, self.position = raw, limit, artifact, 0

    def read(self, n: int = -1) -> bytes:
        allowed = self._limit + 1 - self.position
        if allowed <= 0:
            raise self._past()
        data = self._raw.read(allowed if n is None or n < 0 else min(n, allowed))
        self.position += len(data)
        if self.position > self._limit:
            raise self._past()
        return data

    def _past(self) -> HostileContentError:
        return HostileContentError(
            self._artifact, "video_bytes", f"the container goes on past {self._limit:,} bytes"
        )

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = self._raw.seek(offset, whence)
        return self.position

    def tell(self) -> int:
        return self.position


def _import_av() -> Any:
    require("video", for_what="decoding a video clip")
    import av

    return av


@dataclass
class Clip:
    """An open container whose header passed the limits; :meth:`rgb_frames` decodes it."""

    artifact: str
    header: Header
    limits: Limits
    _container: av.container.InputContainer
    _stream: av.video.stream.VideoStream

    def rgb_frames(self) -> Iterator[np.ndarray[Any, Any]]:
        """Each frame as a (height, width, 3) uint8 RGB24 array, one at a time."""
        av = _import_av()
        count = 0
        try:
            for frame in self._container.decode(self._stream):
                count += 1
                if count > self.limits.video_frames:
                    raise _refuse(
                        self, "video_frames", f"decodes past {self.limits.video_frames:,} frames"
                    )
                if count * self.header.frame_bytes > self.limits.video_decoded_bytes:
                    raise _refuse(
                        self,
                        "video_decoded_bytes",
                        f"decodes past {self.limits.video_decoded_bytes:,} bytes of RGB24",
                    )
                if (frame.width, frame.height) != (self.header.width, self.header.height):
                    raise _refuse(
                        self,
                        "video_geometry",
                        f"frame {count - 1} is {frame.width}x{frame.height}, the header says "
                        f"{self.header.width}x{self.header.height}",
                    )
                yield frame.to_ndarray(format=FRAME_FORMAT)
        except av.error.FFmpegError as e:
            raise _refuse(
                self, "video_decode", f"cannot be decoded after {count} frame(s): {e}"
            ) from e

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> Clip:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _refuse(clip: Clip | str, rule: str, message: str) -> HostileContentError:
    artifact = clip if isinstance(clip, str) else clip.artifact
    return HostileContentError(artifact, rule, f"the video {message}")


def open_clip(
    raw: BinaryIO,
    *,
    artifact: str,
    size: int,
    limits: Limits,
    container: str | None = None,
) -> Clip:
    """Open the container in ``raw`` (``size`` bytes) and check its header against ``limits``;
    ``container`` is the format the record (or the file's extension) promises."""
    if size > limits.video_bytes:
        raise _refuse(artifact, "video_bytes", f"is {size:,} bytes, over {limits.video_bytes:,}")
    av = _import_av()
    bounded = _Bounded(raw, min(size, limits.video_bytes), artifact)
    try:
        handle = av.open(bounded, mode="r")
    except av.error.FFmpegError as e:
        raise _refuse(
            artifact, "video_container", f"is not a readable video container ({e})"
        ) from e
    try:
        if not handle.streams.video:
            raise _refuse(artifact, "video_stream", "container holds no video stream")
        stream = handle.streams.video[0]
        header = _header(handle, stream)
        _check_header(artifact, header, limits, container)
    except BaseException:
        handle.close()
        raise
    return Clip(artifact, header, limits, handle, stream)


def _header(handle: Any, stream: Any) -> Header:
    ctx = stream.codec_context
    rate = stream.average_rate or stream.guessed_rate or 0
    return Header(
        str(handle.format.name),
        str(ctx.name),
        str(ctx.pix_fmt),
        int(ctx.width),
        int(ctx.height),
        int(stream.frames or 0),
        str(Fraction(rate)),
        str(Fraction(stream.time_base or 0)),
    )


def _check_header(artifact: str, header: Header, limits: Limits, container: str | None) -> None:
    names = header.container.split(",")
    if container is not None and container not in names and container != header.container:
        raise _refuse(
            artifact,
            "video_container",
            f"container is {header.container!r}, not the promised {container!r}",
        )
    if header.width <= 0 or header.height <= 0:
        raise _refuse(artifact, "video_geometry", f"header says {header.width}x{header.height}")
    if header.pixels > limits.video_pixels:
        raise _refuse(
            artifact,
            "video_pixels",
            f"header claims {header.width}x{header.height} frames, over "
            f"{limits.video_pixels:,} pixels",
        )
    if header.frames > limits.video_frames:
        raise _refuse(
            artifact,
            "video_frames",
            f"header claims {header.frames:,} frames, over {limits.video_frames:,}",
        )
    if header.frames * header.frame_bytes > limits.video_decoded_bytes:
        raise _refuse(
            artifact,
            "video_decoded_bytes",
            f"header claims {header.frames:,} frames of {header.width}x{header.height}, "
            f"{header.frames * header.frame_bytes:,} bytes decoded, over "
            f"{limits.video_decoded_bytes:,}",
        )


def container_for(filename: str) -> str | None:
    """The container format a file name's extension promises (``None``: no promise)."""
    dot = filename.rfind(".")
    return EXTENSION_FORMATS.get(filename[dot:].lower()) if dot >= 0 else None


def describe(
    raw: BinaryIO, *, artifact: str, size: int, limits: Limits, filename: str
) -> Description:
    """Decode the whole clip and describe it (what a generator records)."""
    with open_clip(
        raw, artifact=artifact, size=size, limits=limits, container=container_for(filename)
    ) as clip:
        digests: list[str] = []
        blocks: list[str] = []
        fast: list[str] = []
        for rgb in clip.rgb_frames():
            digests.append(frame_digest(rgb))
            blocks.append(frame_blocks(rgb))
            fast.append(frame_blake3(rgb))
        header = clip.header
    if not digests:
        raise _refuse(artifact, "video_frames", "decodes to no frames")
    return Description(header, Decoder.current(), tuple(digests), tuple(blocks), tuple(fast))


__all__ = [
    "BLOCK_CHARS",
    "CHANNELS",
    "DEFAULT_TOLERANCE",
    "FRAME_FORMAT",
    "Clip",
    "Decoder",
    "Description",
    "FrameMatch",
    "Header",
    "block_means",
    "container_for",
    "describe",
    "encode_blocks",
    "frame_blake3",
    "frame_blocks",
    "frame_digest",
    "match",
    "open_clip",
]
