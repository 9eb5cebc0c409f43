"""Comparing runtimes on verified ONNX cases: verify, dispatch to workers, apply known failures.

Only verified cases reach a runtime: a case that fails verification is a ``refused`` result for
every runtime (and a declared gap a ``gap``) and is never sent to a worker. Known failures are
registry data (per runtime, per case or glob pattern, with a reason); a known failure whose case
now passes is reported so the entry can be removed.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from fixture_store.access import Fixtures, checkout_tree
from fixture_store.errors import EXIT_FAILED, EXIT_OK, RegistryError, UsageError
from fixture_store.parity import parts
from fixture_store.parity.results import CaseResult, KnownError, Outcome, Task
from fixture_store.parity.runtimes import check_runtime, environment
from fixture_store.parity.runtimes.run import DEFAULT_TIMEOUT, WorkerPool, default_jobs
from fixture_store.registry import Kind, Tolerance
from fixture_store.registry.files import DIRNAME
from fixture_store.registry.known_failures import KnownFailure, check_counts, suggest_bound
from fixture_store.verify import Status, verify_names

CASE_KIND = Kind.ONNX_CASE


@dataclass(frozen=True)
class Report:
    """A compare run: its results, and its time (a run number)."""

    runtimes: tuple[str, ...]
    results: tuple[CaseResult, ...]
    wall_seconds: float = field(default=0.0, metadata=parts.RUN)

    def counts(self) -> dict[str, dict[str, int]]:
        per: dict[str, Counter[str]] = {rt: Counter() for rt in self.runtimes}
        for r in self.results:
            per[r.runtime][str(r.outcome)] += 1
        return {
            rt: {str(o): per[rt][str(o)] for o in Outcome if per[rt][str(o)]}
            for rt in self.runtimes
        }

    @property
    def now_passing(self) -> list[CaseResult]:
        return [r for r in self.results if r.now_passing]

    @property
    def inactive(self) -> list[CaseResult]:
        """Results a known failure matched whose machine condition does not hold here."""
        return [r for r in self.results if r.inactive_condition]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(r.failing for r in self.results) else EXIT_OK

    @property
    def beyond_known_bounds(self) -> list[CaseResult]:
        """Mismatches a known failure matched whose error is larger than its bounds."""
        return [r for r in self.results if r.beyond_known_bounds]

    def tracked(self) -> Report:
        """This report without its run numbers (:func:`parts.without_run`): what a page for a
        tracked file may show."""
        return cast(Report, parts.without_run(self))

    def to_json(self, part: parts.Part = parts.Part.ALL) -> dict[str, Any]:
        """The report, or one of its parts: the tracked part is the same on every machine that
        passes; the run part holds each result's detail, errors and time, by name and runtime."""
        doc = parts.fields_json(
            self, part, skip=("results",), convert={"wall_seconds": lambda s: round(s, 3)}
        )
        if part is not parts.Part.RUN:
            doc.update(self._summary(part))
        doc["results"] = [r.to_json(part) for r in self.results]
        return doc

    def _summary(self, part: parts.Part) -> dict[str, Any]:
        return {
            "cases": len({r.name for r in self.results}),
            "counts": self.counts(),
            "now_passing": [
                {"name": r.name, "runtime": r.runtime, "known_reason": r.known_reason}
                for r in self.now_passing
            ],
            "beyond_known_bounds": [
                {"name": r.name, "runtime": r.runtime, **r.known_error.to_json(part)}
                for r in self.beyond_known_bounds
                if r.known_error is not None
            ],
            "inactive_known_failures": [
                {
                    "name": r.name,
                    "runtime": r.runtime,
                    "outcome": str(r.outcome),
                    "condition": r.inactive_condition,
                }
                for r in self.inactive
            ],
        }


def select_cases(
    fixtures: Fixtures, names: Iterable[str] = (), families: Iterable[str] = ()
) -> list[str]:
    """The onnx-case names chosen by explicit names/patterns and families (all cases if none)."""
    names, families = list(names), list(families)
    chosen = fixtures.registry.select(names, families)
    invalid = dict(fixtures.registry.invalid())
    explicit = {n for n in names if not any(ch in n for ch in "*?[")}
    cases = []
    for name in chosen:
        if name in invalid:
            cases.append(name)  # refused at verification, with the registry's message
            continue
        kind = fixtures.registry.get(name).kind
        if kind == CASE_KIND:
            cases.append(name)
        elif name in explicit:
            raise UsageError(
                f"{name} is a {kind!r} artifact; compare runs onnx-case artifacts",
                fix="fixture-store list  (shows each artifact's kind)",
            )
    if not cases:
        raise UsageError(
            "no onnx-case artifacts selected",
            fix="name cases or pass --family with a family of onnx cases",
        )
    return cases


def apply_known_failures(result: CaseResult, known: Sequence[KnownFailure]) -> CaseResult:
    """Mark a failure the registry knows about; flag a known failure whose case now passes.

    A refusal or a gap is never excused: a known failure speaks about a runtime on good data.
    When the entry names an outcome, only that outcome is excused; a mismatch only by a
    mismatch entry, and only up to its bounds: a larger error fails, with the bound to
    register if it is understood. An entry with a machine condition that does not hold here is
    inactive: it is reported and excuses nothing.
    """
    if result.outcome in (Outcome.REFUSED, Outcome.GAP):
        return result
    entry = next((k for k in known if k.matches(result.runtime, result.name)), None)
    return result if entry is None else _apply(result, entry)


def _apply(result: CaseResult, entry: KnownFailure) -> CaseResult:
    """What the known failure that matches a result makes of it."""
    if not entry.active(environment(result.runtime)):
        note = (
            f"the known failure {entry.pattern!r} ({entry.runtime}) applies only where "
            f"{entry.condition} holds, which it does not here"
        )
        return dataclasses.replace(
            result,
            known_reason=entry.reason,
            inactive_condition=entry.condition,
            detail=f"{result.detail} ({note})" if result.outcome is not Outcome.PASS else note,
        )
    if result.outcome is Outcome.PASS:
        return dataclasses.replace(
            result,
            known_reason=entry.reason,
            now_passing=True,
            fix=f"remove the known failure {entry.pattern!r} ({entry.runtime}) from the registry",
        )
    if entry.outcome is not None and entry.outcome != str(result.outcome):
        return dataclasses.replace(
            result,
            detail=f"{result.detail} (a known failure matches but is registered as "
            f"{entry.outcome!r}: {entry.reason})",
        )
    if result.outcome is Outcome.MISMATCH:
        return _bounded(result, entry)
    return _excused(result, entry)


def _bounded(result: CaseResult, entry: KnownFailure) -> CaseResult:
    """A mismatch is excused only by a mismatch entry, and only up to its bounds."""
    if entry.outcome is None:
        return dataclasses.replace(
            result,
            detail=f"{result.detail} (a known failure matches but names no outcome; a "
            f"mismatch is excused only by a 'mismatch' entry with bounds: {entry.reason})",
        )
    error = KnownError.of(result.arrays, entry)
    exceeded = error.exceeded()
    if not exceeded:
        return _excused(result, entry, error)
    seen = "; ".join(f"{key} {value:.3g} > bound {bound:g}" for key, value, bound in exceeded)
    # A count of special values is exact (no margin): the same elements fail every run.
    suggested = ", ".join(
        f"{key} {int(value)} (the count seen)"
        if key == "special_values"
        else f"{key} {suggest_bound(value):g} (twice the error seen)"
        for key, value, _ in exceeded
    )
    return dataclasses.replace(
        result,
        known_reason=entry.reason,
        known_error=error,
        detail=f"{result.detail} (the known failure {entry.label} excuses a smaller error: {seen})",
        fix=f"if the larger error is understood, set {suggested} on "
        f"the known failure {entry.label} in {_shown(entry)}; otherwise the "
        "runtime regressed on this case",
    )


def _shown(entry: KnownFailure) -> str:
    """The entry's file as the project names it (the report must not name this checkout)."""
    return f"{DIRNAME}/{Path(entry.file).name}" if entry.file else "the registry"


def _excused(
    result: CaseResult, entry: KnownFailure, error: KnownError | None = None
) -> CaseResult:
    return dataclasses.replace(
        result,
        outcome=Outcome.KNOWN_FAILURE,
        underlying=result.outcome,
        known_reason=entry.reason,
        known_error=error,
    )


def compare(
    fixtures: Fixtures,
    names: Sequence[str],
    runtimes: Sequence[str],
    *,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Verify ``names`` and run every verified case with every runtime."""
    runtimes = tuple(dict.fromkeys(check_runtime(r) for r in runtimes))
    if not runtimes:
        raise UsageError("no runtime chosen", fix="pass --runtime ort and/or --runtime reference")
    known = list(fixtures.registry.known_failures())
    check_counts(known, fixtures.registry.names())
    start = time.perf_counter()
    jobs = default_jobs() if jobs is None else jobs
    with WorkerPool(min(jobs, len(names) * len(runtimes))) as pool:
        # Workers boot (imports) while this process verifies and checks out the trees.
        tasks, by_name = _verified_tasks(fixtures, names, runtimes, on_result)
        ran = pool.run(tasks, timeout=timeout, on_result=on_result)
    for result in ran:
        by_name[result.name].append(apply_known_failures(result, known))
    order = {rt: i for i, rt in enumerate(runtimes)}
    results = tuple(r for n in names for r in sorted(by_name[n], key=lambda r: order[r.runtime]))
    return Report(runtimes, results, time.perf_counter() - start)


def _verified_tasks(
    fixtures: Fixtures,
    names: Sequence[str],
    runtimes: Sequence[str],
    on_result: Callable[[CaseResult], None] | None,
) -> tuple[list[Task], dict[str, list[CaseResult]]]:
    """Tasks for the verified cases; refused/gap results for the others (never dispatched)."""
    verified = verify_names(fixtures.store, fixtures.registry, names, full=fixtures.full)
    by_name: dict[str, list[CaseResult]] = {n: [] for n in names}
    tasks: list[Task] = []
    for check in verified:
        if not check.ok:
            outcome = Outcome.GAP if check.status is Status.GAP else Outcome.REFUSED
            detail = (
                check.message if outcome is Outcome.GAP else (f"{check.status}: {check.message}")
            )
            for rt in runtimes:
                refused = CaseResult(check.name, rt, outcome, detail, fix=check.fix)
                by_name[check.name].append(refused)
                if on_result is not None:
                    on_result(refused)
            continue
        record = fixtures.registry.get(check.name)
        folder = checkout_tree(fixtures.store, record)
        members = tuple(record.members.members) if record.members is not None else None
        for rt in runtimes:
            tolerance, refusal = _in_environment(record.tolerance, rt)
            if refusal is None:
                tasks.append(Task(check.name, rt, str(folder), tolerance, members))
                continue
            refused = CaseResult(check.name, rt, Outcome.REFUSED, refusal[0], fix=refusal[1])
            by_name[check.name].append(refused)
            if on_result is not None:
                on_result(refused)
    return tasks, by_name


def _in_environment(
    tolerance: Tolerance | None, runtime: str
) -> tuple[Tolerance | None, tuple[str, str] | None]:
    """The tolerance a runtime's run is judged by (its expectation's, where one holds for the
    runtime's environment), or why the case cannot be judged there and the fix."""
    if tolerance is None:
        return None, None
    where = environment(runtime)
    try:
        entry = tolerance.expectation(where)
    except RegistryError as e:
        return None, (f"{where}: {e.reason}", e.fix or "")
    if entry is not None and entry.reference is not None:
        return None, (
            f"tolerance.expectations.{entry.key}: names the reference {entry.reference}; an "
            "ONNX case is judged against its own expected outputs",
            "remove 'reference' from the expectation, or register the case it names",
        )
    return tolerance.in_environment(where), None
