"""The parity assertion: a maintainer's outputs against the verified reference, in one line.

``assert_parity("equimo/dinov2_vits14_reg_reference.npz", {"cls_token": out, ...})`` reads the
reference only after it verified (through :class:`~fixture_store.access.Fixtures`), compares every
array with :func:`~fixture_store.numerics.arrays.compare_arrays` under the record's tolerance (its
dtype and shape rules included), and raises :class:`ParityError`, an ``AssertionError``, when an
array is outside it, missing or extra. The message names the worst array, its errors, the index
of its worst element with the expected and actual values there, and the tolerance.

With ``dump=DIR`` (or ``$FIXTURE_STORE_PARITY_DUMP``) a failing candidate is written to
``DIR/<name without suffix>.candidate.npz`` with a copy of the reference beside it
(``.reference.npz``), for inspection; never inside the store. Needs numpy only.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from fixture_store.access import Fixtures
from fixture_store.errors import UsageError
from fixture_store.objects import outputs
from fixture_store.parity import oracle, runlog
from fixture_store.parity.arrays import ArrayComparison, compare_many, dtype_name
from fixture_store.parity.oracle import OracleJudgement
from fixture_store.parity.ordered import Divergence, first_divergence
from fixture_store.registry import Content, Tolerance
from fixture_store.registry.environment import Environment
from fixture_store.registry.patterns import is_pattern, matches

DUMP_ENV = "FIXTURE_STORE_PARITY_DUMP"
_OTHERS_SHOWN = 8


class ParityError(AssertionError):
    """Outputs are not at parity with their reference; ``report`` holds every comparison."""

    def __init__(self, message: str, report: ParityReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class ParityReport:
    """Every array of one reference compared with the candidate's."""

    name: str
    comparisons: tuple[ArrayComparison, ...]
    missing: tuple[str, ...] = ()  # in the reference, not given
    extra: tuple[str, ...] = ()  # given, not in the reference
    dumped: Path | None = None
    environment: str = ""  # where it ran ("": not given)
    rule: str = ""  # the expectation that judged it ("": the record's own rule)
    divergence: Divergence | None = None  # an ordered record's first divergent intermediate
    oracle: tuple[OracleJudgement, ...] = ()  # against the record's oracle, if it names one

    @property
    def ok(self) -> bool:
        arrays = all(c.ok for c in self.comparisons) and all(j.ok for j in self.oracle)
        return not self.missing and not self.extra and arrays

    @property
    def worst(self) -> ArrayComparison | None:
        """The failing array to show first: an ordered record's first divergent intermediate,
        else a dtype or shape mismatch, else the largest max absolute error."""
        failing = [c for c in self.comparisons if not c.ok]
        first = self.divergence.first if self.divergence else None
        for c in failing:
            if c.name == first:
                return c
        return max(failing, key=lambda c: (not c.measured, c.max_abs), default=None)


def assert_parity(
    name: str,
    actual: Mapping[str, Any] | Any,
    *,
    fixtures: Fixtures | None = None,
    dump: str | os.PathLike[str] | None = None,
    only: Iterable[str] | None = None,
    environment: Environment | str | None = None,
) -> ParityReport:
    """Assert that ``actual`` (array name -> array; a bare array for a one-array reference)
    is at parity with the verified reference ``name`` under its record's tolerance.

    ``only`` names the arrays of the reference to compare, by name or glob pattern (the
    others are neither required from ``actual`` nor compared); a name the reference does not
    hold, or a pattern matching none of its arrays, is a usage error naming its arrays.

    The arrays the record's tolerance names as ``inputs`` (:mod:`~fixture_store.registry.roles`)
    are not required from ``actual`` and not judged by the record's rule; an input ``actual``
    does give is compared exactly (outputs computed from other inputs mean nothing).

    ``environment`` is where the comparison runs (an :class:`Environment`, or its text
    ``device:cuda,runtime:torch``): the record's ``expectations`` entry that holds there judges,
    against its ``reference`` if it names one, and the run is appended to the run log
    (:mod:`~fixture_store.parity.runlog`). ``None``: the record's own rule, nothing logged.

    ``fixtures`` is the verified view to read from (default: :meth:`Fixtures.open`, the store
    and registry the environment names). Returns the report when every array is within
    tolerance; raises :class:`ParityError` otherwise, and a typed
    :class:`~fixture_store.errors.ArtifactError` when the reference does not verify.
    """
    __tracebackhide__ = True  # pytest shows the message, not this frame
    view = fixtures or Fixtures.open()
    where = Environment.parse(environment) if isinstance(environment, str) else environment
    record = _arrays_record(view, name)
    written = record.tolerance or Tolerance()
    entry = written.expectation(where)
    reference = entry.reference if entry is not None and entry.reference else name
    digest = (record if reference == name else _arrays_record(view, reference)).digest
    expected = _only(view.arrays(reference), only, name)
    given = _named(actual, expected, name)
    tolerance = written.in_environment(where)
    report = compare(name, expected, given, tolerance)
    if tolerance.oracle is not None:
        _arrays_record(view, tolerance.oracle.record)  # verified, and arrays
        truth = view.arrays(tolerance.oracle.record)
        report = replace(report, oracle=oracle.judge(tolerance.oracle, truth, expected, given))
    if where is not None:
        rule = entry.key if entry is not None else ""
        report = replace(report, environment=str(where), rule=rule)
        run = runlog.Run(name, str(digest), str(where), rule, report.ok, len(report.comparisons))
        runlog.append(view.store, run)
    if report.ok:
        return report
    target = dump if dump is not None else os.environ.get(DUMP_ENV) or None
    if target is not None:
        report = _dump(report, Path(target), view, expected, given)
    raise ParityError(message(report, expected, given, tolerance), report)


def _arrays_record(view: Fixtures, name: str) -> Any:
    record = view.verified(name)
    if record.content is not Content.ARRAYS:
        raise UsageError(
            f"{name} is not an NPY/NPZ reference (kind {record.kind}, media type "
            f"{record.media_type or 'none'}): a parity assertion compares arrays",
            fix="assert parity against a record of an .npy or .npz file",
        )
    return record


def _only(expected: Mapping[str, Any], only: Iterable[str] | None, name: str) -> Mapping[str, Any]:
    """The arrays of the reference ``only`` names or its patterns match (all when ``None``)."""
    if only is None:
        return expected
    wanted = [only] if isinstance(only, str) else list(only)
    unknown = [w for w in wanted if not any(_selects(w, n) for n in expected)]
    if unknown or not wanted:
        raise UsageError(
            f"assert_parity(only=...) for {name}: "
            + (
                f"no array {', '.join(map(repr, unknown))} (a pattern matches none)"
                if unknown
                else "names no array"
            ),
            fix=f"name arrays of the reference (or glob patterns over them): "
            f"{', '.join(sorted(expected))}",
        )
    return {n: v for n, v in expected.items() if any(_selects(w, n) for w in wanted)}


def _selects(entry: str, name: str) -> bool:
    return entry == name or (is_pattern(entry) and matches(entry, name))


def compare(
    name: str,
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    tolerance: Tolerance | None,
) -> ParityReport:
    """Every expected array compared with the actual one of its name, under ``tolerance`` (an
    input exactly: :meth:`Tolerance.for_array`); an input of its ``inputs`` is not missing when
    not given."""
    tol = tolerance or Tolerance()
    role = tol.inputs.holds if tol.inputs is not None else lambda _key: False
    comparisons = compare_many(
        (key, expected[key], actual[key], tol.for_array(key, dtype=_dtype(expected[key])))
        for key in sorted(expected)
        if key in actual
    )
    missing = tuple(sorted(k for k in set(expected) - set(actual) if not role(k)))
    steps = tol.intermediates
    divergence = first_divergence(steps, comparisons, missing) if steps is not None else None
    extra = tuple(sorted(set(actual) - set(expected)))
    return ParityReport(name, comparisons, missing, extra, divergence=divergence)


def message(
    report: ParityReport,
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    tolerance: Tolerance | None,
) -> str:
    """What a failing assertion says, worst array first."""
    failing = [c for c in report.comparisons if not c.ok]
    beyond = [j for j in report.oracle if not j.ok]
    problems = len(failing) + len(report.missing) + len(report.extra) + len(beyond)
    lines = [f"{report.name}: not at parity ({problems} problem{'s' * (problems != 1)})"]
    if report.environment:
        rule = f"expectation {report.rule!r}" if report.rule else "the record's own rule"
        lines.append(f"environment: {report.environment} (judged by {rule})")
    if report.divergence is not None:
        lines.extend(report.divergence.lines())
    worst = report.worst
    if worst is not None:
        first = report.divergence is not None and worst.name == report.divergence.first
        label = "first divergent array" if first else "worst array"
        lines.extend(_worst_lines(worst, expected[worst.name], actual[worst.name], label))
    lines.extend(f"oracle: {j.describe()}" for j in beyond)
    if report.missing:
        lines.append(f"missing: {list(report.missing)} (in the reference, not given)")
    if report.extra:
        lines.append(f"extra: {list(report.extra)} (given, not in the reference)")
    others = [c for c in report.comparisons if c is not worst]
    if others:
        lines.append("other arrays:")
    for c in others[:_OTHERS_SHOWN]:
        lines.append(f"  {c.name}: {c.outcome}" + (f": {c.reason}" if c.reason else ""))
        if c.measured:
            lines[-1] += f" ({_errors(c)})"
    if len(others) > _OTHERS_SHOWN:
        lines.append(f"  … and {len(others) - _OTHERS_SHOWN} more arrays")
    if worst is None and tolerance is not None:
        lines.append(f"tolerance: {tolerance.to_json()}")
    if report.dumped is not None:
        lines.append(f"candidate written to {report.dumped} (the reference beside it)")
    else:
        lines.append(f"to inspect the candidate: dump=DIR or {DUMP_ENV}=DIR")
    return "\n".join(lines)


def _worst_lines(
    worst: ArrayComparison, expected: Any, actual: Any, label: str = "worst array"
) -> list[str]:
    exp, act = np.asarray(expected), np.asarray(actual)
    tol = worst.tolerance.describe() if worst.tolerance else "the default tolerance"
    lines = [
        f"{label}: {worst.name} {exp.dtype}{list(exp.shape)}: {worst.reason}",
        f"  tolerance: {tol}",
    ]
    if not worst.measured:
        return lines
    lines.append(f"  errors: {_errors(worst)}")
    if worst.worst_index is not None and exp.size:
        index = worst.worst_index
        there = act.reshape(exp.shape)[index]
        lines.append(
            f"  worst element at index {index}: expected {_value(exp[index])}, "
            f"actual {_value(there)}"
        )
    return lines


def _errors(c: ArrayComparison) -> str:
    return (
        f"max abs {c.max_abs:.3g}, mean abs {c.mean_abs:.3g}, rms {c.rms:.3g}, "
        f"max rel {c.max_rel:.3g}, max {c.max_ulp:.4g} ULP, 1-cos {c.cosine:.3g}"
    )


def _dtype(values: Any) -> str:
    dtype = getattr(values, "dtype", None)
    return dtype_name(dtype if isinstance(dtype, np.dtype) else np.asarray(values).dtype)


def _value(x: Any) -> str:
    item = np.asarray(x)
    return repr(item.item()) if item.dtype.kind in "biufc" else repr(item.astype(object).item())


def _named(
    actual: Mapping[str, Any] | Any, expected: Mapping[str, Any], name: str
) -> dict[str, Any]:
    if isinstance(actual, Mapping):
        bad = [k for k in actual if not isinstance(k, str)]
        if bad:
            raise UsageError(f"parity of {name}: array names must be strings, not {bad[0]!r}")
        return dict(actual)
    if len(expected) != 1:
        raise UsageError(
            f"parity of {name}: a bare array where the reference holds {len(expected)} arrays",
            fix=f"pass a mapping of array name -> array: {sorted(expected)}",
        )
    return {next(iter(expected)): actual}


def _dump(
    report: ParityReport,
    folder: Path,
    view: Fixtures,
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
) -> ParityReport:
    """Write the candidate (and a copy of the reference) under ``folder``, outside the store.

    ``folder`` is the user's choice (resolved once); everything below it, the family's folders
    and the two files, is created through the path primitive: a link planted at any of them
    (in a shared ``/tmp`` folder, by anyone) is refused, never written through, and each file
    replaces what is at its name, never what a link there points to."""
    root = folder.resolve()
    target = outputs.Target(root, (view.store.root,), "parity dump folder")
    *parents, last = report.name.split("/")
    stem = last.removesuffix(".npz").removesuffix(".npy")
    with (
        target.folder(_dump_refusal) as base,
        base.folder(*parents, create=True) as where,
    ):
        for suffix, arrays in (("candidate", actual), ("reference", expected)):
            with where.writing(f"{stem}.{suffix}.npz") as out:
                _save(out, arrays)
    candidate = root.joinpath(*parents, f"{stem}.candidate.npz")
    return replace(report, dumped=candidate)


def _dump_refusal(path: str, what: str) -> UsageError:
    return UsageError(
        f"the parity dump would write through {path}, which is {what}; a dump is written only "
        "into plain folders (a link there could point into the store or at any file you can "
        "write)",
        fix=f"remove {path}, or name another dump folder (dump=DIR or {DUMP_ENV}=DIR)",
    )


def _save(out: BinaryIO, arrays: Mapping[str, Any]) -> None:
    # Member by member, as np.savez writes them, so that an array named like one of savez's
    # own options (``allow_pickle``) stays an array.
    with zipfile.ZipFile(out, "w") as npz:
        for key, value in arrays.items():
            with npz.open(f"{key}.npy", "w") as member:
                np.save(member, np.asarray(value), allow_pickle=False)
