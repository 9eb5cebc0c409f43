"""A static HTML report of a compare run: one self-contained file, no scripts or fetched styles.

Sections: counts per runtime, a pass matrix per operator for every runtime, histograms of the
maximum absolute and relative error over compared arrays, and every non-passing result.
"""

from __future__ import annotations

import html
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from fixture_store.parity.cases import Report
from fixture_store.parity.results import CaseResult, KnownError, Outcome

_COLORS = {
    Outcome.PASS: "#2e7d32",
    Outcome.KNOWN_FAILURE: "#00838f",
    Outcome.GAP: "#00838f",
    Outcome.MISMATCH: "#c62828",
    Outcome.NOT_IMPLEMENTED: "#ef6c00",
    Outcome.ERROR: "#ad1457",
    Outcome.REFUSED: "#b71c1c",
    Outcome.TIMEOUT: "#6a1b9a",
    Outcome.CRASH: "#4e342e",
}
# Error histogram buckets: exact zero, then decades up to >= 1.
_DECADES = list(range(-12, 1))

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0} td,th{padding:3px 8px;border:1px solid #ddd}
th{background:#f5f5f5;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.full{background:#c8e6c9} .part{background:#fff3c4} .none{background:#ffcdd2}
.bar{display:inline-block;height:12px;background:#5c6bc0;vertical-align:middle}
.dot{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
code,pre{font:12px ui-monospace,monospace} pre{white-space:pre-wrap;margin:0}
details{margin:.3em 0} .muted{color:#777}
"""


def case_operator(name: str, operators: Mapping[str, tuple[str, ...]]) -> str:
    """The operator a case tests: its only op, its non-expanded sibling's, or a name match."""
    base = name.rsplit("/", 1)[-1]
    if "_expanded" in base:
        sibling = name.replace("_expanded", "")
        if operators.get(sibling):
            return case_operator(sibling, operators)
    ops = list(dict.fromkeys(operators.get(name, ())))
    if len(ops) == 1:
        return ops[0]
    key = base.removeprefix("test_").replace("_", "").lower()
    matches = [o for o in ops if key.startswith(o.rsplit(".", 1)[-1].lower())]
    if matches:
        return max(matches, key=len)
    return ops[0] if ops else "(not loaded)"


def _bucket(value: float) -> str:
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return "inf/nan"
    decade = math.floor(math.log10(value))
    if decade >= 0:
        return "≥ 1"
    return f"1e{max(decade, _DECADES[0])}"


def _bucket_order() -> list[str]:
    return ["0", *[f"1e{d}" for d in _DECADES[:-1]], "≥ 1", "inf/nan"]


def _histogram(values: Iterable[float]) -> str:
    counts = Counter(_bucket(v) for v in values)
    if not counts:
        return "<p class='muted'>no compared arrays</p>"
    peak = max(counts.values())
    rows = []
    for b in _bucket_order():
        n = counts.get(b, 0)
        width = 0 if not n else max(2, int(300 * n / peak))
        label = b
        if b == "0":
            label = "exact"
        elif b.startswith("1e"):
            label = f"[{b}, 1e{int(b[2:]) + 1})"
        rows.append(
            f"<tr><td>{html.escape(label)}</td><td class='n'>{n}</td>"
            f"<td><span class='bar' style='width:{width}px'></span></td></tr>"
        )
    return (
        "<table><tr><th>max error in</th><th>arrays</th><th></th></tr>"
        + "".join(rows)
        + ("</table>")
    )


def render(report: Report) -> str:
    """The whole page: a header, then one section after another."""
    parts = [
        _header(report),
        *_outcomes(report),
        *_known_failure_notes(report),
        *_matrix(report),
        *_histograms(report),
        *_failures(report),
        "</body></html>\n",
    ]
    return "".join(parts)


def _header(report: Report) -> str:
    e = html.escape
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>fixture-store compare"
        f"</title><style>{_STYLE}</style></head><body>"
        "<h1>fixture-store compare</h1>"
        f"<p>{len({r.name for r in report.results})} cases · runtimes "
        f"{', '.join(e(r) for r in report.runtimes)}"
        + (f" · {report.wall_seconds:.1f} s" if report.wall_seconds else "")
        + "</p>"
    )


def _outcomes(report: Report) -> list[str]:
    """Counts per runtime, one column per outcome that occurs."""
    e = html.escape
    counts = report.counts()
    outcomes = [o for o in Outcome if any(str(o) in c for c in counts.values())]
    parts = [
        "<h2>Outcomes</h2><table><tr><th>runtime</th>"
        + "".join(
            f"<th><span class='dot' style='background:{_COLORS[o]}'></span>{e(str(o))}</th>"
            for o in outcomes
        )
        + "</tr>"
    ]
    for rt, c in counts.items():
        parts.append(
            f"<tr><td>{e(rt)}</td>"
            + "".join(f"<td class='n'>{c.get(str(o), 0)}</td>" for o in outcomes)
            + "</tr>"
        )
    parts.append("</table>")
    return parts


def _known_failure_notes(report: Report) -> list[str]:
    """Known failures that now pass, and those whose machine condition does not hold here."""
    e = html.escape
    parts = []
    if report.now_passing:
        parts.append(
            "<p><b>Known failures that now pass</b> (remove them from the registry): "
            + ", ".join(f"<code>{e(r.runtime)} {e(r.name)}</code>" for r in report.now_passing)
            + "</p>"
        )
    if report.inactive:
        parts.append(
            "<p><b>Known failures inactive on this machine</b> (their condition does "
            "not hold here, so they excuse nothing): "
            + ", ".join(
                f"<code>{e(r.runtime)} {e(r.name)}</code> ({e(r.inactive_condition or '')}"
                f": {e(str(r.outcome))})"
                for r in report.inactive
            )
            + "</p>"
        )
    return parts


def _matrix(report: Report) -> list[str]:
    """Passed / cases per operator and runtime."""
    e = html.escape
    operators = {r.name: r.operators for r in report.results if r.operators}
    matrix: dict[str, dict[str, Counter[Outcome]]] = defaultdict(lambda: defaultdict(Counter))
    for r in report.results:
        matrix[case_operator(r.name, operators)][r.runtime][r.outcome] += 1
    parts = [
        "<h2>Pass matrix per operator</h2><p class='muted'>passed / cases; "
        "hover a cell for its outcomes. Known failures count as not passed.</p>"
        "<table><tr><th>operator</th>"
        + "".join(f"<th>{e(rt)}</th>" for rt in report.runtimes)
        + "</tr>"
    ]
    for op in sorted(matrix, key=str.lower):
        cells = "".join(_matrix_cell(matrix[op][rt]) for rt in report.runtimes)
        parts.append(f"<tr><td>{e(op)}</td>{cells}</tr>")
    parts.append("</table>")
    return parts


def _matrix_cell(cell: Counter[Outcome]) -> str:
    total = sum(cell.values())
    passed = cell[Outcome.PASS]
    cls = "full" if passed == total and total else ("part" if passed else "none")
    title = ", ".join(f"{n} {o}" for o, n in sorted(cell.items()))
    return f"<td class='n {cls}' title='{html.escape(title)}'>{passed}/{total}</td>"


def _histograms(report: Report) -> list[str]:
    """Per runtime, the maximum absolute and relative errors of the arrays compared."""
    parts = [
        "<h2>Error histograms</h2><p class='muted'>maximum absolute and relative "
        "error of every compared array (passing and mismatching cases)</p>"
    ]
    for rt in report.runtimes:
        arrays = [a for r in report.results if r.runtime == rt for a in r.arrays if a.measured]
        parts.append(
            f"<h3>{html.escape(rt)}</h3><table><tr><th>max absolute error</th>"
            f"<th>max relative error</th></tr><tr><td>"
            f"{_histogram(a.max_abs for a in arrays)}</td><td>"
            f"{_histogram(a.max_rel for a in arrays)}</td></tr></table>"
        )
    return parts


def _failures(report: Report) -> list[str]:
    """Every result other than a plain pass, with what is known about it."""
    e = html.escape
    failing = [r for r in report.results if r.outcome is not Outcome.PASS or r.now_passing]
    parts = [f"<h2>Results other than pass ({len(failing)})</h2>"]
    if not failing:
        return parts
    parts.append("<table><tr><th>case</th><th>runtime</th><th>outcome</th><th>detail</th></tr>")
    for r in failing:
        outcome = "known failure now passes" if r.now_passing else str(r.outcome)
        if r.underlying:
            outcome += f" ({r.underlying})"
        parts.append(
            f"<tr><td><code>{e(r.name)}</code></td><td>{e(r.runtime)}</td>"
            f"<td style='color:{_COLORS[r.outcome]}'>{e(outcome)}</td>"
            f"<td>{_detail(r)}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _detail(r: CaseResult) -> str:
    """A failing result's detail: its message, why it is known, the fix, its worst array."""
    e = html.escape
    detail = e(r.detail)
    if r.known_reason:
        detail += f"<br><span class='muted'>known: {e(r.known_reason)}</span>"
    if r.fix:
        detail += f"<br><span class='muted'>fix: {e(r.fix)}</span>"
    if r.known_error is not None:
        detail += f"<br><code>{e(_known_error(r.known_error))}</code>"
    worst = [a for a in r.arrays if not a.ok]
    if worst:
        a = worst[0]
        detail += (
            f"<br><code>{e(a.name)}: max abs {a.max_abs:.3g}, mean abs "
            f"{a.mean_abs:.3g}, max rel {a.max_rel:.3g}, max {a.max_ulp:.4g} ULP, worst index "
            f"{e(str(a.worst_index))}</code>"
        )
    return detail


def _known_error(error: KnownError) -> str:
    text = f"max abs {error.max_abs:.3g} (bound {error.max_abs_bound:g})"
    if error.max_rel is not None and error.max_rel_bound is not None:
        text += f", max rel {error.max_rel:.3g} (bound {error.max_rel_bound:g})"
    return text


def write_report(report: Report, path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render(report), encoding="utf-8")
    os.replace(tmp, target)
    return target
