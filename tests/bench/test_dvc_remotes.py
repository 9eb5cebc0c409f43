"""The comparison table of bench.dvc_remotes: ratios, targets and RSS read the way it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.dvc_remotes import Versus, render
from bench.harness import Bench, Row, Sample


class _Bench(Bench):
    """A bench that runs nothing: render only reads its repeat and baseline."""

    def __init__(self) -> None:  # no warm-up, no children
        self.work, self.repeat, self.rows, self.skipped = Path(), 2, [], {}
        self.baseline_kib = 10 * 1024


def _row(contender: str, seconds: float, rss_mib: float) -> Row:
    samples = [Sample(seconds, int(rss_mib * 1024)), Sample(seconds * 2, int(rss_mib * 1024))]
    return Row("case", contender, samples, 1)


@pytest.fixture
def lines() -> list[str]:
    ours = _row("fixture-store push", 1.0, 40 + 80)  # 80 MiB above the 40 MiB baseline
    slower = _row("dvc push", 4.0, 60)
    close = _row("boto3", 1.5, 50)
    section = Versus("node push", ours, ((slower, 3.0), (close, 2.0)), 40 * 1024)
    return render(_Bench(), [section]).splitlines()


def _line(lines: list[str], contender: str) -> str:
    return next(line for line in lines if line.strip().startswith(contender))


def test_ratio_is_the_other_median_over_ours_and_marks_the_target(lines: list[str]) -> None:
    # medians: ours 1.5 (1.0, 2.0), dvc 6.0, boto3 2.25
    assert "4.00x" in _line(lines, "dvc push") and ">=3x ok" in _line(lines, "dvc push")
    assert "1.50x" in _line(lines, "boto3") and ">=2x NO" in _line(lines, "boto3")


def test_rss_is_taken_above_the_sections_baseline_and_checked(lines: list[str]) -> None:
    assert "node push (RSS above 40 MiB)" in lines
    ours = _line(lines, "fixture-store push")
    assert " 80.0 " in ours and "<=64MiB NO" in ours
    assert " 20.0 " in _line(lines, "dvc push")
