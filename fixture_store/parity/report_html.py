"""A static HTML report of a compare run: one self-contained file, no fetched styles or scripts.

Sections (each with an anchor in the contents bar): counts per runtime, notes on known failures,
the pass matrix (operators with a result other than pass first, each cell linking to its results;
the operators where every case passes as a compact list), histograms of the maximum absolute and
relative error over compared arrays, and every non-passing result. The bar's filters (outcome,
runtime, operator; a few lines of inline script) narrow the matrix and the results.

The page of a tracked file (``Part.TRACKED``: ``reports/compare.html``) is made from the
report without its run numbers (:mod:`fixture_store.parity.parts`): outcomes, the matrix and
the known failures with their reasons and bounds. The run page beside it
(``reports/run/compare.html``) adds the time, the histograms, each result's detail and errors.
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from fixture_store.objects import outputs
from fixture_store.objects.outputs import Target
from fixture_store.pages.shell import Filters, Section, esc, href, only, row_attrs, setting
from fixture_store.pages.shell import render as render_page
from fixture_store.parity.cases import Report
from fixture_store.parity.parts import Part
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

# The outcome a non-passing row is filtered by (a known failure that now passes is a pass).
NOW_PASSING = "now-passing"


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
            f"<tr><td>{esc(label)}</td><td class='n'>{n}</td>"
            f"<td><span class='bar' style='width:{width}px'></span></td></tr>"
        )
    return (
        "<table><tr><th>max error in</th><th>arrays</th><th></th></tr>"
        + "".join(rows)
        + ("</table>")
    )


def render(report: Report, part: Part = Part.ALL) -> str:
    """The whole page: a heading, the contents bar with the filters, one section after another.
    The page of a tracked file is made from the report without its run numbers, so it cannot
    show one."""
    if part is Part.TRACKED:
        report = report.tracked()
    operators = _operators(report)
    failing = _not_passing(report)
    histograms = Section("histograms", "Error histograms", _histograms(report))
    sections = [
        Section("outcomes", "Outcomes", _outcomes(report)),
        *_known_failure_notes(report),
        Section("matrix", "Pass matrix per operator", _matrix(report, operators)),
        *([histograms] if part is not Part.TRACKED else []),
        Section(
            "results",
            f"Results other than pass ({len(failing)})",
            _failures(failing, operators, part),
        ),
    ]
    outcomes = list(dict.fromkeys(_filter_outcome(r) for r in failing))
    filters = Filters(
        checks=(("outcome", sorted(outcomes)), ("runtime", report.runtimes)),
        selects=(("operator", sorted(set(operators.values()), key=str.lower)),),
    )
    return render_page("fixture-store compare", _intro(report, part), sections, filters=filters)


def _operators(report: Report) -> dict[str, str]:
    """The operator of every case, by case name."""
    ops = {r.name: r.operators for r in report.results if r.operators}
    return {r.name: case_operator(r.name, ops) for r in report.results}


def _not_passing(report: Report) -> list[CaseResult]:
    return [r for r in report.results if r.outcome is not Outcome.PASS or r.now_passing]


def _filter_outcome(r: CaseResult) -> str:
    return NOW_PASSING if r.now_passing else str(r.outcome)


def _intro(report: Report, part: Part) -> str:
    note = (
        "<p class='muted'>Outcomes and bounds only: what is the same on every machine that "
        "passes. Errors, details and times are in the run report, <code>run/compare.html</code> "
        "beside this page.</p>"
        if part is Part.TRACKED
        else ""
    )
    return (
        f"<p>{len({r.name for r in report.results})} cases · runtimes "
        f"{', '.join(esc(r) for r in report.runtimes)}"
        + (f" · {report.wall_seconds:.1f} s" if report.wall_seconds else "")
        + "</p>"
        + note
    )


def _outcomes(report: Report) -> str:
    """Counts per runtime, one column per outcome that occurs."""
    counts = report.counts()
    outcomes = [o for o in Outcome if any(str(o) in c for c in counts.values())]
    rows = "".join(
        f"<tr><td>{esc(rt)}</td>"
        + "".join(f"<td class='n'>{c.get(str(o), 0)}</td>" for o in outcomes)
        + "</tr>"
        for rt, c in counts.items()
    )
    head = "".join(
        f"<th><span class='dot' style='background:{_COLORS[o]}'></span>{esc(str(o))}</th>"
        for o in outcomes
    )
    return f"<table><tr><th>runtime</th>{head}</tr>{rows}</table>"


def _known_failure_notes(report: Report) -> list[Section]:
    """Known failures that now pass, and those whose machine condition does not hold here."""
    parts = []
    if report.now_passing:
        parts.append(
            "<p><b>Known failures that now pass</b> (remove them from the registry): "
            + ", ".join(_result_link(r) for r in report.now_passing)
            + "</p>"
        )
    if report.inactive:
        parts.append(
            "<p><b>Known failures inactive on this machine</b> (their condition does "
            "not hold here, so they excuse nothing): "
            + ", ".join(
                f"{_result_link(r)} ({esc(r.inactive_condition or '')}: {esc(str(r.outcome))})"
                for r in report.inactive
            )
            + "</p>"
        )
    return [Section("known-failures", "Known failures", "".join(parts))] if parts else []


def result_anchor(r: CaseResult) -> str:
    """The id of a result's row: its runtime and case name (names hold no whitespace)."""
    return f"{r.runtime}:{r.name}"


def _result_link(r: CaseResult) -> str:
    return f"<a href='{href(result_anchor(r))}'><code>{esc(r.runtime)} {esc(r.name)}</code></a>"


def _matrix(report: Report, operators: Mapping[str, str]) -> str:
    """Passed / cases per operator and runtime: the operators with a result other than pass in
    a table whose cells link to those results, the others as one compact list."""
    matrix: dict[str, dict[str, Counter[Outcome]]] = defaultdict(lambda: defaultdict(Counter))
    for r in report.results:
        matrix[operators[r.name]][r.runtime][r.outcome] += 1
    ordered = sorted(matrix, key=str.lower)
    clean = [op for op in ordered if _all_pass(matrix[op].values())]
    mixed = [op for op in ordered if op not in clean]
    head = "".join(f"<th {only('runtime', rt)}>{esc(rt)}</th>" for rt in report.runtimes)
    rows = "".join(
        f"<tr id='{esc('op:' + op)}' {only('operator', op)}><td>{esc(op)}</td>"
        + "".join(_matrix_cell(op, rt, matrix[op][rt]) for rt in report.runtimes)
        + "</tr>"
        for op in mixed
    )
    chips = "".join(
        f"<span class='chip' {only('operator', op)} title='"
        + esc("; ".join(f"{rt} {_cell_title(matrix[op][rt])}" for rt in report.runtimes))
        + f"'>{esc(op)} {sum(sum(c.values()) for c in matrix[op].values())}</span>"
        for op in clean
    )
    return (
        f"<h3>Operators with a result other than pass ({len(mixed)})</h3>"
        "<p class='muted'>passed / cases; a cell links to its results (and sets the "
        "filters); hover it for its outcomes. Known failures count as not passed.</p>"
        + (f"<table><tr><th>operator</th>{head}</tr>{rows}</table>" if mixed else "<p>none</p>")
        + f"<h3>Operators where every case passes on every runtime ({len(clean)})</h3>"
        "<p class='muted'>each with its number of results; hover for the counts.</p>"
        + f"<div class='chips'>{chips}</div>"
    )


def _all_pass(cells: Iterable[Counter[Outcome]]) -> bool:
    return all(set(c) <= {Outcome.PASS} for c in cells)


def _cell_title(cell: Counter[Outcome]) -> str:
    return ", ".join(f"{n} {o}" for o, n in sorted(cell.items())) or "no cases"


def _matrix_cell(op: str, runtime: str, cell: Counter[Outcome]) -> str:
    total = sum(cell.values())
    passed = cell[Outcome.PASS]
    cls = "full" if passed == total and total else ("part" if passed else "none")
    text = f"{passed}/{total}"
    if passed != total:
        text = f"<a href='#results' {setting(operator=op, runtime=runtime)}>{text}</a>"
    return (
        f"<td class='n {cls}' {only('runtime', runtime)} "
        f"title='{esc(_cell_title(cell))}'>{text}</td>"
    )


def _histograms(report: Report) -> str:
    """Per runtime, the maximum absolute and relative errors of the arrays compared."""
    parts = [
        "<p class='muted'>maximum absolute and relative "
        "error of every compared array (passing and mismatching cases)</p>"
    ]
    for rt in report.runtimes:
        arrays = [a for r in report.results if r.runtime == rt for a in r.arrays if a.measured]
        parts.append(
            f"<h3 {only('runtime', rt)}>{esc(rt)}</h3><table {only('runtime', rt)}>"
            "<tr><th>max absolute error</th><th>max relative error</th></tr><tr><td>"
            f"{_histogram(a.max_abs for a in arrays)}</td><td>"
            f"{_histogram(a.max_rel for a in arrays)}</td></tr></table>"
        )
    return "".join(parts)


def _failures(failing: list[CaseResult], operators: Mapping[str, str], part: Part) -> str:
    """Every result other than a plain pass, with what is known about it."""
    if not failing:
        return "<p>none</p>"
    rows = []
    for r in failing:
        outcome = "known failure now passes" if r.now_passing else str(r.outcome)
        if r.underlying:
            outcome += f" ({r.underlying})"
        rows.append(
            f"<tr id='{esc(result_anchor(r))}' "
            + row_attrs(outcome=_filter_outcome(r), runtime=r.runtime, operator=operators[r.name])
            + ">"
            f"<td><code>{esc(r.name)}</code></td><td>{esc(operators[r.name])}</td>"
            f"<td>{esc(r.runtime)}</td>"
            f"<td style='color:{_COLORS[r.outcome]}'>{esc(outcome)}</td>"
            f"<td>{_detail(r, part)}</td></tr>"
        )
    return (
        f"<p class='muted'>showing <span class='shown'>{len(failing)}</span> of {len(failing)}"
        "</p><table class='wide'><colgroup><col style='width:22%'><col style='width:11%'>"
        "<col style='width:8%'><col style='width:12%'><col></colgroup>"
        "<tr><th>case</th><th>operator</th><th>runtime</th><th>outcome</th><th>detail</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _detail(r: CaseResult, part: Part) -> str:
    """A failing result's detail: its message, why it is known, the fix, its worst array."""
    lines = [esc(r.detail)] if r.detail else []
    if r.known_reason:
        lines.append(f"<span class='muted'>known: {esc(r.known_reason)}</span>")
    if r.fix:
        lines.append(f"<span class='muted'>fix: {esc(r.fix)}</span>")
    if r.known_error is not None:
        lines.append(f"<code>{esc(_known_error(r.known_error, part))}</code>")
    worst = [a for a in r.arrays if not a.ok]
    if worst:
        a = worst[0]
        lines.append(
            f"<code>{esc(a.name)}: max abs {a.max_abs:.3g}, mean abs "
            f"{a.mean_abs:.3g}, max rel {a.max_rel:.3g}, max {a.max_ulp:.4g} ULP, worst index "
            f"{esc(str(a.worst_index))}</code>"
        )
    return "<br>".join(lines)


def _known_error(error: KnownError, part: Part) -> str:
    """A known mismatch's bounds, and in the run page the error seen."""
    if error.structural:
        return "structural mismatch (number, dtype or shape of the outputs): no value error"
    if part is Part.TRACKED:
        text = f"max abs bound {error.max_abs_bound:g}"
        return text + (f", max rel bound {error.max_rel_bound:g}" if error.max_rel_bound else "")
    text = f"max abs {error.max_abs:.3g} (bound {error.max_abs_bound:g})"
    if error.max_rel is not None and error.max_rel_bound is not None:
        text += f", max rel {error.max_rel:.3g} (bound {error.max_rel_bound:g})"
    return text


def write_report(
    report: Report, path: Target | str | os.PathLike[str], part: Part = Part.ALL
) -> Path:
    """The page at ``path``, by the output primitive."""
    target = outputs.target(path)
    target.write_text(render(report, part))
    return target.path
