"""Run one verified case with one runtime and classify what happened (inside a worker)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixture_store.errors import ArtifactError, RegistryError
from fixture_store.parity.arrays import ArrayComparison, compare_arrays
from fixture_store.parity.arrays import Outcome as ArrayOutcome
from fixture_store.parity.results import CaseResult, Outcome, Task
from fixture_store.parity.runtimes import resolve
from fixture_store.readers.onnxcase import OnnxCase, load_case
from fixture_store.registry import Tolerance, Where

# How runtimes say "this operator/type/opset is not implemented" (ORT status codes and
# messages, ReferenceEvaluator's NotImplementedError and lookup failures).
_NOT_IMPLEMENTED = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|is not a registered function/op|"
    r"not implemented|No implementation|Unable to find|unsupported|not supported|"
    r"No Op registered|no schema registered",
    re.IGNORECASE,
)
# A report line stays readable: an error message is cut here, and this many problems are shown.
_MESSAGE_MAX = 600
_PROBLEMS_SHOWN = 3


def classify(exc: BaseException) -> Outcome:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, NotImplementedError) or "NotImplemented" in type(exc).__name__:
        return Outcome.NOT_IMPLEMENTED
    if _NOT_IMPLEMENTED.search(text):
        return Outcome.NOT_IMPLEMENTED
    return Outcome.ERROR


def describe(exc: BaseException, stage: str) -> str:
    message = " ".join(str(exc).split())
    if len(message) > _MESSAGE_MAX:
        message = message[:_MESSAGE_MAX] + "…"
    return f"{stage}: {type(exc).__name__}: {message}"


def evaluate(task: Task) -> CaseResult:
    """Load, prepare, run every data set and compare; never raises for a case's own failure."""
    start = time.perf_counter()

    def done(
        outcome: Outcome,
        detail: str = "",
        arrays: Sequence[ArrayComparison] = (),
        operators: tuple[str, ...] = (),
        fix: str | None = None,
    ) -> CaseResult:
        return CaseResult(
            task.name,
            task.runtime,
            outcome,
            detail,
            tuple(arrays),
            operators,
            time.perf_counter() - start,
            fix,
        )

    try:
        case = load_case(
            task.folder, name=task.name, tolerance=task.tolerance, members=task.members
        )
    except ArtifactError as e:
        return done(Outcome.REFUSED, e.about(task.name), fix=e.fix)
    refused = unjudgeable(case)
    if refused is not None:
        return done(Outcome.REFUSED, refused[0], fix=refused[1])
    ops = case.operators
    try:
        run = resolve(task.runtime)(case)
    except Exception as e:
        return done(classify(e), describe(e, "prepare"), operators=ops)
    comparisons: list[ArrayComparison] = []
    for dataset in case.datasets:
        try:
            outputs = run(dataset.feeds)
        except Exception as e:
            return done(classify(e), describe(e, f"run data set {dataset.index}"), comparisons, ops)
        problem, found = compare_outputs(case, dataset.outputs, outputs, prefix=f"{dataset.index}:")
        comparisons.extend(found)
        if problem:
            return done(Outcome.MISMATCH, f"data set {dataset.index}: {problem}", comparisons, ops)
    return done(Outcome.PASS, arrays=comparisons, operators=ops)


def unjudgeable(case: OnnxCase) -> tuple[str, str] | None:
    """Why the case's tolerance cannot judge it here, and the fix (``None``: it can)."""
    stray = stray_overrides(case)
    if stray:
        return stray, "key per_array by the model's output names"
    if case.tolerance is not None and case.tolerance.oracle is not None:
        return (
            "tolerance.oracle: compare does not judge an ONNX case against an oracle "
            f"({case.tolerance.oracle.record}); passing it without would skip the oracle",
            "judge it with assert_parity or regeneration, or remove the oracle",
        )
    return None


def stray_overrides(case: OnnxCase) -> str:
    """A ``per_array`` key of the case's tolerance that names no output of its model (an
    override nobody looks up would silently not apply), or ''."""
    outputs = [o.name for o in case.model.graph.output]
    if case.tolerance is None:
        return ""
    try:
        case.tolerance.check_names(outputs, Where(), what="output of the model", plural="outputs")
    except RegistryError as e:
        return f"{e.field}: {e.reason}"
    return ""


def compare_outputs(
    case: OnnxCase, expected: Sequence[tuple[str, Any]], actual: Sequence[Any], *, prefix: str = ""
) -> tuple[str, list[ArrayComparison]]:
    """Compare a run's outputs with the expected ones; the first problem (or '') and the stats."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs where {len(expected)} are expected", []
    findings = _Findings(case.tolerance or Tolerance(), prefix)  # none written: the defaults
    for (name, exp), act in zip(expected, actual, strict=True):
        findings.value(name, name, exp, act)
    problems = findings.problems
    shown = "; ".join(problems[:_PROBLEMS_SHOWN])
    return shown + (" …" if len(problems) > _PROBLEMS_SHOWN else ""), findings.found


@dataclass
class _Findings:
    """What comparing outputs found, in order: a comparison per tensor, and the problems.

    An output may be a tensor, an optional (None), a sequence or a map of them, nested; each
    tensor is compared under the tolerance of the output (``output``) it belongs to.
    """

    tolerance: Tolerance
    prefix: str
    found: list[ArrayComparison] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def value(self, output: str, label: str, exp: Any, act: Any) -> None:
        if exp is None or act is None:
            self._optional(label, exp, act)
        elif isinstance(exp, list):
            self._sequence(output, label, exp, act)
        elif isinstance(exp, dict):
            self._map(output, label, exp, act)
        elif isinstance(act, list | tuple | dict):
            self.problems.append(f"{label}: {type(act).__name__} where a tensor is expected")
        else:
            self._tensor(output, label, exp, act)

    def _optional(self, label: str, exp: Any, act: Any) -> None:
        if (exp is None) != (act is None):
            self.problems.append(
                f"{label}: {'empty' if act is None else 'a value'} where "
                f"{'an empty optional' if exp is None else 'a value'} is expected"
            )

    def _sequence(self, output: str, label: str, exp: list[Any], act: Any) -> None:
        if not isinstance(act, list | tuple):
            self.problems.append(f"{label}: {type(act).__name__} where a sequence is expected")
            return
        if len(act) != len(exp):
            self.problems.append(f"{label}: sequence of {len(act)} where {len(exp)} is expected")
            return
        for i, (e, a) in enumerate(zip(exp, act, strict=True)):
            self.value(output, f"{label}[{i}]", e, a)

    def _map(self, output: str, label: str, exp: dict[Any, Any], act: Any) -> None:
        if not isinstance(act, dict) or set(act) != set(exp):
            self.problems.append(f"{label}: keys differ from the expected map")
            return
        for key in sorted(exp, key=repr):
            self.value(output, f"{label}[{key!r}]", exp[key], act[key])

    def _tensor(self, output: str, label: str, exp: Any, act: Any) -> None:
        exp_a, act_a = np.asarray(exp), np.asarray(act)
        if exp_a.dtype == object and act_a.dtype.kind in "US":
            act_a = act_a.astype(object)
        comparison = compare_arrays(
            self.prefix + label,
            exp_a,
            act_a,
            self.tolerance.for_array(output, dtype=str(exp_a.dtype)),
        )
        self.found.append(comparison)
        if comparison.outcome is ArrayOutcome.DRIFT:
            self.problems.append(f"{label}: {comparison.reason}")
