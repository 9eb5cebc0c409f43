"""The overall deadline covers every transfer of a pull, packed ranges included (issue 34 class
9): a server dripping its headers holds a packed object no longer than one at its own key."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from fixture_store.remotes.base import Retry
from fixture_store.remotes.sync import Outcome, pull, push
from fixture_store.sources.transfer import DEADLINE_ENV
from tests.remotes.test_packs import _fresh, _project, _s3
from tests.support.s3server import FaultProxy

DEADLINE_S = 1.0
# Retry's own total is far longer: only the download deadline can end the pull this soon.
SLOW = Retry(attempts=3, backoff=0.01, total=20.0)


def test_a_header_drip_ends_a_packed_pull_at_the_download_deadline(
    project: Path,
    store: Store,
    tmp_path: Path,
    proxy: FaultProxy,
    bucket: str,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, the_plan = _project(project, store, count=4)
    push(store, registry, _s3(s3_endpoint, bucket), the_plan, retry=SLOW)
    monkeypatch.setenv(DEADLINE_ENV, str(DEADLINE_S))
    proxy.faults.drip_headers = 0.2  # every index and pack GET: ~50 s of headers
    started = time.monotonic()
    report = pull(_fresh(tmp_path), registry, _s3(proxy.url, bucket), the_plan, retry=SLOW)
    spent = time.monotonic() - started
    assert {r.outcome for r in report.results} == {Outcome.FAILED}
    assert all("deadline" in r.message for r in report.results), report.results[0].message
    # the index read and the own-key tries share the deadline; allow for a slow machine
    assert spent < 3 * DEADLINE_S + 3, spent
