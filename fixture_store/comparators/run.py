"""The worker-process harness: long-lived workers, one case at a time, each under a timeout.

Workers are spawned once and reused across cases (importing onnxruntime and building the
interpreter costs far more than a small case). A worker that dies mid-case is a ``crash`` result
for that case, one that overruns the timeout is killed and a ``timeout`` result; either way a
fresh worker takes its place and the run goes on. ``jobs=0`` evaluates in this process (no
isolation; for debugging and for tests that watch the runtime entry point).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnProcess
from typing import Any

from fixture_store.comparators.results import CaseResult, Outcome, Task
from fixture_store.errors import FixtureStoreError

DEFAULT_TIMEOUT = 60.0
# A worker imports numpy, onnx and onnxruntime before it reports ready.
STARTUP_TIMEOUT = 120.0
_READY = "ready"


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


def _worker_main(conn: Connection) -> None:
    # Importing here keeps the parent light; the worker pays the imports once.
    from fixture_store.comparators.evaluate import evaluate

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    conn.send(_READY)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, task = message
        conn.send((index, evaluate(task)))


@dataclass
class _Worker:
    process: SpawnProcess
    conn: Connection
    ready: bool = False
    started: float = field(default_factory=time.monotonic)
    job: tuple[int, Task, float] | None = None  # index, task, deadline

    @classmethod
    def start(cls, ctx: Any) -> _Worker:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_worker_main, args=(child,), daemon=True,
                              name="fixture-store-compare")
        process.start()
        child.close()
        return cls(process, parent)

    def stop(self, *, kill: bool = False) -> None:
        if kill and self.process.is_alive():
            self.process.kill()
        else:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _death(process: SpawnProcess) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"the worker died with signal {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker died with signal {-code}"
    return f"the worker exited with status {code}"


def run_tasks(
    tasks: Sequence[Task],
    *,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Evaluate every task, in order of ``tasks``; a crash or hang becomes that task's result."""
    jobs = default_jobs() if jobs is None else jobs
    if jobs == 0 or not tasks:
        from fixture_store.comparators.evaluate import evaluate

        out = []
        for task in tasks:
            result = evaluate(task)
            out.append(result)
            if on_result is not None:
                on_result(result)
        return out

    ctx = mp.get_context("spawn")
    results: list[CaseResult | None] = [None] * len(tasks)
    pending = deque(enumerate(tasks))
    workers = [_Worker.start(ctx) for _ in range(min(jobs, len(tasks)))]

    def finish(index: int, result: CaseResult) -> None:
        results[index] = result
        if on_result is not None:
            on_result(result)

    def replace(worker: _Worker, *, kill: bool) -> None:
        worker.stop(kill=kill)
        workers[workers.index(worker)] = _Worker.start(ctx)

    try:
        while pending or any(w.job for w in workers):
            for w in workers:
                if w.ready and w.job is None and pending:
                    index, task = pending.popleft()
                    w.conn.send((index, task))
                    w.job = (index, task, time.monotonic() + timeout)
            now = time.monotonic()
            deadlines = [w.job[2] if w.job else w.started + STARTUP_TIMEOUT
                         for w in workers if w.job or not w.ready]
            wait_for = max(0.0, min(deadlines) - now) if deadlines else None
            ready = set(wait([w.conn for w in workers if w.job or not w.ready], wait_for))
            for w in list(workers):
                if w.conn in ready:
                    try:
                        message = w.conn.recv()
                    except (EOFError, OSError):
                        if w.job is None:
                            raise FixtureStoreError(
                                f"a compare worker failed to start: {_death(w.process)}",
                                fix="run with --jobs 0 to see the error in this process",
                            ) from None
                        index, task, _ = w.job
                        finish(index, CaseResult(task.name, task.runtime, Outcome.CRASH,
                                                 f"{_death(w.process)} while running the case"))
                        replace(w, kill=True)
                        continue
                    if message == _READY:
                        w.ready = True
                    else:
                        index, result = message
                        w.job = None
                        finish(index, result)
                elif w.job is not None and time.monotonic() >= w.job[2]:
                    index, task, _ = w.job
                    finish(index, CaseResult(task.name, task.runtime, Outcome.TIMEOUT,
                                             f"no result after {timeout:g} s; the worker was "
                                             "killed", seconds=timeout,
                                             fix="raise --timeout if the case is just slow"))
                    replace(w, kill=True)
                elif not w.ready and time.monotonic() >= w.started + STARTUP_TIMEOUT:
                    raise FixtureStoreError(
                        f"a compare worker did not start within {STARTUP_TIMEOUT:g} s")
    finally:
        for w in workers:
            w.stop(kill=w.job is not None)
    return [r for r in results if r is not None]
