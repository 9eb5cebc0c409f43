"""Encoded video under a limits profile: the header is checked before any frame is decoded.

A clip is described by what its decoder makes of it (:class:`Description`): container, codec,
pixel format, size, frame count, frame rate, time base, the decoder's versions, and per frame
the SHA-256 of its RGB24 pixels (and their BLAKE3, for fast re-checks) with its block means: the
mean of each colour over a 4 x 4 grid of blocks. RGB24 rather than the native pixel format
because it is what a test consumes (``frames`` hands out RGB24 arrays), so the digest covers the
colour conversion as well as the decoding; the block means let a frame from another decoder be
judged under the record's tolerance, where its digest may legitimately differ. (Whole-frame
means are too weak for that: they accept most frames of a heavily compressed copy of a clip;
4 x 4 block means refuse every one of them, see docs/video.md.)

Block means are written compactly, one string per frame: 48 values (blocks row by row, R, G, B
in each), each ``round(mean * 16)`` as 4 hex digits, so they are exact to 1/16 of a level.

Decoding is PyAV's (the ``video`` extra), imported only when a clip is opened. Reads through
:func:`open_clip` are bounded three ways: container bytes (a stream that never ends stops at
``video_bytes``), the header's claims (``video_pixels``, ``video_frames``,
``video_decoded_bytes``, refused before the first frame), and the frames actually decoded
(refused one past the limit, whatever the header said). Nothing is written anywhere.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3
import numpy as np

from fixture_store._extras import require
from fixture_store.errors import HostileContentError
from fixture_store.limits import Limits
from fixture_store.registry import ArrayTolerance, Where

if TYPE_CHECKING:
    import av.container
    import av.video.stream

FRAME_FORMAT = "rgb24"
CHANNELS = 3
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
_HEX = re.compile(r"[0-9a-f]+")
GRID = 4
BLOCK_SCALE = 16
_BLOCK_HEX = 4
BLOCK_CHARS = GRID * GRID * CHANNELS * _BLOCK_HEX
# What a frame from another decoder is judged under when its record names no tolerance: its
# block means within one level of 255.
DEFAULT_TOLERANCE = ArrayTolerance(atol=1.0, rtol=0.0)


class FrameMatch(StrEnum):
    """How a decoded frame compares with its recorded description."""

    IDENTICAL = "bit-identical"
    WITHIN = "within-tolerance"
    DRIFT = "drift"


@dataclass(frozen=True)
class Decoder:
    """The decoder a description was made with: PyAV's version and the FFmpeg it bundles."""

    av: str
    ffmpeg: str

    @classmethod
    def current(cls) -> Decoder:
        av = _import_av()
        return cls(str(av.__version__), str(av.ffmpeg_version_info))

    @classmethod
    def from_json(cls, raw: Any, where: Where) -> Decoder:
        if not isinstance(raw, Mapping) or not all(
            isinstance(raw.get(k), str) and raw.get(k) for k in ("av", "ffmpeg")
        ):
            raise where.fail("metadata.decoder", "must be {'av': VERSION, 'ffmpeg': VERSION}")
        return cls(raw["av"], raw["ffmpeg"])

    def to_json(self) -> dict[str, str]:
        return {"av": self.av, "ffmpeg": self.ffmpeg}

    def __str__(self) -> str:
        return f"PyAV {self.av} (FFmpeg {self.ffmpeg})"


@dataclass(frozen=True)
class Header:
    """What a container says about its video stream before anything is decoded."""

    container: str
    codec: str
    pixel_format: str
    width: int
    height: int
    frames: int  # as declared; 0 when the container does not say
    frame_rate: str
    time_base: str

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def frame_bytes(self) -> int:
        return self.pixels * CHANNELS

    def to_json(self) -> dict[str, Any]:
        return {
            "container": self.container,
            "codec": self.codec,
            "pixel_format": self.pixel_format,
            "width": self.width,
            "height": self.height,
            "frames": self.frames,
            "frame_rate": self.frame_rate,
            "time_base": self.time_base,
        }


@dataclass(frozen=True)
class Description:
    """A clip as its pinned decoder decoded it: the header, the decoder, one digest per frame."""

    header: Header
    decoder: Decoder
    frame_digests: tuple[str, ...]
    frame_blocks: tuple[str, ...]
    # BLAKE3 of the same RGB24 bytes, beside the SHA-256 for fast re-checking (may be absent).
    frame_blake3: tuple[str, ...] = ()
    frame_format: str = FRAME_FORMAT

    @property
    def frames(self) -> int:
        return len(self.frame_digests)

    @property
    def decoded_bytes(self) -> int:
        return self.frames * self.header.frame_bytes

    @classmethod
    def from_json(cls, raw: Any, where: Where) -> Description:
        """Parse a record's ``metadata``; a RegistryError names the field that is wrong."""
        if not isinstance(raw, Mapping):
            raise where.fail("metadata", "a video record needs its decoded description")
        try:
            header = Header(
                str(raw["container"]),
                str(raw["codec"]),
                str(raw["pixel_format"]),
                _positive(raw["width"]),
                _positive(raw["height"]),
                _positive(raw["frames"]),
                str(Fraction(raw["frame_rate"])),
                str(Fraction(raw["time_base"])),
            )
            digests = tuple(str(d) for d in raw["frame_digests"])
            blocks = tuple(str(b) for b in raw["frame_blocks"])
            fast = tuple(str(d) for d in raw.get("frame_blake3") or ())
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise where.fail("metadata", f"the decoded description is incomplete ({e!r})") from e
        if raw.get("frame_format") != FRAME_FORMAT:
            raise where.fail("metadata.frame_format", f"must be {FRAME_FORMAT!r}")
        if not len(digests) == len(blocks) == header.frames:
            raise where.fail(
                "metadata.frame_digests",
                f"{header.frames} frames but {len(digests)} digests and {len(blocks)} block means",
            )
        if any(len(b) != BLOCK_CHARS or not _HEX.fullmatch(b) for b in blocks):
            raise where.fail(
                "metadata.frame_blocks", f"each frame's block means are {BLOCK_CHARS} hex digits"
            )
        if fast and len(fast) != header.frames:
            raise where.fail(
                "metadata.frame_blake3", f"{header.frames} frames but {len(fast)} BLAKE3 digests"
            )
        return cls(header, Decoder.from_json(raw.get("decoder"), where), digests, blocks, fast)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.header.to_json(),
            "frames": self.frames,
            "decoder": self.decoder.to_json(),
            "frame_format": self.frame_format,
            "frame_digests": list(self.frame_digests),
            "frame_blocks": list(self.frame_blocks),
            **({"frame_blake3": list(self.frame_blake3)} if self.frame_blake3 else {}),
        }

    def match(self, index: int, digest: str, blocks: str, tolerance: ArrayTolerance) -> FrameMatch:
        """How frame ``index`` with ``digest`` and block means ``blocks`` compares with this one."""
        if digest == self.frame_digests[index]:
            return FrameMatch.IDENTICAL
        if tolerance.metric != "exact" and all(
            abs(m - r) <= tolerance.atol + tolerance.rtol * abs(r)
            for m, r in zip(block_means(blocks), block_means(self.frame_blocks[index]), strict=True)
        ):
            return FrameMatch.WITHIN
        return FrameMatch.DRIFT

    def block_error(self, index: int, blocks: str) -> float:
        """The largest difference of frame ``index``'s block means from ``blocks``'."""
        pairs = zip(block_means(blocks), block_means(self.frame_blocks[index]), strict=True)
        return max(abs(m - r) for m, r in pairs)


def _positive(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{value!r} is not a positive integer")
    return value


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
                out.append(f"{round(float(mean) * BLOCK_SCALE):0{_BLOCK_HEX}x}")
    return "".join(out)


def block_means(text: str) -> tuple[float, ...]:
    """The block means a frame_blocks string holds, in levels of 255."""
    step = _BLOCK_HEX
    return tuple(int(text[k : k + step], 16) / BLOCK_SCALE for k in range(0, len(text), step))


def encode_blocks(means: Sequence[float]) -> str:
    """Block means written as a frame_blocks string (the inverse of :func:`block_means`)."""
    return "".join(f"{round(m * BLOCK_SCALE):0{_BLOCK_HEX}x}" for m in means)


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
    "open_clip",
]
