"""Bounded decoding: a compressed tar stream as decoded bytes, every byte counted.

The compressed bytes are read in slices and decoded with bounded output per call, so a small
input that expands enormously (a decompression bomb) is refused as it happens, against the
profile's archive, expanded and ratio limits. Concatenated frames are one stream, skippable frames
are skipped (as ``zstd -dc`` and ``lz4 -dc`` do); bytes after the last frame are refused.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol

import lz4.frame
import zstandard

from fixture_store.limits import Limits
from fixture_store.readers.archives._common import RATIO_FLOOR, RAW_CHUNK, Format, fail
from fixture_store.readers.formats import LZ4_MAGIC, ZSTD_MAGIC

# Bytes 1-3 of a skippable frame's magic number, 0x184D2A5? little-endian (lz4 and zstd alike).
_SKIPPABLE_MAGIC = b"\x2a\x4d\x18"
_SKIPPABLE_FIRST = 0x50  # the first byte, 0x50-0x5F: its high nibble
# Bounds the output of one zstd call: a 4-byte RLE block can regenerate 128 KiB.
_ZSTD_SLICE = 1024


class Budget:
    """Counts raw and decoded bytes against the profile; refuses bombs as they happen."""

    def __init__(self, limits: Limits, artifact: str) -> None:
        self.limits = limits
        self.artifact = artifact
        self.raw = 0
        self.decoded = 0

    def add_raw(self, n: int) -> None:
        self.raw += n
        if self.raw > self.limits.archive_bytes:
            raise fail(
                self.artifact,
                "archive-bytes",
                f"archive is larger than the profile's {self.limits.archive_bytes} bytes",
            )

    def add_decoded(self, n: int) -> None:
        self.decoded += n
        if self.decoded > self.limits.expanded_bytes:
            raise fail(
                self.artifact,
                "expanded-bytes",
                f"archive expands past the profile's {self.limits.expanded_bytes} bytes "
                "(decompression bomb)",
            )
        if self.decoded > RATIO_FLOOR and self.decoded > self.limits.compression_ratio * max(
            self.raw, 1
        ):
            raise fail(
                self.artifact,
                "compression-ratio",
                f"archive expands {self.decoded} bytes from {self.raw}: more than "
                f"{self.limits.compression_ratio}x (decompression bomb)",
            )


def _raw_chunks(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    while True:
        chunk = f.read(RAW_CHUNK)
        if not chunk:
            return
        budget.add_raw(len(chunk))
        yield chunk


def _decode_plain(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    yield from _raw_chunks(f, budget)


class _Frame(Protocol):
    """One compressed frame being decoded: ``eof`` once it ended, ``rest`` the bytes after it."""

    eof: bool
    rest: bytes

    def feed(self, data: bytes) -> Iterator[bytes]: ...


class _ZstdFrame:
    def __init__(self, dctx: zstandard.ZstdDecompressor) -> None:
        self._obj = dctx.decompressobj()
        self.eof = False
        self.rest = b""

    def feed(self, data: bytes) -> Iterator[bytes]:
        view = memoryview(data)
        batch: list[bytes] = []
        batched = 0
        while view and not self.eof:
            # Small slices bound each call's output; batching keeps the Python overhead low.
            piece, view = view[:_ZSTD_SLICE], view[_ZSTD_SLICE:]
            out = self._obj.decompress(piece)
            if out:
                batch.append(out)
                batched += len(out)
                if batched >= RAW_CHUNK:
                    yield b"".join(batch)
                    batch, batched = [], 0
            if self._obj.eof:
                self.eof = True
                self.rest = self._obj.unused_data + bytes(view)
        if batch:
            yield b"".join(batch)


class _Lz4Frame:
    def __init__(self) -> None:
        self._dec = lz4.frame.LZ4FrameDecompressor()
        self.eof = False
        self.rest = b""

    def feed(self, data: bytes) -> Iterator[bytes]:
        out = self._dec.decompress(data, max_length=RAW_CHUNK)
        while True:
            if out:
                yield out
            if self._dec.eof:
                self.eof = True
                self.rest = self._dec.unused_data
                return
            if self._dec.needs_input:
                return
            out = self._dec.decompress(b"", max_length=RAW_CHUNK)


def _starts_frame(data: bytes, magic: bytes) -> bool:
    """Whether ``data`` can begin a frame: the format's magic or a skippable frame's (which lz4
    and zstd share, 0x184D2A50-0x184D2A5F), for as many bytes as ``data`` has."""
    if magic.startswith(data[:4]):
        return True
    return (data[0] & 0xF0) == _SKIPPABLE_FIRST and _SKIPPABLE_MAGIC.startswith(data[1:4])


def _decode_frames(
    f: BinaryIO,
    budget: Budget,
    *,
    name: str,
    magic: bytes,
    new_frame: Callable[[], _Frame],
    errors: tuple[type[Exception], ...],
    leading_skippable: bool,
) -> Iterator[bytes]:
    """Decode a stream of concatenated frames, as ``zstd -dc`` and ``lz4 -dc`` do.

    Skippable frames are decoded (to nothing) by the libraries; a frame boundary may fall anywhere
    in a read, and a magic number may straddle two reads. The first frame is handed to the decoder
    whatever it holds, so a stream that is not one at all is refused as corrupt; unless
    ``leading_skippable``, it may not be a skippable frame (the format would then be ambiguous:
    lz4 and zstd share those, and readers that detect the format by its magic disagree).
    """
    frame: _Frame | None = None
    first = True
    buf = b""
    for chunk in _raw_chunks(f, budget):
        buf = buf + chunk if buf else chunk
        while buf:
            if frame is None and first:
                if (
                    not leading_skippable
                    and not buf.startswith(magic)
                    and _starts_frame(buf, magic)
                ):
                    raise fail(
                        budget.artifact,
                        "format",
                        f"{name} stream begins with a skippable frame: its format is ambiguous",
                    )
                first = False
                frame = new_frame()
            elif frame is None:
                if len(buf) < len(magic):
                    break  # the next frame's magic number is split across reads
                if not _starts_frame(buf, magic):
                    raise fail(
                        budget.artifact,
                        "trailing-garbage",
                        f"bytes after the end of the {name} stream",
                    )
                frame = new_frame()
            try:
                yield from frame.feed(buf)
            except errors as e:
                raise fail(budget.artifact, "corrupt", f"{name} stream is corrupt: {e}") from None
            if not frame.eof:
                buf = b""
            else:
                buf, frame = frame.rest, None
    if buf and not _starts_frame(buf, magic):
        raise fail(budget.artifact, "trailing-garbage", f"bytes after the end of the {name} stream")
    if frame is not None or buf or first:
        raise fail(budget.artifact, "truncated", f"{name} stream ends before its frame is complete")


def _decode_zstd(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor()
    return _decode_frames(
        f,
        budget,
        name="zstd",
        magic=ZSTD_MAGIC,
        new_frame=lambda: _ZstdFrame(dctx),
        errors=(zstandard.ZstdError,),
        leading_skippable=True,
    )


def _decode_lz4(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    return _decode_frames(
        f,
        budget,
        name="lz4",
        magic=LZ4_MAGIC,
        new_frame=_Lz4Frame,
        errors=(RuntimeError,),
        leading_skippable=False,
    )


_DECODERS: dict[str, Callable[[BinaryIO, Budget], Iterator[bytes]]] = {
    "tar": _decode_plain,
    "tar.lz4": _decode_lz4,
    "tar.zst": _decode_zstd,
}


class DecodedStream(io.RawIOBase):
    """A read-only forward stream over decoded chunks; tracks the last non-zero byte."""

    def __init__(self, chunks: Iterator[bytes], budget: Budget) -> None:
        self._chunks = chunks
        self._budget = budget
        self._buf = b""
        self._pos = 0
        self.position = 0
        self.last_nonzero_end = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview | bytearray) -> int:  # type: ignore[override]
        while self._pos >= len(self._buf):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._budget.add_decoded(len(chunk))
            stripped = len(chunk.rstrip(b"\0"))
            if stripped:
                self.last_nonzero_end = self.position + (len(self._buf) - self._pos) + stripped
            self._buf, self._pos = chunk, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        self.position += n
        return n

    def drain(self) -> None:
        while self.read(RAW_CHUNK):
            pass


def decoded_stream(f: BinaryIO, fmt: Format, budget: Budget) -> DecodedStream:
    """The decoded bytes of the tar stream ``f`` (plain, lz4 or zstd), counted by ``budget``."""
    return DecodedStream(_DECODERS[fmt](f, budget), budget)
