"""Bounded decoding: a compressed tar stream as decoded bytes, every byte counted.

The compressed bytes are read in slices and decoded with bounded output per call, so a small
input that expands enormously (a decompression bomb) is refused as it happens, against the
profile's archive, expanded and ratio limits. Concatenated frames are one stream; bytes after the
last frame are refused.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO

import lz4.frame
import zstandard

from fixture_store.limits import Limits
from fixture_store.readers.archives._common import RATIO_FLOOR, RAW_CHUNK, Format, fail
from fixture_store.readers.formats import LZ4_MAGIC, ZSTD_MAGIC

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


def _decode_zstd(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor()
    obj = dctx.decompressobj()
    started = False
    pending = b""
    batch: list[bytes] = []
    batched = 0
    for chunk in _raw_chunks(f, budget):
        view = memoryview(pending + chunk if pending else chunk)
        pending = b""
        while view:
            if obj.eof:
                obj, view, pending = _next_zstd_frame(dctx, obj, view, budget.artifact)
                if pending:
                    break
            piece, view = view[:_ZSTD_SLICE], view[_ZSTD_SLICE:]
            started = True
            try:
                out = obj.decompress(piece)
            except zstandard.ZstdError as e:
                raise fail(budget.artifact, "corrupt", f"zstd stream is corrupt: {e}") from None
            if out:
                batch.append(out)
                batched += len(out)
                # Small slices bound each call's output; batching keeps the Python overhead low.
                if batched >= RAW_CHUNK:
                    yield b"".join(batch)
                    batch, batched = [], 0
    if batch:
        yield b"".join(batch)
    _check_zstd_end(obj, pending, started, budget.artifact)


def _next_zstd_frame(
    dctx: zstandard.ZstdDecompressor,
    ended: zstandard.ZstdDecompressionObj,
    view: memoryview,
    artifact: str,
) -> tuple[zstandard.ZstdDecompressionObj, memoryview, bytes]:
    """After a frame ends: a decoder for the next frame and the bytes to feed it.

    When the bytes left are the start of a magic number split across reads, they come back as
    the third value, to go before the next read, with nothing to feed now.
    """
    rest = ended.unused_data + bytes(view)
    if len(rest) < len(ZSTD_MAGIC) and ZSTD_MAGIC.startswith(rest):
        return ended, memoryview(b""), rest
    if not rest.startswith(ZSTD_MAGIC):
        raise fail(artifact, "trailing-garbage", "bytes after the end of the zstd stream")
    return dctx.decompressobj(), memoryview(rest), b""


def _check_zstd_end(
    obj: zstandard.ZstdDecompressionObj, pending: bytes, started: bool, artifact: str
) -> None:
    """At the end of the input: the last frame must be complete, with nothing after it."""
    left = pending or (obj.unused_data if obj.eof else b"")
    if left:
        if left.startswith(ZSTD_MAGIC[: len(left)]):
            raise fail(artifact, "truncated", "zstd stream ends inside a frame")
        raise fail(artifact, "trailing-garbage", "bytes after the end of the zstd stream")
    if not started or not obj.eof:
        raise fail(artifact, "truncated", "zstd stream ends before its frame is complete")


def _decode_lz4(f: BinaryIO, budget: Budget) -> Iterator[bytes]:
    dec = lz4.frame.LZ4FrameDecompressor()
    started = False
    pending = b""
    for chunk in _raw_chunks(f, budget):
        data = pending + chunk
        pending = b""
        while data or (started and not dec.needs_input and not dec.eof):
            if dec.eof:
                rest = dec.unused_data + data
                if not rest.startswith(LZ4_MAGIC[: len(rest)]):
                    raise fail(
                        budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream"
                    )
                if len(rest) < len(LZ4_MAGIC):
                    pending = rest
                    data = b""
                    break
                dec = lz4.frame.LZ4FrameDecompressor()
                data = rest
            started = True
            try:
                out = dec.decompress(data, max_length=RAW_CHUNK)
            except RuntimeError as e:
                raise fail(budget.artifact, "corrupt", f"lz4 stream is corrupt: {e}") from None
            data = b""
            if out:
                yield out
    if pending:
        raise fail(budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream")
    if not started or not dec.eof:
        raise fail(budget.artifact, "truncated", "lz4 stream ends before its frame is complete")
    if dec.unused_data:
        raise fail(budget.artifact, "trailing-garbage", "bytes after the end of the lz4 stream")


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
