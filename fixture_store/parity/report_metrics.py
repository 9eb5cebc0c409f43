"""A compare run as DVC metrics (outcome counts per runtime) and a per-operator plot table."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from fixture_store.parity.cases import Report
from fixture_store.parity.report_html import case_operator
from fixture_store.parity.results import KnownError, Outcome


def metrics(report: Report) -> dict[str, Any]:
    return {
        "ok": report.exit_code == 0,
        "cases": len({r.name for r in report.results}),
        "runtimes": {
            rt: {o.replace("-", "_"): n for o, n in c.items()} for rt, c in report.counts().items()
        },
        "now_passing": len(report.now_passing),
        "inactive_known_failures": len(report.inactive),
        "beyond_known_bounds": len(report.beyond_known_bounds),
        "known_mismatches": known_mismatches(report),
    }


def known_mismatches(report: Report) -> dict[str, dict[str, Any]]:
    """Per known mismatch entry (``"RUNTIME PATTERN"``): its cases, the largest error over
    them and its bounds, so ``dvc metrics diff`` shows an excused error that grows."""
    entries: dict[str, dict[str, Any]] = {}
    for r in report.results:
        error = r.known_error
        if error is None:
            continue
        key = f"{r.runtime} {error.pattern}"
        entry = entries.setdefault(key, {"cases": 0, "max_abs": 0.0, **_bounds(error)})
        entry["cases"] += 1
        entry["max_abs"] = max(entry["max_abs"], error.max_abs)
        if error.max_rel is not None:
            entry["max_rel"] = max(entry.get("max_rel", 0.0), error.max_rel)
    return dict(sorted(entries.items()))


def _bounds(error: KnownError) -> dict[str, float]:
    bounds = {"max_abs_bound": error.max_abs_bound}
    if error.max_rel_bound is not None:
        bounds["max_rel_bound"] = error.max_rel_bound
    return bounds


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


def write(report: Report, metrics_path: Path | None, plot_path: Path | None) -> None:
    if metrics_path is not None:
        metrics_path.parent.mkdir(parents=True, exist_ok=True)
        metrics_path.write_text(json.dumps(metrics(report), indent=2, sort_keys=True) + "\n")
    if plot_path is not None:
        plot_path.parent.mkdir(parents=True, exist_ok=True)
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
        with open(plot_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(cols))
            w.writeheader()
            for row in operator_rows(report):
                w.writerow({c: row.get(c, 0) for c in cols})
