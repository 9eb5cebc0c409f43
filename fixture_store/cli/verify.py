"""Commands that check bytes against their records: verify, path."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import click

from fixture_store import snapshot
from fixture_store.cli import _common
from fixture_store.cli._common import (
    Context,
    Failure,
    counts_text,
    exit_code,
    family_lines,
    handle_errors,
    leave,
    print_json,
    progress,
    report_failures,
    styled,
    verbose_option,
    workers_option,
)
from fixture_store.objects.digests import Algorithm
from fixture_store.verifying.results import Result, Status, outcomes

ROWS_SHOWN = 50
FAILURES_SHOWN = 20


@click.command()
@click.argument("names", nargs=-1)
@click.option("--family", "families", multiple=True, help="Verify every artifact of FAMILY.")
@click.option(
    "--full",
    is_flag=True,
    help="Re-hash everything; ignore the verified-state cache and the verify snapshot.",
)
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@workers_option
@verbose_option
@click.option(
    "--digest",
    "algorithm",
    type=click.Choice([a.value for a in Algorithm]),
    default=Algorithm.AUTO.value,
    show_default=True,
    help="Hash to re-verify with: 'auto' uses the record's BLAKE3 where it has one "
    "(several times faster), 'sha256' forces the identity hash.",
)
@click.pass_obj
@handle_errors
def verify(
    obj: Context,
    names: tuple[str, ...],
    families: tuple[str, ...],
    full: bool,
    as_json: bool,
    workers: int | None,
    verbose: bool,
    algorithm: str,
) -> None:
    """Verify artifacts against their records.

    Verify artifacts (default: all) against their records.

    Exit 0 if all verified (declared gaps allowed), 1 if any is missing or mismatched, 2 on
    registry or usage errors. 'verify --full --digest sha256' re-hashes every byte with the
    identity hash. A verify of every record that passed is remembered in your state folder:
    while the registry files and every object file are unchanged, the next one checks one
    lstat per object and parses nothing (see the trust model).
    """
    results = snapshot.verify_project(
        obj.store,
        functools.partial(obj.registry, cached=not full),
        obj.project(),
        names=names,
        families=families,
        full=full,
        algorithm=Algorithm(algorithm),
        workers=workers,
        progress=lambda total: progress(total, "verifying", enabled=not as_json),
    )
    statuses = outcomes(results)[1]
    if as_json:
        counts = Counter(str(s) for s in statuses)
        rows, hashed = [], 0
        for r in results:  # each built once (a snapshot's are built as they are asked for)
            rows.append(r.to_json())
            hashed += r.hashed_bytes
        print_json(
            {
                "store": str(obj.store.root),
                "full": full,
                "digest": algorithm,
                "hashed_bytes": hashed,
                "counts": dict(sorted(counts.items())),
                "results": rows,
            }
        )
    else:
        print_results(results, title=f"verify ({'full' if full else 'cached'})", verbose=verbose)
    report_failures(
        (Failure(r.status, r.name, r.message) for r in not_fine(results, statuses)),
        limit=FAILURES_SHOWN,
    )
    leave(exit_code(set(statuses)))


def not_fine(results: Sequence[Result], statuses: Sequence[Status]) -> list[Result]:
    """The results that are neither verified nor a declared gap (only these are built, when the
    results are a snapshot's columns)."""
    fine = (Status.VERIFIED, Status.GAP)
    return [results[i] for i, s in enumerate(statuses) if s not in fine]


def print_results(
    results: Sequence[Result], *, title: str, verbose: bool = False, limit: int = ROWS_SHOWN
) -> None:
    """A line per family, and a table of the first ``limit`` artifacts that are not fine (a
    declared gap is fine), or of every artifact with ``verbose``; then the counts. ``--json``
    has every result."""
    names, statuses = outcomes(results)
    counts = Counter(statuses)
    bad = not_fine(results, statuses)
    shown = results if verbose else bad[:limit]
    if shown:
        from rich.table import Table  # only a table needs it: 'verify --json' does not pay for it

        table = Table(title=title, show_lines=False)
        table.add_column("artifact", overflow="fold")
        table.add_column("kind")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for r in shown:
            table.add_row(r.name, r.kind or "", styled(r.status), _detail(r))
        if len(shown) < len(bad):
            table.caption = (
                f"… and {len(bad) - len(shown):,} more not verified (use --json for all)"
            )
        _common.out.print(table)  # made on first use: a summary with no table never makes it
    _common.echo_lines(
        [
            *family_lines(zip(names, statuses, strict=True), Status),
            f"{len(results)} artifacts: {counts_text((s, counts[s]) for s in Status) or 'none'}",
        ]
    )


def _detail(r: Result) -> str:
    if not r.ok:
        return r.message + (f"\nfix: {r.fix}" if r.fix else "")
    if r.expected is None:
        return ""
    return f"{r.expected.short}… {r.expected.size:,} B" + (" (cached)" if r.cached else "")


@click.command()
@click.argument("name")
@click.pass_obj
@handle_errors
def path(obj: Context, name: str) -> None:
    """Print the path of NAME's verified bytes.

    Print the path of NAME's verified bytes (a tree artifact gives a folder).

    Exits non-zero, printing nothing on stdout, if the artifact does not verify.
    """
    from fixture_store.access import Fixtures

    fixtures = Fixtures(obj.store, obj.registry())
    record = fixtures.registry.get(name)
    click.echo(str(fixtures.tree(name) if record.is_tree else fixtures.path(name)))
