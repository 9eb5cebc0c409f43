"""Limits profiles: how much hostile content a reader accepts before refusing it (DESIGN 6).

A profile is data: a frozen value whose fields are positive integers. A record may name a profile
(``"profile": "1GiB"``); a caller may only tighten it (``tighten``), never loosen it, so a test
cannot quietly widen what the registry reviewed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fixture_store.errors import UsageError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds for archives, tensors and video. Every field is a positive integer."""

    name: str
    archive_bytes: int
    member_bytes: int
    expanded_bytes: int
    member_count: int
    metadata_bytes: int
    tensor_header_bytes: int
    tensor_count: int
    tensor_rank: int
    tensor_dimension: int
    tensor_bytes: int
    total_array_bytes: int
    compression_ratio: int
    # Encoded video: checked from the container's header, before any frame is decoded.
    video_bytes: int
    video_frames: int
    video_pixels: int  # width x height of one frame
    video_decoded_bytes: int  # frames x width x height x 3 (RGB24)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UsageError(f"a limits profile needs a non-empty name, got {self.name!r}")
        for f in dataclasses.fields(self):
            if f.name == "name":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UsageError(
                    f"limits profile {self.name!r}: {f.name} must be a positive integer, "
                    f"got {value!r}"
                )

    def as_dict(self) -> dict[str, int | str]:
        return dataclasses.asdict(self)


def _fields() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Limits) if f.name != "name")


LIMIT_FIELDS = _fields()

DEFAULT = Limits(
    name="default",
    archive_bytes=256 * MiB,
    member_bytes=256 * MiB,
    expanded_bytes=512 * MiB,
    member_count=20_000,
    metadata_bytes=256 * KiB,
    tensor_header_bytes=64 * KiB,
    tensor_count=10_000,
    tensor_rank=8,
    tensor_dimension=65_536,
    tensor_bytes=256 * MiB,
    total_array_bytes=512 * MiB,
    compression_ratio=200,
    video_bytes=256 * MiB,
    video_frames=100_000,
    video_pixels=4096 * 2160,
    video_decoded_bytes=512 * MiB,
)

GIB_1 = Limits(
    name="1GiB",
    archive_bytes=GiB,
    member_bytes=GiB,
    expanded_bytes=GiB,
    member_count=20_000,
    metadata_bytes=MiB,
    tensor_header_bytes=64 * KiB,
    tensor_count=10_000,
    tensor_rank=8,
    tensor_dimension=65_536,
    tensor_bytes=GiB,
    total_array_bytes=GiB,
    compression_ratio=200,
    video_bytes=GiB,
    video_frames=1_000_000,
    video_pixels=8192 * 4320,
    video_decoded_bytes=GiB,
)

PROFILES: Mapping[str, Limits] = MappingProxyType({p.name: p for p in (DEFAULT, GIB_1)})


def profile(name: str | None) -> Limits:
    """The profile a record names; ``None`` means the default profile."""
    if name is None:
        return DEFAULT
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(
            f"unknown limits profile {name!r}",
            fix=f"use one of: {', '.join(sorted(PROFILES))}",
        ) from None


def tighten(base: Limits, **overrides: int) -> Limits:
    """A copy of ``base`` with some limits lowered; raising any limit is refused."""
    for key, value in overrides.items():
        if key not in LIMIT_FIELDS:
            raise UsageError(f"unknown limit {key!r}", fix=f"one of: {', '.join(LIMIT_FIELDS)}")
        current = getattr(base, key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UsageError(f"limit {key} must be a positive integer, got {value!r}")
        if value > current:
            raise UsageError(
                f"limit {key}={value} loosens profile {base.name!r} ({current}); "
                "a caller may only tighten a profile",
                fix="name a larger profile in the record (reviewed), or lower the value",
            )
    if not overrides:
        return base
    return dataclasses.replace(base, name=f"{base.name}+tightened", **overrides)
