"""Drift of a decoded clip: its decoded description against the record's, frame by frame.

A ``video`` candidate whose container is bit-identical to its record can still decode
differently (a new decoder pin). Its frames are classified like arrays are: bit-identical when
the RGB24 digests match, within tolerance when the 4 x 4 block means lie within the record's
tolerance, drift otherwise; a changed header (codec, size, frame count, ...) is drift. A record
that has no description yet makes the description ``new``: accepting records it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.readers.video import Description, FrameMatch, match
from fixture_store.regenerate.drift import ArtifactComparison, MemberComparison, Verdict
from fixture_store.registry import ArrayTolerance, Where

# The header fields a candidate must share with its record.
_HEADER = ("container", "codec", "pixel_format", "width", "height", "frame_rate", "time_base")


def compare_frames(
    bytes_comparison: ArtifactComparison,
    recorded: Mapping[str, Any] | None,
    candidate: Mapping[str, Any] | None,
    tolerance: ArrayTolerance,
) -> ArtifactComparison:
    """``bytes_comparison`` of a video refined by its frames (only when the bytes are equal)."""
    if bytes_comparison.verdict is not Verdict.IDENTICAL:
        return bytes_comparison
    name = bytes_comparison.name
    try:
        cand = Description.from_json(candidate, Where("outputs.json", name))
    except RegistryError as e:
        reason = f"the generator's description: {e.about(name)}"
        return _with(bytes_comparison, Verdict.DRIFT, reason)
    if not recorded:
        return _with(bytes_comparison, Verdict.NEW, "the record has no decoded description yet")
    try:
        rec = Description.from_json(recorded, Where(None, name))
    except RegistryError as e:
        return _with(bytes_comparison, Verdict.NEW, f"the recorded description: {e.about(name)}")
    return _classified(bytes_comparison, rec, cand, tolerance)


def _classified(
    comparison: ArtifactComparison,
    rec: Description,
    cand: Description,
    tolerance: ArrayTolerance,
) -> ArtifactComparison:
    changed = [
        f"{key} {getattr(rec.header, key)!r} -> {getattr(cand.header, key)!r}"
        for key in _HEADER
        if getattr(rec.header, key) != getattr(cand.header, key)
    ]
    if rec.frames != cand.frames:
        changed.append(f"{rec.frames} frames -> {cand.frames}")
    if changed:
        return _with(comparison, Verdict.DRIFT, "decodes differently: " + "; ".join(changed))
    if rec.decoder != cand.decoder and rec.frame_digests == cand.frame_digests:
        reason = f"bit-identical frames from {cand.decoder}; the record names {rec.decoder}"
        return _with(comparison, Verdict.IDENTICAL, reason)
    members = _frames(rec, cand, tolerance)
    verdicts = {m.verdict for m in members}
    verdict = next((v for v in (Verdict.DRIFT, Verdict.WITHIN) if v in verdicts), Verdict.IDENTICAL)
    drifted = [m.path for m in members if m.verdict is Verdict.DRIFT]
    reason = (
        f"{len(drifted)} of {rec.frames} frames drift: {', '.join(drifted[:10])}" if drifted else ""
    )
    return dataclasses.replace(comparison, verdict=verdict, members=tuple(members), reason=reason)


def _frames(
    rec: Description, cand: Description, tolerance: ArrayTolerance
) -> list[MemberComparison]:
    out = []
    for i, digest in enumerate(cand.frame_digests):
        judged = match(rec, i, digest, cand.frame_blocks[i], tolerance)
        if judged is FrameMatch.IDENTICAL:
            out.append(MemberComparison(f"frame {i}", Verdict.IDENTICAL))
            continue
        worst = rec.block_error(i, cand.frame_blocks[i])
        out.append(
            MemberComparison(
                f"frame {i}",
                Verdict(str(judged)),
                reason=f"RGB24 digest differs; block means differ by up to {worst:.3f} "
                f"({tolerance.describe()})",
            )
        )
    return out


def _with(comparison: ArtifactComparison, verdict: Verdict, reason: str) -> ArtifactComparison:
    return dataclasses.replace(comparison, verdict=verdict, reason=reason)
