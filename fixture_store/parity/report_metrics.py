"""A compare run as DVC metrics (outcome counts per runtime) and a per-operator plot table.

The metrics are a headline a person reads in ``dvc metrics show``: per runtime, how many
cases pass, are known failures (or declared gaps) and fail, so each is a short row. Per-entry
detail of the known mismatches (their errors next to their bounds) is a run number
(:mod:`fixture_store.parity.parts`): it goes to the run folder beside the metrics, never into
a tracked file; the bounds themselves are in the compare report.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from fixture_store.objects import outputs
from fixture_store.objects.outputs import Target
from fixture_store.parity import parts
from fixture_store.parity.cases import Report
from fixture_store.parity.report_html import case_operator
from fixture_store.parity.results import CaseResult, Outcome

# The placeholder of a metrics path that writes one file (one row) per runtime.
RUNTIME_FIELD = "{runtime}"
KNOWN_MISMATCHES = "known-mismatches.csv"
KNOWN_MISMATCH_COLUMNS = (
    "key",
    "runtime",
    "pattern",
    "cases",
    "structural",
    "max_abs",
    "max_abs_bound",
    "max_rel",
    "max_rel_bound",
)


def headline(report: Report, runtime: str) -> dict[str, int]:
    """One runtime's counts: passed, known failures and declared gaps, failing (a known
    failure that now passes, or one beyond its bounds, fails)."""
    results = [r for r in report.results if r.runtime == runtime]
    return {
        "pass": sum(r.outcome is Outcome.PASS and not r.now_passing for r in results),
        "known": sum(r.outcome in (Outcome.KNOWN_FAILURE, Outcome.GAP) for r in results),
        "failing": sum(r.failing for r in results),
    }


def metrics(report: Report) -> dict[str, Any]:
    """Every runtime's headline, in one document (a metrics path without ``{runtime}``)."""
    return {rt: headline(report, rt) for rt in report.runtimes}


def known_mismatches(report: Report) -> list[dict[str, Any]]:
    """Per known mismatch entry and runtime: its cases, the largest error seen over them and
    its bounds (run numbers: the errors are another machine's to differ); a structural one
    (outputs that differ in number, dtype or shape) has no value error to show."""
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for r in report.results:
        error = r.known_error
        if error is None:
            continue
        entry = entries.setdefault(
            (r.runtime, error.pattern),
            {
                "key": f"{error.pattern} ({r.runtime})",
                "runtime": r.runtime,
                "pattern": error.pattern,
                "cases": 0,
                "structural": error.structural,
                "max_abs": 0.0,
                "max_abs_bound": error.max_abs_bound,
                "max_rel": "",
                "max_rel_bound": "" if error.max_rel_bound is None else error.max_rel_bound,
            },
        )
        _add(entry, r)
    for entry in entries.values():
        if entry["structural"]:
            entry["max_abs"] = ""  # no value error was seen, which is not an error of 0
    return [entries[k] for k in sorted(entries)]


def _add(entry: dict[str, Any], r: CaseResult) -> None:
    error = r.known_error
    assert error is not None
    entry["cases"] += 1
    entry["structural"] = entry["structural"] and error.structural
    if not error.structural:
        entry["max_abs"] = max(entry["max_abs"], error.max_abs)
        if error.max_rel is not None:
            entry["max_rel"] = max(entry["max_rel"] or 0.0, error.max_rel)


def operator_rows(report: Report) -> list[dict[str, Any]]:
    """One row per operator and runtime: cases, passed, known failures, failing, pass rate."""
    operators = {r.name: r.operators for r in report.results if r.operators}
    cells: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in report.results:
        cell = cells[(case_operator(r.name, operators), r.runtime)]
        cell["cases"] += 1
        cell["passed"] += r.outcome is Outcome.PASS and not r.now_passing
        cell["known_failure"] += r.outcome is Outcome.KNOWN_FAILURE
        cell["failing"] += r.failing
    return [
        {
            "operator": op,
            "runtime": rt,
            "key": f"{op} ({rt})",
            **c,
            "pass_rate": round(c["passed"] / c["cases"], 4),
        }
        for (op, rt), c in sorted(cells.items(), key=lambda kv: (kv[0][0].lower(), kv[0][1]))
    ]


def _write_json(target: Target, doc: Any) -> None:
    target.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _write_csv(target: Target, rows: list[dict[str, Any]], cols: tuple[str, ...]) -> None:
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=list(cols), extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({c: row.get(c, 0) for c in cols})
    target.write_text(text.getvalue())


def write_metrics(report: Report, where: Target | str | os.PathLike[str]) -> list[Path]:
    """The headline at ``where`` (one file per runtime where it holds ``{runtime}``), and the
    known mismatches' errors and bounds in the run folder beside it; every file by the output
    primitive."""
    target = outputs.target(where)
    path = target.path
    if RUNTIME_FIELD in path.name:
        written = [path.with_name(path.name.replace(RUNTIME_FIELD, rt)) for rt in report.runtimes]
        for rt, each in zip(report.runtimes, written, strict=True):
            _write_json(target.beside(each), headline(report, rt))
    else:
        written = [path]
        _write_json(target, metrics(report))
    _write_csv(
        target.beside(parts.run_path(path).with_name(KNOWN_MISMATCHES)),
        known_mismatches(report),
        KNOWN_MISMATCH_COLUMNS,
    )
    return written


def write(report: Report, metrics_path: Target | None, plot_path: Target | None) -> None:
    if metrics_path is not None:
        write_metrics(report, metrics_path)
    if plot_path is not None:
        cols = (
            "key",
            "operator",
            "runtime",
            "cases",
            "passed",
            "known_failure",
            "failing",
            "pass_rate",
        )
        _write_csv(plot_path, operator_rows(report), cols)
