"""Run the guard mutation campaign: break each guard on purpose, and check that its tests fail.

Each guard of ``guards.toml`` names one file, an exact snippet of it (found exactly once), the
replacement that breaks the guard, and the tests that must fail then. The repository (the files
git knows, as they are in the working tree) is copied once per job to a temp folder; a
long-lived worker (``worker.py``) in each copy applies one guard's replacement, runs its tests in
a forked pytest with the copy first on ``PYTHONPATH``, and puts the file back byte for byte
before the next guard: the working tree is never edited. A guard is *killed* when its tests
fail, *survived* when they pass (the promise is unprotected), and an *error* when its snippet is
missing or ambiguous, its selection matches no test, or the run broke in another way.

    uv run python scripts/mutation/run.py            # every guard, one worker per core
    uv run python scripts/mutation/run.py -j 1 --only store-has-size --json out.json

Exit status: 0 when every guard is killed, 1 otherwise, 2 for a bad guard list.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GUARDS = HERE / "guards.toml"
WORKER = HERE / "worker.py"
# Tests per baseline run.
BASELINE_PART = 16
# Variables of the caller that would point the copy's tests at the caller's store or registry.
_DROPPED_ENV = ("FIXTURE_STORE_REGISTRY", "FIXTURE_STORE_REQUIRE", "PYTEST_ADDOPTS")


@dataclass(frozen=True)
class Guard:
    id: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    promise: str
    k: str | None = None

    def pytest_args(self) -> list[str]:
        return [*self.tests, *(["-k", self.k] if self.k else [])]


@dataclass(frozen=True)
class Outcome:
    id: str
    status: str  # killed, survived, error
    seconds: float
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "status": self.status,
            "seconds": round(self.seconds, 2),
            "detail": self.detail,
        }


class GuardListError(Exception):
    pass


def load_guards(path: Path = GUARDS) -> list[Guard]:
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    guards: list[Guard] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.get("guard", [])):
        where = f"{path.name}: guard {i + 1} ({raw.get('id', '?')})"
        for key in ("id", "file", "original", "replacement", "tests", "promise"):
            if key not in raw:
                raise GuardListError(f"{where}: missing {key!r}")
        extra = set(raw) - {"id", "file", "original", "replacement", "tests", "promise", "k"}
        if extra:
            raise GuardListError(f"{where}: unknown field {sorted(extra)[0]!r}")
        if raw["id"] in seen:
            raise GuardListError(f"{where}: the id {raw['id']!r} is used twice")
        seen.add(raw["id"])
        if not raw["original"] or raw["original"] == raw["replacement"]:
            raise GuardListError(f"{where}: the replacement must change a non-empty original")
        tests = raw["tests"]
        if isinstance(tests, str) or not tests or not all(isinstance(t, str) for t in tests):
            raise GuardListError(f"{where}: 'tests' must be a non-empty list of pytest node ids")
        guards.append(
            Guard(
                raw["id"],
                raw["file"],
                raw["original"],
                raw["replacement"],
                tuple(tests),
                raw["promise"],
                raw.get("k"),
            )
        )
    if not guards:
        raise GuardListError(f"{path.name}: no [[guard]] entries")
    return guards


def repository_files(repo: Path = REPO) -> list[str]:
    """The files of the working tree that git tracks or would track (ignored files left out)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (repo / f).is_file()})


def copy_repository(files: Iterable[str], target: Path, repo: Path = REPO) -> None:
    for rel in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, dest)


def make_template(files: Iterable[str], target: Path) -> Path:
    """One copy of the repository with its bytecode compiled, cloned for every guard (each run
    then compiles only the file its mutation changed)."""
    copy_repository(files, target)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "fixture_store", "tests", "scripts"],
        cwd=target,
        capture_output=True,
        check=True,
    )
    return target


def clone(template: Path, target: Path) -> None:
    shutil.copytree(template, target, copy_function=shutil.copy2)


def environment(copy: Path, store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env["FIXTURE_STORE_DIR"] = str(store)
    return env


def check_imports_from_copy(copy: Path, store: Path) -> None:
    """The copy's package, plugin and test helpers are the ones imported (not the installed
    package, which an editable install points at the working tree)."""
    probe = (
        "import json, fixture_store, fixture_store.pytest_plugin, tests.support;"
        "print(json.dumps([m.__file__ for m in (fixture_store, fixture_store.pytest_plugin,"
        " tests.support)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=copy,
        env=environment(copy, store),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise GuardListError(f"the import probe failed in the copy:\n{done.stderr}")
    root = str(copy.resolve())
    for imported in json.loads(done.stdout):
        if not str(Path(imported).resolve()).startswith(root + os.sep):
            raise GuardListError(f"the copy imports {imported}, not its own modules: aborting")


class Worker:
    """One copy of the repository and the long-lived ``worker.py`` process that runs guards in
    it, one at a time (see worker.py for the protocol)."""

    def __init__(self, template: Path, folder: Path) -> None:
        self.copy = folder / "repo"
        self.stores = folder / "stores"
        self.stores.mkdir(parents=True)
        clone(template, self.copy)
        self.runs = 0
        self.log = (folder / "worker.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER)],
            cwd=self.copy,
            env=environment(self.copy, self.stores / "worker"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            encoding="utf-8",
        )
        ready = self._read()
        if "ready" not in ready:
            raise GuardListError(f"the mutation worker did not start: {ready}")

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.log.flush()
            tail = _tail(Path(self.log.name).read_text(encoding="utf-8", errors="replace"))
            raise GuardListError(f"the mutation worker stopped:\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, guard: Guard | None, args: Sequence[str], timeout: float
    ) -> tuple[int | None, str, str]:
        """(pytest's exit code, -1 on timeout, None on error; its output; the error)."""
        assert self.process.stdin is not None
        self.runs += 1
        store = self.stores / f"store-{self.runs}"
        request: dict[str, Any] = {"args": list(args), "timeout": timeout, "store": str(store)}
        if guard is not None:
            request |= {
                "file": guard.file,
                "original": guard.original,
                "replacement": guard.replacement,
            }
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._read()
        shutil.rmtree(store, ignore_errors=True)
        return answer["code"], answer["output"], answer["error"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_guard(guard: Guard, worker: Worker, timeout: float) -> Outcome:
    start = time.monotonic()
    code, output, error = worker.run(guard, guard.pytest_args(), timeout)
    seconds = time.monotonic() - start
    if error:
        return Outcome(guard.id, "error", seconds, error)
    if code == 1:
        # The run's own summary line (an inner pytest run in a test prints its own too).
        failed = [ln for ln in output.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
        ours = [ln for ln in failed if ln.split()[1].startswith("tests/")] or failed
        return Outcome(guard.id, "killed", seconds, ours[-1] if ours else "")
    if code == -1:
        return Outcome(guard.id, "killed", seconds, f"timed out after {timeout:.0f}s")
    if code == 0:
        return Outcome(guard.id, "survived", seconds, "its tests pass with the guard broken")
    return Outcome(guard.id, "error", seconds, f"pytest exit {code}:\n{_tail(output)}")


def run_all(
    workers: Sequence[Worker], jobs: Sequence[Any], do: Callable[[Worker, Any], Any]
) -> list[Any]:
    """``do(worker, job)`` for every job, each worker taking the next job when it is free; the
    results in the jobs' order."""
    pending: queue.Queue[tuple[int, Any]] = queue.Queue()
    for item in enumerate(jobs):
        pending.put(item)
    results: list[Any] = [None] * len(jobs)

    def drain(worker: Worker) -> None:
        while True:
            try:
                i, job = pending.get_nowait()
            except queue.Empty:
                return
            results[i] = do(worker, job)

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        list(pool.map(drain, workers))
    return results


def baseline(guards: list[Guard], workers: Sequence[Worker], timeout: float) -> str:
    """Run every guard's tests once, unbroken; '' if they pass, else the failure. A test that
    fails anyway would count as a kill of every guard it protects."""
    plain = sorted({t for g in guards if not g.k for t in g.tests})
    # In parts of a few tests each: every part runs under the guards' own timeout, and the workers
    # share them out as they free up.
    selections: list[list[str]] = [
        plain[i : i + BASELINE_PART] for i in range(0, len(plain), BASELINE_PART)
    ]
    selections += [g.pytest_args() for g in guards if g.k]
    runs = run_all(workers, selections, lambda w, sel: w.run(None, sel, timeout))
    for sel, (code, output, error) in zip(selections, runs, strict=True):
        if error or code != 0:
            return f"pytest exit {code} for {' '.join(sel)}:\n{error or _tail(output, 30)}"
    return ""


def table(outcomes: list[Outcome], guards: dict[str, Guard]) -> str:
    width = max(len(o.id) for o in outcomes)
    rows = [f"{'guard':<{width}}  {'result':<8}  {'seconds':>7}  file", "-" * (width + 40)]
    for o in outcomes:
        rows.append(f"{o.id:<{width}}  {o.status:<8}  {o.seconds:7.1f}  {guards[o.id].file}")
        if o.status != "killed" and o.detail:
            rows.extend(f"{'':<{width}}    {line}" for line in o.detail.splitlines())
    return "\n".join(rows)


def campaign(
    guards: list[Guard],
    template: Path,
    work: Path,
    *,
    jobs: int,
    args: argparse.Namespace,
    report: Any,
) -> list[Outcome]:
    """The baseline, then every guard, on ``jobs`` long-lived workers."""
    started = time.monotonic()
    workers = [Worker(template, work / f"worker-{i}") for i in range(jobs)]
    try:
        broken = "" if args.no_baseline else baseline(guards, workers, args.timeout)
        if broken:
            print(f"the guards' tests fail without any mutation:\n{broken}", file=sys.stderr)
            return [Outcome(g.id, "error", 0.0, "baseline failed") for g in guards]
        base_seconds = time.monotonic() - started
        print(f"baseline: {base_seconds:.1f}s; {len(guards)} guards, -j {jobs}", file=report)
        outcomes: list[Outcome] = run_all(
            workers, guards, lambda w, g: run_guard(g, w, args.timeout)
        )
        return outcomes
    finally:
        for worker in workers:
            worker.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--jobs", type=int, default=0, help="workers (default: one per core)")
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="run one guard")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-')")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per guard")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unbroken run")
    parser.add_argument("--list", action="store_true", help="print the guards and exit")
    args = parser.parse_args(argv)
    try:
        guards = load_guards()
    except (GuardListError, tomllib.TOMLDecodeError) as e:
        print(f"guards.toml: {e}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {g.id for g in guards})
        if unknown:
            print(f"no guard {unknown[0]!r} in guards.toml", file=sys.stderr)
            return 2
        guards = [g for g in guards if g.id in args.only]
    if args.list:
        for g in guards:
            print(f"{g.id}: {g.file}: {g.promise}")
        return 0
    report = sys.stderr if args.json == "-" else sys.stdout
    jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(guards)))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fs-mutation-") as tmp:
        work = Path(tmp)
        template = make_template(repository_files(), work / "template")
        try:
            check_imports_from_copy(template, work / "probe-store")
            outcomes = campaign(guards, template, work, jobs=jobs, args=args, report=report)
        except GuardListError as e:
            print(str(e), file=sys.stderr)
            return 2
    total = time.monotonic() - started
    by_id = {g.id: g for g in guards}
    print(table(outcomes, by_id), file=report)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "error")}
    print(
        f"{counts['killed']} killed, {counts['survived']} survived, {counts['error']} errors "
        f"of {len(outcomes)} guards in {total:.1f}s",
        file=report,
    )
    if args.json:
        doc = {
            "total_seconds": round(total, 2),
            "jobs": jobs,
            "counts": counts,
            "guards": [
                {**o.to_json(), "file": by_id[o.id].file, "promise": by_id[o.id].promise}
                for o in outcomes
            ],
        }
        text = json.dumps(doc, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
    return 0 if counts["killed"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
