"""``fixture-store fetch``: bring artifacts from their pinned sources into the store, verified."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from fixture_store.cli.app import Context, err, handle_errors, out, progress
from fixture_store.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from fixture_store.fetch import FetchResult, Outcome, fetch_names
from fixture_store.sources import offline_from_env

STYLE = {
    Outcome.PRESENT: "green",
    Outcome.FETCHED: "green",
    Outcome.GAP: "cyan",
    Outcome.FAILED: "bold red",
    Outcome.INVALID_RECORD: "bold red",
    Outcome.UNKNOWN: "bold red",
}


def exit_code(results: list[FetchResult]) -> int:
    outcomes = {r.outcome for r in results}
    if outcomes & {Outcome.INVALID_RECORD, Outcome.UNKNOWN}:
        return EXIT_USAGE
    if Outcome.FAILED in outcomes:
        return EXIT_FAILED
    return EXIT_OK


@click.command()
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Fetch every artifact of the registry.")
@click.option("--family", "families", multiple=True, help="Fetch every artifact of FAMILY.")
@click.option(
    "--offline",
    is_flag=True,
    help="Never use the network; fail on anything not already in the store "
    "(also on with HF_HUB_OFFLINE=1).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=None,
    help="Parallel fetches (default: twice the CPUs, at most 8).",
)
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a summary (verified artifacts per family, the pinned sources) "
    "to this file; it is the same on every machine, so DVC can track it.",
)
@click.pass_obj
@handle_errors
def fetch(
    obj: Context,
    names: tuple[str, ...],
    all_: bool,
    families: tuple[str, ...],
    offline: bool,
    jobs: int | None,
    as_json: bool,
    report_path: Path | None,
) -> None:
    """Fetch NAMES (glob patterns allowed), a --family, or --all from their pinned sources.

    Artifacts that already verify are not downloaded again; a missing or damaged object is
    fetched and replaced. Every byte is checked against its record before it enters the store.
    Exit 0 if everything asked for is present and verified, 1 if any fetch failed, 2 on usage
    or registry errors.
    """
    if not (names or families or all_):
        raise UsageError(
            "say what to fetch: NAMES, --family FAMILY or --all", fix="fixture-store fetch --all"
        )
    if all_ and (names or families):
        raise UsageError("--all cannot be combined with NAMES or --family")
    registry = obj.registry()
    chosen = registry.select(names, families)
    offline = offline or offline_from_env()
    started = time.perf_counter()
    with progress(len(chosen), "fetching", enabled=not as_json) as bar:
        task = bar.add_task("fetch", total=len(chosen))
        report = fetch_names(
            obj.store,
            registry,
            chosen,
            offline=offline,
            jobs=jobs,
            on_result=lambda _r: bar.advance(task),
        )
    elapsed = time.perf_counter() - started
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(
            json.dumps(report.summary(registry), indent=2, sort_keys=True) + "\n"
        )
    results = report.results
    counts = Counter(str(r.outcome) for r in results)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": str(obj.store.root),
                    "offline": offline,
                    "downloaded_bytes": report.downloaded_bytes,
                    "downloads": report.downloads,
                    "seconds": round(elapsed, 3),
                    "counts": dict(sorted(counts.items())),
                    "results": [r.to_json() for r in results],
                },
                indent=2,
            )
        )
    else:
        _print_table(results)
        summary = ", ".join(f"{counts[str(o)]} {o}" for o in Outcome if counts[str(o)])
        out.print(
            f"{len(results)} artifacts: {summary or 'none'}; downloaded "
            f"{report.downloaded_bytes:,} bytes in {report.downloads} downloads; "
            f"{elapsed:.1f}s"
        )
    for r in results:
        if not r.ok:
            err.print(f"{r.outcome}: {r.name}: {r.message}", markup=False)
            if r.fix:
                err.print(f"  fix: {r.fix}", markup=False)
    sys.exit(exit_code(results))


def _print_table(results: list[FetchResult], limit_ok: int = 30) -> None:
    table = Table(title="fetch")
    for col in ("artifact", "outcome", "source", "detail"):
        table.add_column(col, overflow="fold")
    failures = [r for r in results if not r.ok]
    shown = [r for r in results if r.ok][:limit_ok]
    for r in [*failures, *shown]:
        table.add_row(
            r.name,
            f"[{STYLE[r.outcome]}]{r.outcome}[/]",
            r.source,
            r.message if not r.ok else f"{r.size:,} B",
        )
    hidden = len(results) - len(failures) - len(shown)
    if hidden > 0:
        table.caption = f"… and {hidden:,} more present or fetched (use --json for all)"
    out.print(table)
