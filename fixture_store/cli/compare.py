"""``fixture-store compare``: run ONNX Runtime and/or the ReferenceEvaluator on verified cases."""

from __future__ import annotations

import sys

import click
from rich.table import Table
from rich.text import Text

from fixture_store.access import Fixtures
from fixture_store.cli._common import (
    Context,
    OutputPath,
    counts_text,
    err,
    handle_errors,
    out,
    print_json,
    progress,
    styled,
    write_parts,
)
from fixture_store.objects.outputs import Target
from fixture_store.parity import parts
from fixture_store.parity.cases import Report, compare, select_cases
from fixture_store.parity.results import CaseResult, Outcome
from fixture_store.parity.runtimes.run import DEFAULT_TIMEOUT


@click.command(name="compare")
@click.argument("names", nargs=-1)
@click.option("--family", "families", multiple=True, help="Every onnx case of FAMILY.")
@click.option(
    "--runtime",
    "runtimes",
    multiple=True,
    default=("ort", "reference"),
    show_default=True,
    help="ort (ONNX Runtime, CPU), reference (onnx ReferenceEvaluator), or "
    "package.module:prepare. Repeat for several.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON.")
@click.option(
    "--report",
    "report_path",
    type=OutputPath(what="HTML report"),
    help="Write a static HTML report (outcomes, pass matrix per operator, known failures "
    "and their bounds) here, and the run report beside it in run/ (details, error "
    "histograms, times).",
)
@click.option(
    "--output",
    "output_path",
    type=OutputPath(what="JSON report"),
    help="Also write the JSON report to this file, only what is the same on every machine "
    "that passes (outcomes, bounds, counts: for DVC), and the rest (details, errors, "
    "times) to run/NAME beside it.",
)
@click.option(
    "--metrics",
    "metrics_path",
    type=OutputPath(what="metrics file"),
    help="Write outcome counts per runtime (pass, known, failing) to this JSON file (DVC "
    "metrics); a {runtime} in its name writes one file per runtime. The known mismatches' "
    "errors and bounds go to run/known-mismatches.csv beside it.",
)
@click.option(
    "--plot",
    "plot_path",
    type=OutputPath(what="plot file"),
    help="Write per-operator pass counts per runtime to this CSV file (DVC plots).",
)
@click.option(
    "--jobs",
    type=click.IntRange(0, 256),
    default=None,
    help="Worker processes (default: one per CPU; 0 runs in this process).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds one case may take before it is killed.",
)
@click.option("--full", is_flag=True, help="Re-hash every file; ignore the verified-state cache.")
@click.pass_obj
@handle_errors
def compare_cmd(
    obj: Context,
    names: tuple[str, ...],
    families: tuple[str, ...],
    runtimes: tuple[str, ...],
    as_json: bool,
    report_path: Target | None,
    output_path: Target | None,
    metrics_path: Target | None,
    plot_path: Target | None,
    jobs: int | None,
    timeout: float,
    full: bool,
) -> None:
    """Run ONNX runtimes on verified cases.

    Run verified ONNX cases with each runtime and compare with the expected outputs.

    Cases are chosen by NAMES (glob patterns allowed) and --family; every case is verified
    first and a case that does not verify is refused, never run. Outcomes: pass, mismatch,
    not-implemented, error, known-failure (registered with a reason in the registry's
    known_failures), refused, timeout, crash, gap.

    A known failure excuses only its outcome, and a known mismatch only up to its bounds
    (max_abs, max_rel); a glob pattern must match the number of cases it expects.

    Exit 0 when every case passes or is a registered known failure or gap; 1 when any case
    fails, is refused, a known mismatch exceeds its bounds, or a known failure now passes
    (remove it from the registry); 2 on usage or registry errors (such as a known failure
    matching other cases than it expects).
    """
    fixtures = Fixtures(obj.store, obj.registry(), full=full)
    chosen = select_cases(fixtures, names, families)
    total = len(chosen) * len(set(runtimes))
    with progress(total, "comparing", enabled=not as_json) as advance:
        report = compare(
            fixtures,
            chosen,
            runtimes,
            jobs=jobs,
            timeout=timeout,
            on_result=advance,
        )
    _write_files(report, report_path, output_path, metrics_path, plot_path)
    if as_json:
        print_json(report.to_json())
    else:
        print_report(report)
        if report_path is not None:
            out.print(
                f"HTML report: {report_path} (run report: {parts.run_path(report_path.path)})",
                markup=False,
            )
    _report_known_failures(report)
    sys.exit(report.exit_code)


def _write_files(
    report: Report,
    report_path: Target | None,
    output_path: Target | None,
    metrics_path: Target | None,
    plot_path: Target | None,
) -> None:
    """The files for DVC hold the report's tracked part; its run part (details, errors,
    times) goes to the run report beside each (``parts.run_path``)."""
    if report_path is not None:
        from fixture_store.parity.report_html import write_report

        write_report(report, report_path, parts.Part.TRACKED)
        write_report(report, report_path.beside(parts.run_path(report_path.path)), parts.Part.ALL)
    if output_path is not None:
        write_parts(output_path, report)
    if metrics_path is not None or plot_path is not None:
        from fixture_store.parity import report_metrics as compare_metrics

        compare_metrics.write(report, metrics_path, plot_path)


def _report_known_failures(report: Report) -> None:
    """Known failures that now pass, or whose condition does not hold here."""
    for r in report.results:
        if r.now_passing:
            err.print(
                f"known failure now passes: {r.runtime} {r.name} ({r.known_reason}); fix: {r.fix}",
                markup=False,
            )
    for r in report.beyond_known_bounds:
        err.print(
            f"known failure exceeded: {r.runtime} {r.name}: {r.detail}; fix: {r.fix}",
            markup=False,
        )
    for r in report.inactive:
        err.print(
            f"known failure inactive here ({r.inactive_condition} does not hold): "
            f"{r.runtime} {r.name}: {r.outcome}",
            markup=False,
        )


def print_report(report: Report, *, limit: int = 60) -> None:
    failing = [r for r in report.results if r.failing]
    if failing:
        table = Table(
            title=f"{len(failing)} failing results"
            + (f" (first {limit})" if len(failing) > limit else "")
        )
        for col in ("case", "runtime", "outcome", "detail"):
            table.add_column(col, overflow="fold")
        for r in failing[:limit]:
            table.add_row(r.name, r.runtime, _styled(r), _detail(r))
        out.print(table)
    summary = Table(
        title=f"compare: {len({r.name for r in report.results})} cases in "
        f"{report.wall_seconds:.1f} s"
    )
    summary.add_column("runtime")
    outcomes = [o for o in Outcome if any(str(o) in c for c in report.counts().values())]
    for o in outcomes:
        summary.add_column(str(o), justify="right")
    for rt, counts in report.counts().items():
        summary.add_row(rt, *(str(counts.get(str(o), 0)) for o in outcomes))
    out.print(summary)
    # One line per runtime a log can be searched for, whatever became of the table there.
    for rt, counts in report.counts().items():
        out.print(f"{rt}: {counts_text(counts.items()) or 'no results'}", markup=False)


def _styled(r: CaseResult) -> Text:
    return styled(r.outcome, "known failure now passes" if r.now_passing else None)


def _detail(r: CaseResult) -> str:
    text = r.detail or (r.known_reason or "")
    if r.fix:
        text += f"\nfix: {r.fix}"
    return text
