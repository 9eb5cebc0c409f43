"""The hostile report runs every harness and says whether each row is within its bounds."""

from __future__ import annotations

import json

import pytest

from bench import hostile_bodies, hostile_report
from bench.hostile_report import Row


def _rows(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]]]:
    code = hostile_report.main([*args, "--json"])
    return code, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_row_is_within_bounds_only_with_every_count_zero_and_its_peak_under_the_bound() -> None:
    assert Row("x", 1).within_bounds
    assert Row("x", 1, peak_mib=100.0, bound_mib=100.0).within_bounds
    assert not Row("x", 1, peak_mib=100.5, bound_mib=100.0).within_bounds
    for count in hostile_report.COUNTS:
        assert not Row("x", 1, **{count: 1}).within_bounds


def test_the_links_and_secrets_rows_count_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, rows = _rows(capsys, "--only", "links", "--only", "secrets", "--links-rounds", "1",
                       "--secrets-rounds", "1")  # fmt: skip
    assert [r for r in rows if not r["within_bounds"]] == []
    assert code == 0
    assert len(rows) == 8 and all(r["rounds"] for r in rows)


@pytest.mark.slow  # ~15 s: a project and a store per round (the fast suite holds each case)
def test_the_outputs_and_claims_rows_count_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34's surfaces: outputs at user-named paths, ranges and certificates."""
    code, rows = _rows(capsys, "--only", "outputs", "--only", "claims")
    assert [r for r in rows if not r["within_bounds"]] == []
    assert code == 0
    assert {str(r["surface"]) for r in rows} >= {
        "outputs: fetch --tensor --output", "outputs: attest -o", "claims: ranges",
        "claims: certificates",
    }  # fmt: skip
    assert all(r["rounds"] for r in rows)


def test_the_structures_rows_count_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, rows = _rows(capsys, "--only", "structures", "--structures-rounds", "1")
    assert [r for r in rows if not r["within_bounds"]] == []
    assert code == 0
    assert [r["surface"] for r in rows] == [
        "structures: bounded JSON",
        "structures: pack entries",
        "structures: Hub answers",
    ]


@pytest.mark.slow
def test_the_whole_summary_is_within_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    code, rows = _rows(capsys, "--rounds", "1", "--links-rounds", "1", "--secrets-rounds", "1",
                       "--error-mib", "8", "--extra-mib", "8")  # fmt: skip
    assert [r for r in rows if not r["within_bounds"]] == []
    assert code == 0
    surfaces = {str(r["surface"]).split(":")[0] for r in rows}
    assert surfaces == {"trials", "links", "secrets", "bodies", "outputs", "claims", "structures"}
    peaks = [r for r in rows if r["peak_mib"] is not None]
    assert len(peaks) == len(hostile_bodies.EXPECTED_EXIT)
