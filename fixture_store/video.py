"""Video artifacts: frames decoded lazily from the verified container, each checked as it comes.

A ``video`` record holds the container's digest and, in ``metadata``, its decoded description
(:class:`fixture_store.readers.video.Description`): what the pinned decoder of the ``video``
stage made of it, down to one RGB24 digest per frame. :func:`frames` verifies the container,
refuses a clip that would decode past the record's limits profile before decoding it, then
decodes one frame at a time and checks it before handing it out:

- under the pinned decoder (the same PyAV and FFmpeg versions), each frame must be bit-identical
  to its recorded digest;
- under another decoder a frame may differ in its last bits (a colour conversion that rounds
  differently); its block means (each colour's mean over a 4 x 4 grid) must then lie within the
  record's tolerance, which catches a wrong or degraded frame, not a last-bit difference (the
  container itself is verified by its digest).

A frame past the recorded count, a missing frame or a frame out of tolerance is refused naming
it. A container whose bytes no longer match is refused by verification before any byte of it
reaches the decoder (FFmpeg is native code: it reads only verified bytes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from fixture_store import limits as limits_mod
from fixture_store.access import Fixtures
from fixture_store.errors import DigestMismatchError, UsageError
from fixture_store.limits import Limits
from fixture_store.objects import names
from fixture_store.readers.video import (
    DEFAULT_TOLERANCE,
    Clip,
    Decoder,
    Description,
    FrameMatch,
    frame_blake3,
    frame_blocks,
    frame_digest,
    match,
    open_clip,
)
from fixture_store.registry import ArrayTolerance, Kind, Record, Where


def description(record: Record) -> Description:
    """The decoded description a ``video`` record carries; a registry error if it has none."""
    if record.kind is not Kind.VIDEO:
        raise UsageError(f"{record.name} is a {record.kind}, not a video")
    where = Where(f"provenance/{record.family}.json", record.name)
    if not record.metadata:
        raise where.fail(
            "metadata",
            "the video record has no decoded description",
            fix="fixture-store regenerate video --fetch --accept  (decodes it with the pinned "
            "decoder and records what it decoded)",
        )
    return Description.from_json(record.metadata, where)


def tolerance(record: Record) -> ArrayTolerance:
    """What a frame from another decoder is judged under: the record's ``frames`` tolerance."""
    return record.tolerance.for_array("frames") if record.tolerance else DEFAULT_TOLERANCE


def check_limits(record: Record, desc: Description, limits: Limits) -> None:
    """Refuse a clip the record says would decode past ``limits``, before decoding it."""
    checks = (
        ("video_bytes", record.object.size, "container bytes"),
        ("video_frames", desc.frames, "frames"),
        ("video_pixels", desc.header.pixels, "pixels a frame"),
        ("video_decoded_bytes", desc.decoded_bytes, "decoded bytes"),
    )
    for rule, value, what in checks:
        bound = getattr(limits, rule)
        if value > bound:
            raise UsageError(
                f"{record.name}: the record describes {value:,} {what}, over the "
                f"{limits.name!r} profile's {rule}={bound:,}; nothing was decoded",
                fix='name a larger limits profile in the record (reviewed), e.g. "profile": "1GiB"',
            )


def frames(
    fixtures: Fixtures, name: str, *, limits: Limits | None = None
) -> Iterator[np.ndarray[Any, Any]]:
    """Yield NAME's frames (height x width x 3 uint8 RGB24) lazily, each checked against its
    record; the container is verified before the first one is decoded."""
    record = fixtures.record(name)
    desc = description(record)
    profile = limits or limits_mod.profile(record.profile)
    check_limits(record, desc, profile)
    # Verified before anything is decoded: bytes that do not match their record never reach
    # the decoder, not even to say which frames they damage.
    fixtures.check(name).raise_for_status()
    pinned = Decoder.current() == desc.decoder  # needs the video extra: refused here, not later
    return _checked(fixtures, record, desc, profile, pinned=pinned)


def _open(fixtures: Fixtures, record: Record, desc: Description, limits: Limits) -> Clip:
    # Through the path primitive (DESIGN 13): a link, FIFO or folder there is refused.
    raw = fixtures.store.open_object(record.object)  # the clip owns it and closes it
    try:
        clip = open_clip(
            raw,
            artifact=record.name,
            size=os.fstat(raw.fileno()).st_size,
            limits=limits,
            container=desc.header.container,
        )
    except BaseException:
        raw.close()
        raise
    return clip


def _checked(
    fixtures: Fixtures, record: Record, desc: Description, limits: Limits, *, pinned: bool
) -> Iterator[np.ndarray[Any, Any]]:
    tol = tolerance(record)
    # The recorded BLAKE3 re-checks a frame 3x faster than SHA-256; a full check uses SHA-256.
    fast = bool(desc.frame_blake3) and not fixtures.full
    count = 0
    with _open(fixtures, record, desc, limits) as clip:
        for rgb in clip.rgb_frames():
            if count >= desc.frames:
                raise _changed(record, desc, f"decodes more than the recorded {desc.frames} frames")
            if not _recorded(desc, count, rgb, fast=fast):
                _judge(record, desc, count, rgb, tol=tol, pinned=pinned)
            count += 1
            yield rgb
    if count != desc.frames:
        raise _changed(
            record,
            desc,
            f"decodes to {count} frames, the record has {desc.frames} "
            f"(frames {count}..{desc.frames - 1} are missing)",
        )


def _recorded(desc: Description, index: int, rgb: np.ndarray[Any, Any], *, fast: bool) -> bool:
    """Whether frame ``index`` is bit-identical to its record (by BLAKE3 when ``fast``)."""
    if fast:
        return frame_blake3(rgb) == desc.frame_blake3[index]
    return frame_digest(rgb) == desc.frame_digests[index]


def _judge(
    record: Record,
    desc: Description,
    index: int,
    rgb: np.ndarray[Any, Any],
    *,
    tol: ArrayTolerance,
    pinned: bool,
) -> None:
    """Refuse frame ``index`` unless another decoder made it within the record's tolerance."""
    digest = frame_digest(rgb)
    if pinned:
        raise _changed(
            record, desc, f"frame {index} differs from its record under the pinned decoder"
        )
    blocks = frame_blocks(rgb)
    if match(desc, index, digest, blocks, tol) is FrameMatch.DRIFT:
        raise _changed(
            record,
            desc,
            f"frame {index} drifts past the tolerance ({tol.describe()}) under "
            f"{Decoder.current()}: its block means differ by up to "
            f"{desc.block_error(index, blocks):.3f} levels",
        )


def _changed(record: Record, desc: Description, what: str) -> DigestMismatchError:
    return DigestMismatchError(
        record.name,
        f"the verified container {what} (recorded by {desc.decoder})",
        fix=f"fixture-store regenerate {names.shell(record.name)} --fetch  (reports it frame by "
        "frame)",
    )
