"""A video record's decoded description: what the pinned decoder made of the clip.

A ``video`` record keeps in its ``metadata`` the description of its clip (:class:`Description`):
container, codec, pixel format, size, frame count, frame rate, time base, the decoder's versions,
and per frame the SHA-256 of its RGB24 pixels (and their BLAKE3, for fast re-checks) with its
block means: the mean of each colour over a 4 x 4 grid of blocks, one string per frame: 48
values (blocks row by row, R, G, B in each), each ``round(mean * 16)`` as 4 hex digits, so they
are exact to 1/16 of a level.

The description is part of the record: it is parsed, and its parts checked against each other
(as many digests and block means as frames), when the record is read or built, so a record
whose description cannot hold is a record error naming it, before anything is stored, verified
or decoded. Decoding is :mod:`fixture_store.readers.video`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from fixture_store._extras import require
from fixture_store.registry.where import Where

FRAME_FORMAT = "rgb24"
CHANNELS = 3
GRID = 4
BLOCK_SCALE = 16
_BLOCK_HEX = 4
BLOCK_CHARS = GRID * GRID * CHANNELS * _BLOCK_HEX
_HEX = re.compile(r"[0-9a-f]+")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_BLAKE3 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Decoder:
    """The decoder a description was made with: PyAV's version and the FFmpeg it bundles."""

    av: str
    ffmpeg: str

    @classmethod
    def current(cls) -> Decoder:
        require("video", for_what="decoding a video clip")
        import av

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
        if not all(_SHA256.fullmatch(d) for d in digests):
            raise where.fail("metadata.frame_digests", "each frame's digest is sha256:<64 hex>")
        if not all(_BLAKE3.fullmatch(d) for d in fast):
            raise where.fail("metadata.frame_blake3", "each frame's BLAKE3 is 64 hex digits")
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

    def block_error(self, index: int, blocks: str) -> float:
        """The largest difference of frame ``index``'s block means from ``blocks``'."""
        pairs = zip(block_means(blocks), block_means(self.frame_blocks[index]), strict=True)
        return max(abs(m - r) for m, r in pairs)


def _positive(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{value!r} is not a positive integer")
    return value


def block_means(text: str) -> tuple[float, ...]:
    """The block means a frame_blocks string holds, in levels of 255."""
    step = _BLOCK_HEX
    return tuple(int(text[k : k + step], 16) / BLOCK_SCALE for k in range(0, len(text), step))


def encode_blocks(means: Sequence[float]) -> str:
    """Block means written as a frame_blocks string (the inverse of :func:`block_means`)."""
    return "".join(f"{round(m * BLOCK_SCALE):0{_BLOCK_HEX}x}" for m in means)
