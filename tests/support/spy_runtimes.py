"""Comparator runtimes for tests, named ``tests.support.spy_runtimes:<name>`` (for workers)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixture_store.parity.runtimes import RunFn, ort
from fixture_store.readers.onnxcase import OnnxCase


def spy_log(store_root: Path) -> Path:
    return store_root / "spy.log"


def spy(case: OnnxCase) -> RunFn:
    """ONNX Runtime, recording every case it is asked to prepare in ``spy.log`` beside the store.

    (Workers fork from a server started once, so they do not see environment changes made
    later by a test: the log location comes from the case's own path, store/trees/<key>.)
    """
    with open(spy_log(case.folder.parent.parent), "a", encoding="utf-8") as f:
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
