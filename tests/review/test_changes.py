"""A registry change as fixture-store diff pages it (review/changes.py): random edits to a
record's tolerance and bytes, each named by its kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.objects import digests
from fixture_store.registry import parse_record
from fixture_store.registry.family import FamilyFile, Registry
from fixture_store.review.changes import Kind, compare, parse_fail_on
from fixture_store.review.revisions import Revision

NAME = "fam/ref.npz"


def registry(raw: dict[str, Any]) -> Registry:
    record = parse_record(NAME, raw, file="<test>")
    family = FamilyFile(Path("provenance/fam.json"), "fam", {NAME: record}, {})
    return Registry(Path("."), {"fam": family})


def raw_record(data: bytes, tolerance: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "fixture",
        "source": {"type": "local", "path": "data/ref.npz"},
        "digest": digests.of_bytes(data).text,
        "size": len(data),
        "tolerance": tolerance,
    }


@settings(max_examples=40, deadline=None)
@given(
    bound=st.floats(min_value=1e-8, max_value=1e-2),
    loosen_max_abs=st.booleans(),
    tighten_rms=st.booleans(),
    expectation=st.sampled_from([None, 0.5, 10.0]),
    new_bytes=st.booleans(),
)
def test_random_edits_are_each_named_by_their_kind(
    bound: float,
    loosen_max_abs: bool,
    tighten_rms: bool,
    expectation: float | None,
    new_bytes: bool,
) -> None:
    """A record judged by max_abs and rms checks: a max_abs bound raised is loosened, an rms
    bound lowered tightened, a new expectation loosened or tightened by its bound against the
    record's, other bytes a digest change; each reported once, and nothing else."""
    first: list[dict[str, Any]] = [
        {"metric": "max_abs", "max": bound},
        {"metric": "rms", "max": bound},
    ]
    before = {"checks": first}
    checks = [
        {"metric": "max_abs", "max": bound * 10 if loosen_max_abs else bound},
        {"metric": "rms", "max": bound / 10 if tighten_rms else bound},
    ]
    after: dict[str, Any] = {"checks": checks}
    expected: list[tuple[Kind, str]] = []
    if loosen_max_abs and tighten_rms:
        expected.append((Kind.RESHAPED, "tolerance record"))  # the one rule moved both ways
    elif loosen_max_abs:
        expected.append((Kind.LOOSENED, "tolerance record"))
    elif tighten_rms:
        expected.append((Kind.TIGHTENED, "tolerance record"))
    if expectation is not None:
        # judged against the rule that applied there before: the record's
        moved = [{**c, "max": c["max"] * expectation} for c in first]
        after["expectations"] = {"device:cuda": {"checks": moved, "why": "TF32"}}
        kind = Kind.LOOSENED if expectation > 1 else Kind.TIGHTENED
        expected.append((kind, "tolerance record where device:cuda"))
    data = b"other bytes" if new_bytes else b"reference"
    if new_bytes:
        expected.append((Kind.DIGEST, ""))
    diff = compare(
        registry(raw_record(b"reference", before)),
        registry(raw_record(data, after)),
        old=Revision("HEAD", "0" * 40),
        new=Revision(),
    )
    assert sorted((c.kind, c.where) for c in diff.changes) == sorted(expected)
    assert all(c.name == NAME for c in diff.changes)
    failing = diff.failing(parse_fail_on("loosened,digest,gap"))
    assert bool(failing) == any(k in (Kind.LOOSENED, Kind.DIGEST) for k, _ in expected)
