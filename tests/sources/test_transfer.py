"""Download bounds as values: the deadline, the minimum rate over a window, the env knobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fixture_store.cli.app import main
from fixture_store.errors import UsageError
from fixture_store.limits import KiB
from fixture_store.objects.store import Store
from fixture_store.sources import FetchContext
from fixture_store.sources.transfer import (
    DEADLINE_ENV,
    DEADLINE_FLOOR_S,
    MIN_RATE,
    MIN_RATE_ENV,
    BelowMinimumRate,
    DeadlineExceeded,
    DownloadPolicy,
    RateMeter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_default_deadline_is_the_floor_plus_the_size_at_the_minimum_rate() -> None:
    policy = DownloadPolicy()
    assert policy.deadline_for(0) == DEADLINE_FLOOR_S
    assert policy.deadline_for(160 * KiB) == DEADLINE_FLOOR_S + 10
    assert DownloadPolicy(deadline=5).deadline_for(10**12) == 5


def test_a_deadline_cuts_each_read_then_refuses_the_next() -> None:
    clock = FakeClock()
    deadline = DownloadPolicy(deadline=10).start(0, read_timeout=30, clock=clock)
    assert deadline.next_read_timeout() == 10
    clock.now += 9.5
    assert deadline.next_read_timeout() == pytest.approx(0.5)
    clock.now += 0.5
    assert deadline.expired
    with pytest.raises(DeadlineExceeded, match="deadline of 10s passed"):
        deadline.next_read_timeout()


def test_a_steady_trickle_fails_once_a_full_window_has_passed() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=MIN_RATE, window=10, clock=clock)
    for _ in range(79):
        clock.now += 0.125
        meter.add(125)  # 1,000 B/s: the first 10 s give the server the benefit of the doubt
    clock.now += 0.125
    with pytest.raises(BelowMinimumRate) as info:
        meter.add(125)
    assert "received 10,000 bytes in the last 10.0s (1.0 KiB/s)" in str(info.value)
    assert "below the minimum rate of 16.0 KiB/s" in str(info.value)


def test_a_fast_start_does_not_buy_a_later_stall() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=1000, window=10, clock=clock)
    meter.add(1_000_000)
    for _ in range(9):
        clock.now += 1
        meter.add(100)
    clock.now += 1
    with pytest.raises(BelowMinimumRate, match=r"received 1,000 bytes in the last 10\.0s"):
        meter.add(100)  # the window now holds only what came after the burst


def test_a_rate_above_the_minimum_passes_for_as_long_as_it_lasts() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=1000, window=10, clock=clock)
    for _ in range(1000):
        clock.now += 0.5
        meter.add(600)
    assert meter.total == 600_000


def test_a_fast_body_passes_and_memory_stays_bounded() -> None:
    clock = FakeClock()
    meter = RateMeter(min_rate=MIN_RATE, window=10, clock=clock)
    for _ in range(100_000):
        clock.now += 0.001
        meter.add(64 * KiB)
    assert len(meter._samples) <= 22


def test_environment_sets_the_deadline_and_the_rate() -> None:
    policy = DownloadPolicy.from_env({DEADLINE_ENV: "90", MIN_RATE_ENV: "1024"})
    assert policy.deadline == 90 and policy.min_rate == 1024
    assert DownloadPolicy.from_env({}) == DownloadPolicy()
    assert DownloadPolicy.from_env({DEADLINE_ENV: " "}) == DownloadPolicy()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
@pytest.mark.parametrize("var", [DEADLINE_ENV, MIN_RATE_ENV])
def test_a_bad_environment_value_is_a_usage_error_naming_it(var: str, value: str) -> None:
    with pytest.raises(UsageError) as info:
        DownloadPolicy.from_env({var: value})
    assert f"${var}={value!r} is not a positive number" in info.value.message
    assert info.value.fix is not None and f"unset {var}" in info.value.fix


def test_a_fetch_context_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "42")
    assert FetchContext(Store.at(tmp_path), tmp_path).policy.deadline == 42
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    with pytest.raises(UsageError, match=DEADLINE_ENV):
        FetchContext(Store.at(tmp_path), tmp_path)


def test_fetch_help_documents_the_knobs() -> None:
    result = CliRunner().invoke(main, ["fetch", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert DEADLINE_ENV in text and MIN_RATE_ENV in text
