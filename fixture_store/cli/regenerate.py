"""CLI commands of regeneration and provenance export, registered on the ``main`` group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from fixture_store import provenance as provenance_mod
from fixture_store import registry as registry_mod
from fixture_store.cli.app import Context, err, handle_errors, main, out
from fixture_store.errors import EXIT_FAILED, EXIT_OK
from fixture_store.regenerate import Report, Verdict, regenerate

VERDICT_STYLE = {
    Verdict.IDENTICAL: "green",
    Verdict.WITHIN: "yellow",
    Verdict.DRIFT: "bold red",
    Verdict.NEW: "cyan",
    Verdict.MISSING: "bold red",
    Verdict.UNAVAILABLE: "bold red",
}


def print_report(report: Report, *, limit: int = 40) -> None:
    table = Table(title=f"regenerate {report.stage}")
    for col in ("artifact", "verdict", "file", "max abs", "max rel", "detail"):
        table.add_column(col, overflow="fold", justify="right" if col.startswith("max") else "left")
    rows = 0
    for c in report.comparisons:
        if c.verdict is Verdict.IDENTICAL:
            continue
        style = VERDICT_STYLE[c.verdict]
        members = c.differing or ()
        if not members:
            table.add_row(c.name, f"[{style}]{c.verdict}[/]", "", "", "", c.reason)
            rows += 1
        for m in members:
            if rows >= limit and m.verdict is Verdict.WITHIN:
                continue
            detail = m.reason
            if m.verdict is Verdict.DRIFT and m.candidate and m.registered:
                detail += f"\ncandidate:  {m.candidate}\nregistered: {m.registered}"
            table.add_row(
                c.name,
                f"[{VERDICT_STYLE[m.verdict]}]{m.verdict}[/]",
                m.path,
                f"{m.max_abs:.3g}" if m.arrays else "",
                f"{m.max_rel:.3g}" if m.arrays else "",
                detail,
            )
            rows += 1
    if rows:
        out.print(table)
    counts = report.counts
    files = report.member_counts
    out.print(
        f"{report.stage}: {len(report.comparisons)} artifacts: "
        + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    )
    out.print(
        f"files: {files['bit-identical']} identical, {files['within-tolerance']} within "
        f"tolerance, {files['drift']} drift"
        + (f", {files['new']} new" if files["new"] else "")
        + (f", {files['missing']} missing" if files["missing"] else "")
        + (f", {files['unavailable']} unavailable" if files["unavailable"] else "")
        + f"  ({report.seconds:.1f} s; candidates in {report.scratch})"
    )
    env = report.environment
    out.print(
        f"environment: python {env.get('python')} on {env.get('machine')}, "
        f"lock {str(env.get('packages_digest', ''))[:19]}…",
        markup=False,
    )
    if report.accepted:
        out.print(f"accepted {len(report.accepted)} record(s) into provenance/")


@main.command(name="regenerate")
@click.argument("target", metavar="STAGE|NAME")
@click.option(
    "--accept",
    is_flag=True,
    help="Rewrite the records of changed and new artifacts and ingest their bytes.",
)
@click.option(
    "--fetch",
    is_flag=True,
    help="Put candidates that are bit-identical to their record into the store "
    "(how a generator-sourced artifact is fetched). The registry is untouched.",
)
@click.option(
    "--scratch",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for candidates and drift copies (default: a new temp folder).",
)
@click.option(
    "--python",
    "python",
    metavar="PATH",
    help="Run the generator with this interpreter instead of its pinned environment "
    "(the generator still refuses other upstream versions).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report to this file.",
)
@click.pass_obj
@handle_errors
def regenerate_cmd(
    obj: Context,
    target: str,
    accept: bool,
    fetch: bool,
    scratch: Path | None,
    python: str | None,
    as_json: bool,
    report_path: Path | None,
) -> None:
    """Rebuild STAGE (or the artifacts NAME of a stage) from its pinned generator and compare.

    Every candidate is bit-identical, within the record's tolerance (max and mean abs/rel error
    per array), drift, or new. Exit 0 if nothing drifted, 1 on drift, missing or unavailable
    references (both sides are kept in the scratch folder), 2 on usage errors. Without --accept
    the registry and the store are never changed.
    """
    root = registry_mod.find_root() if obj.registry_flag is None else Path(obj.registry_flag)
    report = regenerate(
        root,
        obj.store,
        target,
        scratch=scratch,
        accept=accept,
        fetch=fetch,
        python=python,
        log=lambda m: err.print(m, markup=False),
    )
    doc = report.to_json()
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(
            json.dumps(report.to_json(stable=True), indent=2, sort_keys=True) + "\n"
        )
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print_report(report)
    for c in report.comparisons:
        if not c.verdict.ok:
            err.print(f"{c.verdict}: {c.name}: {c.reason}", markup=False)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


@main.command(name="provenance")
@click.argument("name")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["in-toto"]),
    default="in-toto",
    show_default=True,
    help="Export format.",
)
@click.option(
    "--members/--no-members",
    default=True,
    show_default=True,
    help="List each member of a tree artifact as its own subject.",
)
@click.pass_obj
@handle_errors
def provenance_cmd(obj: Context, name: str, fmt: str, members: bool) -> None:
    """Print NAME's provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate."""
    registry = obj.registry()
    statement = provenance_mod.in_toto_statement(registry, name, members=members)
    click.echo(json.dumps(statement, indent=2, sort_keys=True))


def print_lineage(registry: registry_mod.Registry, name: str, *, as_json: bool) -> None:
    """NAME and its ancestors, indented by depth, each with its source."""
    steps = list(provenance_mod.lineage(registry, name))
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "depth": s.depth,
                        "name": s.name,
                        "digest": s.digest,
                        "kind": s.record.kind if s.record else None,
                        "source": s.record.source.describe() if s.record else None,
                    }
                    for s in steps
                ],
                indent=2,
            )
        )
        return
    for s in steps:
        pad = "  " * s.depth + ("<- " if s.depth else "")
        if s.record is None:
            label = f"{s.name}  " if s.name else ""
            out.print(
                f"{pad}{label}{s.digest[:19]}…  (no record in this registry yet)", markup=False
            )
            continue
        out.print(
            f"{pad}{s.name}  [{s.record.kind}] {s.digest[:19]}…  {s.record.source.describe()}",
            markup=False,
        )


@main.command(name="regenerate-summary")
@click.argument(
    "reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--metrics",
    "metrics_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Write the summary here (DVC metrics).",
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write per-file error tables here (DVC plots).",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Verify every artifact of the registry, not only the stages' families.",
)
@click.option("--full", is_flag=True, help="Re-hash every object; ignore the verified-state cache.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
@handle_errors
def regenerate_summary_cmd(
    obj: Context,
    reports: tuple[Path, ...],
    metrics_path: Path,
    plots_dir: Path | None,
    everything: bool,
    full: bool,
    as_json: bool,
) -> None:
    """Verify what the stages registered and summarise their REPORTS (the pipeline's last step).

    Exit 0 if no stage drifted and every artifact checked (the stages' families, or the whole
    registry with --all) verifies, else 1.
    """
    from fixture_store.regenerate import summary as summary_mod

    registry = obj.registry()
    summary = summary_mod.summarise(reports, registry, obj.store, everything=everything, full=full)
    summary_mod.write(summary, metrics_path, plots_dir)
    doc = summary.metrics()
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        table = Table(title="regeneration")
        for col in (
            "stage",
            "artifacts",
            "identical",
            "within tolerance",
            "drift",
            "new",
            "missing",
        ):
            table.add_column(col, justify="left" if col == "stage" else "right")
        for name, s in doc["stages"].items():
            f = s["files"]
            table.add_row(
                name,
                str(s["artifacts"]),
                str(f["bit_identical"]),
                str(f["within_tolerance"]),
                str(f["drift"]),
                str(f["new"]),
                str(f["missing"]),
            )
        out.print(table)
        t = doc["total_files"]
        out.print(
            f"files: {t.get('bit_identical', 0)} identical, "
            f"{t.get('within_tolerance', 0)} within tolerance, {t.get('drift', 0)} drift"
        )
        if "parity" in doc:
            p = doc["parity"]
            out.print(
                f"checkpoint chain: {p['within']}/{p['cases']} cases within tolerance of "
                f"PyTorch, max abs {p['max_abs']:.3g}, max rel {p['max_rel']:.3g}"
            )
        out.print("verify: " + ", ".join(f"{n} {k}" for k, n in doc["verify"].items()))
    for r in summary.results:
        if not r.ok:
            err.print(f"{r.status}: {r.name}: {r.message}", markup=False)
    sys.exit(EXIT_OK if summary.ok else EXIT_FAILED)
