"""Commands that rebuild fixtures from their pinned generators: regenerate, regenerate-summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from fixture_store.cli._common import (
    Context,
    Failure,
    OutputPath,
    counts_text,
    err,
    handle_errors,
    out,
    print_json,
    report_failures,
    styled,
    write_parts,
)
from fixture_store.errors import EXIT_FAILED, EXIT_OK, UsageError
from fixture_store.objects import names
from fixture_store.objects.outputs import Target
from fixture_store.regenerate import Report, Verdict, regenerate
from fixture_store.remotes import mirrors_opener
from fixture_store.sources import offline_from_env


def print_report(report: Report, *, limit: int = 40) -> None:
    table = Table(title=f"regenerate {report.stage}")
    for col in ("artifact", "verdict", "file", "max abs", "max rel", "max ulp", "detail"):
        table.add_column(col, overflow="fold", justify="right" if col.startswith("max") else "left")
    rows = 0
    for c in report.comparisons:
        if c.verdict is Verdict.IDENTICAL:
            continue
        members = c.differing or ()
        if not members:
            table.add_row(c.name, styled(c.verdict), "", "", "", "", c.reason)
            rows += 1
        for m in members:
            if rows >= limit and m.verdict is Verdict.WITHIN:
                continue
            detail = m.reason
            if m.verdict is Verdict.DRIFT and m.candidate and m.registered:
                detail += f"\ncandidate:  {m.candidate}\nregistered: {m.registered}"
            table.add_row(
                c.name,
                styled(m.verdict),
                m.path,
                f"{m.max_abs:.3g}" if m.arrays else "",
                f"{m.max_rel:.3g}" if m.arrays else "",
                f"{m.max_ulp:.4g}" if m.arrays else "",
                detail,
            )
            rows += 1
    if rows:
        out.print(table)
    _print_counts(report)


def _print_counts(report: Report) -> None:
    files = report.member_counts
    counts = counts_text(report.counts.items())
    out.print(f"{report.stage}: {len(report.comparisons)} artifacts: {counts}")
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


@click.command()
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
    "(how a generator-sourced artifact is fetched). A record this machine does not remake bit "
    "for bit has its registered bytes pulled from the configured remotes first, so its "
    "candidate is judged within its tolerance. The registry is untouched.",
)
@click.option(
    "--remote",
    "remote",
    metavar="NAME|URL",
    help="Pull registered bytes from this remote only (default: every configured remote, the "
    "default first).",
)
@click.option("--no-remote", is_flag=True, help="Pull registered bytes from no remote.")
@click.option(
    "--scratch",
    type=OutputPath(folder=True, what="scratch folder"),
    help="Folder for candidates and drift copies (default: a new temp folder).",
)
@click.option(
    "--python",
    "python",
    metavar="PATH",
    help="Run the generator with this interpreter instead of its pinned environment "
    "(the generator still refuses other upstream versions).",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Make pinned environments from uv's cache alone and fail clearly when it lacks a "
    "pin (also on with HF_HUB_OFFLINE=1). Making an environment is the only time "
    "regeneration reaches the package index.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--report",
    "report_path",
    type=OutputPath(what="regeneration report"),
    help="Also write the JSON report to this file, only what is the same on every machine "
    "(verdicts and counts, for DVC), and the rest (errors, times, the platform) to run/NAME "
    "beside it.",
)
@click.pass_obj
@handle_errors
def regenerate_cmd(
    obj: Context,
    target: str,
    accept: bool,
    fetch: bool,
    scratch: Target | None,
    python: str | None,
    offline: bool,
    remote: str | None,
    no_remote: bool,
    as_json: bool,
    report_path: Target | None,
) -> None:
    """Rebuild a stage's artifacts and compare.

    Rebuild STAGE (or the artifacts NAME of a stage) from its pinned generator and compare.

    Every candidate is bit-identical, within the record's tolerance (max and mean abs/rel error
    and max ULPs per array), drift, or new. Exit 0 if nothing drifted, 1 on drift, missing or
    unavailable references (both sides are kept in the scratch folder), 2 on usage errors.
    Without --accept the registry and the store are never changed.
    """
    if remote is not None and no_remote:
        raise UsageError("--remote cannot be combined with --no-remote")
    offline = offline or offline_from_env()
    remotes = mirrors_opener(obj.project(), remote) if not (no_remote or offline) else tuple
    report = regenerate(
        obj.project(),
        obj.store,
        target,
        scratch=scratch.check_wipeable() if scratch is not None else None,
        accept=accept,
        fetch=fetch,
        python=python,
        offline=offline,
        remotes=remotes,
        log=lambda m: err.print(m, markup=False),
    )
    if report_path is not None:
        write_parts(report_path, report, sort_keys=True)
    if as_json:
        print_json(report.to_json(), sort_keys=True)
    else:
        print_report(report)
    report_failures(
        Failure(c.verdict, c.name, c.reason, _fix(c.verdict, c.name, report.stage))
        for c in report.comparisons
        if not c.verdict.ok
    )
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


def _fix(verdict: Verdict, name: str, stage: str) -> str | None:
    """The command that settles a verdict that is not fine."""
    if verdict is Verdict.UNAVAILABLE:
        return (
            "push the registered bytes from a store that holds them (fixture-store push "
            f"{names.shell(name)} --remote REMOTE), then: fixture-store regenerate {stage} "
            "--fetch; or, to "
            f"register this machine's bytes instead: fixture-store regenerate {stage} --accept"
        )
    if verdict is Verdict.DRIFT:
        return f"if the change is intended: fixture-store regenerate {stage} --accept"
    return None


# A stage's file counts: this machine's split where its run report has it, else ``pass``.
SUMMARY_COLUMNS = ("bit_identical", "within_tolerance", "pass", "drift", "new", "missing")


@click.command()
@click.argument(
    "reports", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--metrics",
    "metrics_path",
    type=OutputPath(what="metrics file"),
    required=True,
    help="Write the headline counts here (DVC metrics: files that pass and drifted, artifacts "
    "verified) and this machine's identical and within-tolerance counts to run/ beside it; "
    "--json prints the whole summary.",
)
@click.option(
    "--plots",
    "plots_dir",
    type=OutputPath(folder=True, what="plots folder"),
    help="Write the checkpoint chain's parity table here (DVC plots), and the errors of "
    "within-tolerance files, read from the stages' run reports, to run/ in it.",
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
    metrics_path: Target,
    plots_dir: Target | None,
    everything: bool,
    full: bool,
    as_json: bool,
) -> None:
    """Verify and summarise the stage reports.

    Verify what the stages registered and summarise their REPORTS (the pipeline's last step).

    Exit 0 if no stage drifted and every artifact checked (the stages' families, or the whole
    registry with --all) verifies, else 1.
    """
    from fixture_store.regenerate import summary as summary_mod

    registry = obj.registry()
    summary = summary_mod.summarise(reports, registry, obj.store, everything=everything, full=full)
    summary_mod.write(summary, metrics_path, plots_dir)
    doc = summary.metrics()
    if as_json:
        print_json(doc, sort_keys=True)
    else:
        _print_summary(doc)
    report_failures(Failure(r.status, r.name, r.message) for r in summary.failures)
    sys.exit(EXIT_OK if summary.ok else EXIT_FAILED)


def _print_summary(doc: dict[str, Any]) -> None:
    """A line per stage with a file that is not bit-identical, one line for the others, then
    the totals, the checkpoint chain and the verification."""
    identical = []
    for name, s in doc["stages"].items():
        files = s["files"]
        if set(k for k, n in files.items() if n) <= {"bit_identical"}:
            identical.append((name, s["artifacts"]))
            continue
        counts = counts_text((col.replace("_", " "), files.get(col, 0)) for col in SUMMARY_COLUMNS)
        out.print(f"  {name}: {s['artifacts']} artifacts; files: {counts or 'none'}", markup=False)
    if identical:
        names = ", ".join(f"{name} ({n} artifacts)" for name, n in identical)
        out.print(f"  every file bit-identical: {names}", markup=False)
    t = doc["total_files"]
    unsplit = f", {t['pass']} pass (no run report)" if t.get("pass") else ""
    out.print(
        f"files: {t.get('bit_identical', 0)} identical, "
        f"{t.get('within_tolerance', 0)} within tolerance{unsplit}, {t.get('drift', 0)} drift"
    )
    if "parity" in doc:
        p = doc["parity"]
        out.print(
            f"checkpoint chain: {p['within']}/{p['cases']} cases within tolerance of "
            f"PyTorch, max abs {p['max_abs']:.3g}, max rel {p['max_rel']:.3g}"
        )
    out.print("verify: " + ", ".join(f"{n} {k}" for k, n in doc["verify"].items()))
