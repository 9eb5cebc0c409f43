"""compare's summary: the counts of every runtime, as a table and as one line each a log can be
searched for."""

from __future__ import annotations

import pytest

from fixture_store.cli.compare import print_report
from fixture_store.parity.cases import Report
from fixture_store.parity.results import CaseResult, Outcome


def test_compare_prints_the_counts_of_every_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    results = tuple(
        CaseResult(f"c/{i}", rt, Outcome.PASS if i % 4 else Outcome.KNOWN_FAILURE)
        for i in range(8)
        for rt in ("ort", "reference")
    )
    print_report(Report(("ort", "reference"), results))
    out = capsys.readouterr().out
    assert "ort: 6 pass, 2 known-failure" in out.replace("known_failure", "known-failure")
    assert "reference: 6 pass" in out
