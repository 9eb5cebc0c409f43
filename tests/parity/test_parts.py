"""Every report value splits into a tracked part and a run part, by its fields' declarations:
whatever its run numbers are, its tracked part (JSON, and the compare page made from it) is the
same bytes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.objects import digests
from fixture_store.parity import parts
from fixture_store.parity.arrays import ArrayComparison
from fixture_store.parity.arrays import Outcome as ArrayOutcome
from fixture_store.parity.cases import Report as CompareReport
from fixture_store.parity.report_html import render
from fixture_store.parity.results import CaseResult, KnownError, Outcome
from fixture_store.regenerate.drift import ArtifactComparison, MemberComparison, Verdict
from fixture_store.regenerate.run import Report as RegenerationReport
from fixture_store.registry import ArrayTolerance

DIGEST = digests.parse("sha256:" + "ab" * 32, 10)


def _array(name: str, error: float = 1e-7) -> ArrayComparison:
    return ArrayComparison(
        name,
        ArrayOutcome.WITHIN,
        error,
        error / 2,
        error,
        error / 3,
        (1, 2),
        "",
        ArrayTolerance(),
        2.0,
    )


COMPARE = CompareReport(
    ("ort", "reference"),
    (
        CaseResult("onnx-node/test_exp", "ort", Outcome.PASS, arrays=(_array("0:y"),), seconds=1),
        CaseResult(
            "onnx-node/test_bernoulli",
            "reference",
            Outcome.KNOWN_FAILURE,
            "data set 0: y: 3 of 10 elements outside atol=1e-07 rtol=0.001",
            (_array("0:y", 1.0),),
            ("Bernoulli",),
            0.5,
            underlying=Outcome.MISMATCH,
            known_reason="random",
            known_error=KnownError("onnx-node/test_bernoulli*", 1.0, 2.0, 0.5, 1.0),
        ),
        CaseResult(
            "onnx-node/test_range",
            "ort",
            Outcome.KNOWN_FAILURE,
            "shape (3, 1) where (3,) is expected",
            underlying=Outcome.MISMATCH,
            known_reason="an extra axis",
            known_error=KnownError("onnx-node/test_range", structural=True),
        ),
    ),
    12.5,
)
REGENERATION = RegenerationReport(
    "onnx-node",
    Path("/tmp/scratch"),
    {"python": "3.11.7", "machine": "x86_64", "packages_digest": "sha256:00"},
    (
        ArtifactComparison(
            "onnx-node/test_cosh",
            "onnx-case",
            Verdict.WITHIN,
            DIGEST,
            DIGEST,
            "registry",
            (
                MemberComparison(
                    "out.pb", Verdict.WITHIN, (_array("out.pb"),), "", Path("/a"), Path("/b")
                ),
                MemberComparison("in.pb", Verdict.IDENTICAL),
            ),
            files=2,
        ),
    ),
    fetched=("onnx-node/test_cosh",),
    seconds=3.0,
)
VALUES: list[Any] = [COMPARE, REGENERATION]


def _other(value: Any, data: st.DataObject) -> Any:
    """Any other value of the same type for a run field: another machine's number."""
    if isinstance(value, bool):
        return data.draw(st.booleans())
    if isinstance(value, float | int):
        return data.draw(st.floats(allow_nan=False) | st.just(float("inf")))
    if isinstance(value, str):
        return data.draw(st.text(max_size=20))
    if isinstance(value, tuple):
        return data.draw(st.sampled_from([(), value, tuple(reversed(value))]))
    if isinstance(value, Path):
        return Path(data.draw(st.sampled_from(["/x", "/elsewhere/scratch", "."])))
    return value if value is not None else None


def _perturbed(value: Any, data: st.DataObject) -> Any:
    """``value`` with every run field (in the report values nested in its tracked fields too)
    drawn anew."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if isinstance(item, Verdict) and item.passes:
            # Bit-identical or within tolerance: which, is another machine's kernels' doing.
            changes[f.name] = data.draw(st.sampled_from([Verdict.IDENTICAL, Verdict.WITHIN]))
        elif parts.role(f) == "run":
            changes[f.name] = _other(item, data)
        elif parts.role(f) == "tracked" and isinstance(item, tuple) and item:
            if all(parts.declares_parts(i) for i in item):
                changes[f.name] = tuple(_perturbed(i, data) for i in item)
        elif parts.role(f) == "tracked" and parts.declares_parts(item):
            changes[f.name] = _perturbed(item, data)
    return dataclasses.replace(value, **changes)


def _tracked(value: Any) -> str:
    return json.dumps(value.to_json(parts.Part.TRACKED), sort_keys=True)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("value", VALUES, ids=["compare", "regeneration"])
def test_the_tracked_part_does_not_change_with_the_run_numbers(
    value: Any, data: st.DataObject
) -> None:
    other = _perturbed(value, data)
    assert _tracked(other) == _tracked(value)
    if isinstance(value, CompareReport):
        assert render(other, parts.Part.TRACKED) == render(value, parts.Part.TRACKED)


def test_the_run_part_holds_the_errors_by_name_and_the_tracked_part_none() -> None:
    tracked = json.dumps(COMPARE.to_json(parts.Part.TRACKED))
    for word in ('max_abs"', "seconds", "detail", "arrays", "worst_index"):
        assert word not in tracked, word
    run = COMPARE.to_json(parts.Part.RUN)
    assert run["wall_seconds"] == 12.5
    first = run["results"][0]
    assert (first["name"], first["runtime"]) == ("onnx-node/test_exp", "ort")
    assert first["arrays"][0]["max_abs"] == 1e-7
    known = run["results"][1]["known_error"]
    assert known == {"pattern": "onnx-node/test_bernoulli*", "max_abs": 1.0, "max_rel": 0.5}
    regeneration = REGENERATION.to_json(parts.Part.TRACKED)
    assert regeneration["environment"] == {"python": "3.11", "packages_digest": "sha256:00"}
    # Within tolerance here, bit-identical on another machine: the tracked file says "pass".
    assert regeneration["artifacts"] == [] and regeneration["counts"]["pass"] == 1
    assert regeneration["file_counts"]["pass"] == 2
    run = REGENERATION.to_json(parts.Part.RUN)
    (run_art,) = run["artifacts"]
    assert run_art["candidate_digest"] == DIGEST.text and run_art["members"][0]["candidate"] == "/a"
    assert run_art["verdict"] == "within-tolerance"
    assert run_art["members"][0]["verdict"] == "within-tolerance"
    assert run["counts"]["within-tolerance"] == 1 and run["file_counts"]["within-tolerance"] == 1
    assert run["file_counts"]["bit-identical"] == 1


def test_the_tracked_page_names_a_structural_mismatch_and_bounds_not_errors() -> None:
    page = render(COMPARE, parts.Part.TRACKED)
    assert "structural mismatch" in page and "max abs bound 2" in page
    assert "12.5 s" not in page and "Error histograms" not in page and "3 of 10" not in page
    full = render(COMPARE)
    assert "max abs 1 (bound 2)" in full and "3 of 10 elements" in full and "12.5 s" in full


def test_a_run_field_without_a_default_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Broken:
        name: str = dataclasses.field(metadata=parts.KEY)
        error: float = dataclasses.field(metadata=parts.RUN)

    with pytest.raises(TypeError, match=r"Broken\.error: a run field needs a default"):
        parts.without_run(Broken("x", 1.0))


def test_the_run_report_sits_in_a_run_folder_beside_the_tracked_file() -> None:
    assert parts.run_path(Path("reports/compare.json")) == Path("reports/run/compare.json")
