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
from multiprocessing.process import BaseProcess
from typing import Any

from fixture_store.errors import FixtureStoreError
from fixture_store.parity.results import CaseResult, Outcome, Task

DEFAULT_TIMEOUT = 60.0
# A worker imports numpy, onnx and onnxruntime before it reports ready.
STARTUP_TIMEOUT = 120.0
QUEUE_DEPTH = 2
_READY = "ready"


def default_jobs() -> int:
    return max(
        1,
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
    )


def _worker_main(conn: Connection) -> None:
    # Importing here keeps the parent light; the worker pays the imports once.
    from fixture_store.parity.runtimes.evaluate import evaluate

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
    process: BaseProcess
    conn: Connection
    ready: bool = False
    started: float = field(default_factory=time.monotonic)
    # Sent and not yet answered, oldest first; the oldest is running since ``deadline - timeout``.
    jobs: deque[tuple[int, Task]] = field(default_factory=deque)
    deadline: float = 0.0

    @property
    def busy(self) -> bool:
        return bool(self.jobs)

    @classmethod
    def start(cls, ctx: Any) -> _Worker:
        parent, child = ctx.Pipe()
        process = ctx.Process(
            target=_worker_main, args=(child,), daemon=True, name="fixture-store-compare"
        )
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


def _death(process: BaseProcess) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"the worker died with signal {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker died with signal {-code}"
    return f"the worker exited with status {code}"


# Imported once in the fork server, so every worker (and every replacement after a crash or a
# timeout) starts with them loaded instead of paying the imports again.
# The fork server starts once per process: workers see the environment as it was then.
PRELOAD = ["__main__", "fixture_store.parity.runtimes.evaluate", "onnx", "onnxruntime"]


def _context() -> Any:
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return mp.get_context("spawn")


class WorkerPool:
    """Long-lived workers; started on ``__enter__`` so they boot while the caller verifies."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = default_jobs() if jobs is None else jobs
        self._ctx: Any = None
        self._workers: list[_Worker] = []

    def __enter__(self) -> WorkerPool:
        if self.jobs > 0:
            self._ctx = _context()
            self._workers = [_Worker.start(self._ctx) for _ in range(self.jobs)]
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self._workers:
            w.stop(kill=w.busy or not w.ready)
        self._workers = []

    def run(
        self,
        tasks: Sequence[Task],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        on_result: Callable[[CaseResult], None] | None = None,
    ) -> list[CaseResult]:
        """Evaluate every task, in order of ``tasks``; a crash or hang is that task's result."""
        if not self._workers:
            return _run_here(tasks, on_result)
        return _run_pool(self._ctx, self._workers, tasks, timeout, on_result)


def _run_here(
    tasks: Sequence[Task], on_result: Callable[[CaseResult], None] | None
) -> list[CaseResult]:
    from fixture_store.parity.runtimes.evaluate import evaluate

    out = []
    for task in tasks:
        result = evaluate(task)
        out.append(result)
        if on_result is not None:
            on_result(result)
    return out


def _run_pool(
    ctx: Any,
    workers: list[_Worker],
    tasks: Sequence[Task],
    timeout: float,
    on_result: Callable[[CaseResult], None] | None,
) -> list[CaseResult]:
    return _PoolRun(ctx, workers, tasks, timeout, on_result).run()


class _PoolRun:
    """One run of tasks over the pool's ``workers``: send, wait, then take each worker's answer,
    crash or overrun. A worker that crashes or overruns is replaced in ``workers`` itself, so
    the pool keeps the replacement."""

    def __init__(
        self,
        ctx: Any,
        workers: list[_Worker],
        tasks: Sequence[Task],
        timeout: float,
        on_result: Callable[[CaseResult], None] | None,
    ) -> None:
        self.ctx, self.workers, self.timeout, self.on_result = ctx, workers, timeout, on_result
        self.results: list[CaseResult | None] = [None] * len(tasks)
        self.pending = deque(enumerate(tasks))

    def run(self) -> list[CaseResult]:
        while self.pending or any(w.busy for w in self.workers):
            self._send()
            ready = self._wait()
            for w in list(self.workers):
                if w.conn in ready:
                    self._receive(w)
                elif w.busy and time.monotonic() >= w.deadline:
                    self._timed_out(w)
                elif not w.ready and time.monotonic() >= w.started + STARTUP_TIMEOUT:
                    raise FixtureStoreError(
                        f"a compare worker did not start within {STARTUP_TIMEOUT:g} s"
                    )
        return [r for r in self.results if r is not None]

    def _send(self) -> None:
        for w in self.workers:
            # Two jobs in flight per worker hide the round trip; the deadline is the oldest's.
            while w.ready and len(w.jobs) < QUEUE_DEPTH and self.pending:
                index, task = self.pending.popleft()
                w.conn.send((index, task))
                if not w.jobs:
                    w.deadline = time.monotonic() + self.timeout
                w.jobs.append((index, task))

    def _wait(self) -> set[Any]:
        """The connections with something to read, waiting at most until the next deadline (a
        job's timeout, or a worker's start-up)."""
        watched = [w for w in self.workers if w.busy or not w.ready]
        deadlines = [w.deadline if w.busy else w.started + STARTUP_TIMEOUT for w in watched]
        wait_for = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        return set(wait([w.conn for w in watched], wait_for))

    def _receive(self, w: _Worker) -> None:
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            self._crashed(w)
            return
        if message == _READY:
            w.ready = True
            return
        index, result = message
        w.jobs.popleft()
        w.deadline = time.monotonic() + self.timeout
        self._finish(index, result)

    def _crashed(self, w: _Worker) -> None:
        if not w.busy:
            raise FixtureStoreError(
                f"a compare worker failed to start: {_death(w.process)}",
                fix="run with --jobs 0 to see the error in this process",
            ) from None
        index, task = w.jobs.popleft()
        message = f"{_death(w.process)} while running the case"
        self._finish(index, CaseResult(task.name, task.runtime, Outcome.CRASH, message))
        self._replace(w)

    def _timed_out(self, w: _Worker) -> None:
        index, task = w.jobs.popleft()
        result = CaseResult(
            task.name,
            task.runtime,
            Outcome.TIMEOUT,
            f"no result after {self.timeout:g} s; the worker was killed",
            seconds=self.timeout,
            fix="raise --timeout if the case is just slow",
        )
        self._finish(index, result)
        self._replace(w)

    def _replace(self, w: _Worker) -> None:
        """Kill ``w`` and start a fresh worker in its place; its queued jobs go first."""
        self.pending.extendleft(reversed(w.jobs))
        w.stop(kill=True)
        self.workers[self.workers.index(w)] = _Worker.start(self.ctx)

    def _finish(self, index: int, result: CaseResult) -> None:
        self.results[index] = result
        if self.on_result is not None:
            self.on_result(result)
