"""The retry loop of every remote kind: attempts, and one deadline for all of an object's."""

from __future__ import annotations

import pytest

from fixture_store.remotes.base import Retry, TransientRemoteError
from fixture_store.sources.transfer import DownloadPolicy, current_deadline


def test_an_objects_retries_stop_at_its_total_time_not_only_at_the_attempt_count() -> None:
    calls: list[float | None] = []

    def always_busy() -> None:
        deadline = current_deadline()  # what the attempt's requests are bounded by
        calls.append(deadline.seconds if deadline is not None else None)
        raise TransientRemoteError("the server answered 503")

    retry = Retry(attempts=12, backoff=0.01, total=0.3)
    with pytest.raises(TransientRemoteError, match=r"the deadline of 0\.3s for this object") as e:
        retry.run(always_busy)
    assert 1 < len(calls) < retry.attempts  # pauses of 0.01 s doubling: about 5 fit
    assert set(calls) == {0.3}
    assert e.value.fix is not None and "FIXTURE_STORE_DOWNLOAD_DEADLINE" in e.value.fix


def test_a_large_object_gets_the_time_its_bytes_take_at_the_minimum_rate() -> None:
    retry = Retry(total=30.0)
    policy = DownloadPolicy(min_rate=1000)
    assert retry.deadline(10, policy).seconds == 30.0
    assert retry.deadline(100_000, policy).seconds == 100.0
    assert retry.deadline(100_000, DownloadPolicy(deadline=2)).seconds == 2.0  # the env's
