"""Video artifacts: frames handed out lazily, one at a time, after verification.

A ``video`` record carries its frame count, size, fps and one digest per frame in ``metadata``.
The object is verified before the first frame is read; when it fails, the per-frame digests name
the corrupted frames, so the error says which frames to look at, not only that bytes differ.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fixture_store.access import Fixtures
from fixture_store.errors import DigestMismatchError, RegistryError, UsageError
from fixture_store.registry import Kind, Record
from fixture_store.verify import Status

# A corruption report lists this many of the bad frames.
_FRAMES_SHOWN = 10


@dataclass(frozen=True)
class VideoInfo:
    frames: int
    height: int
    width: int
    channels: int
    fps: float
    header_bytes: int
    frame_digests: tuple[str, ...]

    @property
    def frame_bytes(self) -> int:
        return self.height * self.width * self.channels

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, self.channels)


def info(record: Record) -> VideoInfo:
    """The frame layout a ``video`` record declares; a registry error if it is incomplete."""
    if record.kind is not Kind.VIDEO:
        raise UsageError(f"{record.name} is a {record.kind}, not a video")
    meta: Mapping[str, Any] = record.metadata or {}
    try:
        vi = VideoInfo(
            int(meta["frames"]),
            int(meta["height"]),
            int(meta["width"]),
            int(meta["channels"]),
            float(meta["fps"]),
            int(meta["header_bytes"]),
            tuple(str(d) for d in meta["frame_digests"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RegistryError(
            f"video metadata is incomplete or malformed ({e})", record=record.name, field="metadata"
        ) from e
    if len(vi.frame_digests) != vi.frames:
        raise RegistryError(
            f"{vi.frames} frames but {len(vi.frame_digests)} frame digests",
            record=record.name,
            field="metadata.frame_digests",
        )
    if meta.get("dtype", "uint8") != "uint8":
        raise RegistryError(
            "only uint8 frames are supported", record=record.name, field="metadata.dtype"
        )
    if record.object.size != vi.header_bytes + vi.frames * vi.frame_bytes:
        raise RegistryError(
            "size does not match frames x height x width x channels + header",
            record=record.name,
            field="metadata",
        )
    return vi


def corrupted_frames(data: bytes, vi: VideoInfo) -> list[int]:
    """Indices of frames whose bytes do not match their recorded digest."""
    bad = []
    for i, expected in enumerate(vi.frame_digests):
        start = vi.header_bytes + i * vi.frame_bytes
        chunk = data[start : start + vi.frame_bytes]
        if "sha256:" + hashlib.sha256(chunk).hexdigest() != expected:
            bad.append(i)
    return bad


def frames(fixtures: Fixtures, name: str) -> Iterator[np.ndarray[Any, Any]]:
    """Yield NAME's frames (height x width x channels uint8) lazily, after verification."""
    record = fixtures.record(name)
    vi = info(record)
    result = fixtures.check(name)
    if result.status is Status.MISMATCH:
        path = fixtures.store.object_path(record.digest) if record.digest else None
        bad = corrupted_frames(path.read_bytes(), vi) if path and path.is_file() else []
        if bad:
            shown = ", ".join(str(i) for i in bad[:_FRAMES_SHOWN])
            shown += " …" if len(bad) > _FRAMES_SHOWN else ""
            raise DigestMismatchError(
                name,
                f"{len(bad)} corrupted frame(s) of {vi.frames}: {shown}; {result.message}",
                fix=result.fix,
            )
    result.raise_for_status()
    return _read(fixtures, name, vi)


def _read(fixtures: Fixtures, name: str, vi: VideoInfo) -> Iterator[np.ndarray[Any, Any]]:
    with fixtures.open_bytes(name) as f:
        header = io.BytesIO(f.read(vi.header_bytes))
        version = np.lib.format.read_magic(header)
        if version != (1, 0):
            raise UsageError(f"{name}: npy format {version} is not the recorded 1.0 layout")
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(header)
        if shape != (vi.frames, *vi.shape) or fortran or dtype != np.uint8:
            raise UsageError(
                f"{name}: the npy header says {shape} {dtype}, the record "
                f"{(vi.frames, *vi.shape)} uint8"
            )
        for i, expected in enumerate(vi.frame_digests):
            chunk = f.read(vi.frame_bytes)
            # Verified a moment ago; a frame changed since then is still named, never handed out.
            if "sha256:" + hashlib.sha256(chunk).hexdigest() != expected:
                raise DigestMismatchError(
                    name,
                    f"frame {i} changed after verification",
                    fix=f"fixture-store regenerate {name} --fetch",
                )
            yield np.frombuffer(chunk, dtype=np.uint8).reshape(vi.shape)
