"""Where an artifact comes from: the provenance export, the provenance report and the lineage
``show --lineage`` prints."""

from __future__ import annotations

from pathlib import Path

import click

from fixture_store import provenance as provenance_mod
from fixture_store.cli._common import (
    Context,
    Failure,
    OutputPath,
    counts_text,
    err,
    exit_code,
    handle_errors,
    leave,
    out,
    print_json,
    report_failures,
    workers_option,
)
from fixture_store.objects.outputs import Target
from fixture_store.registry import Registry, Tolerance


@click.command()
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
# click passes --format, which has one choice today.
def provenance(obj: Context, name: str, fmt: str, members: bool) -> None:  # noqa: ARG001
    """Print NAME's provenance (in-toto, SLSA).

    Print NAME's provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate."""
    registry = obj.registry()
    print_json(provenance_mod.in_toto_statement(registry, name, members=members), sort_keys=True)


def print_lineage(registry: Registry, name: str, *, as_json: bool) -> None:
    """NAME and its ancestors, indented by depth, each with its source."""
    steps = list(provenance_mod.lineage(registry, name))
    if as_json:
        print_json(
            [
                {
                    "depth": s.depth,
                    "name": s.name,
                    "digest": s.digest,
                    "kind": s.record.kind if s.record else None,
                    "source": s.record.source.describe() if s.record else None,
                }
                for s in steps
            ]
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


FAILURES_SHOWN = 20  # stderr names the first artifacts that do not verify; the pages name all


def _stage_tolerances(root: Path) -> dict[str, Tolerance]:
    """Each regenerated family's stage tolerance, from the project's params.yaml: what
    regeneration judges a record that states none by (none without the file, or without the
    regenerate extra that reads it)."""
    from fixture_store._extras import MissingExtraError
    from fixture_store.regenerate import stages

    if not (root / stages.PARAMS_FILE).is_file():
        return {}
    try:
        declared = stages.load(root)
    except MissingExtraError:
        return {}
    return {
        family: stage.tolerance
        for stage in declared.values()
        if stage.tolerance is not None
        for family in stage.families
    }


@click.command()
@click.option(
    "--html",
    "html_dir",
    required=True,
    type=OutputPath(folder=True, what="report folder"),
    help="Write the report's pages to this folder (index.html and one page per family).",
)
@click.option("--family", "families", multiple=True, help="Only FAMILY (repeat for several).")
@click.option("--full", is_flag=True, help="Re-hash every file; ignore the verified-state cache.")
@workers_option
@click.pass_obj
@handle_errors
def report(
    obj: Context, html_dir: Target, families: tuple[str, ...], full: bool, workers: int | None
) -> None:
    """Write the provenance report as HTML pages.

    Write the provenance report: families, status, lineage graphs, known failures.

    Every artifact is verified first (as ``verify`` would: cached unless --full). The index page
    lists each family with its counts by status (verified, missing, gap, invalid, mismatch,
    unsafe), the lineage between families as a graph and every known failure; each family's
    page lists its artifacts with source, tolerance and parents, and draws their lineage
    (upstream, converter stage, archive, parity fixture). The pages fetch nothing and hold no
    time or path of this machine, so a verified registry gives the same bytes everywhere.

    Exit 0 when every artifact verifies or is a declared gap, 1 when one does not (the pages are
    written either way), 2 on an invalid record.
    """
    from fixture_store import provenance_report

    registry = obj.registry()
    built = provenance_report.build(
        obj.store,
        registry,
        families=families,
        full=full,
        workers=workers,
        stage_tolerances=_stage_tolerances(registry.root),
    )
    pages = provenance_report.write_html(built, html_dir)
    artifacts = built.artifacts.values()
    counts = built.counts()
    n = len(pages) - 1  # the index, then one page per family
    out.print(
        f"provenance report: {pages[0]} ({n} family page{'' if n == 1 else 's'}; "
        f"{counts_text((s, counts[s]) for s in provenance_report.STATUSES)})",
        markup=False,
    )
    failing = [Failure(a.outcome, a.name, a.detail, a.fix or None) for a in artifacts if a.failing]
    report_failures(failing[:FAILURES_SHOWN])
    if len(failing) > FAILURES_SHOWN:
        err.print(
            f"… and {len(failing) - FAILURES_SHOWN:,} more (the index page lists them all)",
            markup=False,
        )
    leave(exit_code(a.outcome for a in artifacts))
