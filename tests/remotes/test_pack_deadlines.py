"""The overall deadline covers every transfer of a pull, packed ranges included (issue 34 class
9): a server dripping its headers holds a packed object no longer than one at its own key."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

import fixture_store
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


PACKED_PATH = ("remotes/packs.py", "remotes/packed.py", "remotes/ranges.py")
# The calls of the packed path that make requests, and the argument that bounds them: a call
# without it would get a deadline of its own, and the deadlines would add up.
BOUNDED = {"run": "deadline", "load_index": "deadline", "read_whole": "deadline",
           "pull_packed": "deadline", "_pull_run": "deadline", "_keyed": "overall"}  # fmt: skip
_POSITION = {"load_index": 3, "read_whole": 4}  # where the deadline may be given positionally


def test_every_transfer_of_the_packed_path_is_given_its_deadline() -> None:
    """The walk: each request-making call in the packed path passes the deadline it runs by."""
    package = Path(fixture_store.__file__).parent
    unbounded = []
    for rel in PACKED_PATH:
        tree = ast.parse((package / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in BOUNDED or (name == "run" and not isinstance(func, ast.Attribute)):
                continue
            given = {k.arg for k in node.keywords} | (
                {BOUNDED[name]} if len(node.args) > _POSITION.get(name, 99) else set()
            )
            if BOUNDED[name] not in given:
                unbounded.append(f"{rel}:{node.lineno} {name}")
    assert unbounded == []
