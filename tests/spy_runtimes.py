"""Comparator runtimes for tests, named ``tests.spy_runtimes:<name>`` and imported in workers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fixture_store.comparators import RunFn, ort
from fixture_store.onnxcase import OnnxCase

SPY_LOG = "FIXTURE_STORE_TEST_SPY_LOG"


def spy(case: OnnxCase) -> RunFn:
    """ONNX Runtime, recording every case it is asked to prepare in the file $SPY_LOG."""
    with open(os.environ[SPY_LOG], "a", encoding="utf-8") as f:
        f.write(case.name + "\n")
    return ort.prepare(case)


def crash(case: OnnxCase) -> RunFn:
    if "abs" in case.name:
        os.kill(os.getpid(), signal.SIGSEGV)
    return ort.prepare(case)


def hang(case: OnnxCase) -> RunFn:
    def run(feeds: Mapping[str, Any]) -> Sequence[Any]:
        if "abs" in case.name:
            time.sleep(600)
        return ort.prepare(case)(feeds)
    return run
