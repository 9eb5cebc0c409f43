"""``fixture-store expectations``: the matrix of rules per environment and their verification,
and ``expectations add``, a reviewed registry diff from a verified run."""

from __future__ import annotations

import click
from rich.table import Table

from fixture_store.cli._common import Context, handle_errors, out, print_json, styled
from fixture_store.display import escape
from fixture_store.errors import UsageError
from fixture_store.parity import matrix, runlog
from fixture_store.registry import transaction
from fixture_store.registry.raw_files import family_of

_STYLE = {matrix.VERIFIED: "verified", matrix.FAILING: "failed", matrix.NEVER: "missing"}


@click.group(name="expectations", invoke_without_command=True)
@click.option("--record", "names", multiple=True, help="Only record NAME (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
@handle_errors
def expectations(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """Show rules per environment and their runs.

    Verified: the run log holds a passing parity assertion judged by that rule against the
    reference registered now; failing: it holds only failures; never: no run."""
    if ctx.invoked_subcommand is not None:
        return
    obj: Context = ctx.obj
    registry = obj.registry()
    for name in names:
        registry.get(name)  # an unknown or invalid name: its typed error
    runs, bad = runlog.read(obj.store)
    rows = matrix.rows(registry, runs, names or None)
    if as_json:
        print_json({"rows": [r.to_json() for r in rows], "unreadable_log_lines": bad})
        return
    table = Table(title=f"{len(rows)} rules (run log: {obj.store.state_dir / runlog.LOG})")
    for col in ("record", "rule", "status", "verified in", "runs", "last"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(
            escape(row.record),
            row.rule or "(the record's own rule)",
            styled(_STYLE[row.status], row.status),
            "\n".join(row.environments),
            str(row.runs),
            row.last,
        )
    out.print(table)
    if bad:
        out.print(f"{bad} line(s) of the run log did not parse and were not counted")


@expectations.command(name="add")
@click.argument("name")
@click.option(
    "--env", "given", required=True, help="The conditions, e.g. device:cuda,dtype:float32."
)
@click.option(
    "--from-run",
    is_flag=True,
    required=True,
    help="From a passing run in the run log (the only source there is; required to say so).",
)
@click.option(
    "--write", is_flag=True, help="Write the entry into the registry (else print the diff)."
)
@click.pass_obj
@handle_errors
def add(obj: Context, name: str, given: str, from_run: bool, write: bool) -> None:  # noqa: ARG001
    """Add an environment verified by a run.

    An expectation for the conditions --env of NAME, from a passing run in the run log: prints
    the registry diff, and writes it only with --write."""
    registry = obj.registry()
    record = registry.get(name)
    runs, _ = runlog.read(obj.store)
    new = matrix.add_from_run(record, runs, given)
    # a diff is lines: each escaped, the line ends kept (a name cannot drive the terminal)
    out.print(escape(matrix.diff(record, new), keep="\n"), end="", markup=False, highlight=False)
    if not write:
        out.print("nothing written; run again with --write to write it")
        return
    fam = family_of(name)
    with transaction(registry.root) as tx:
        family = tx.family(fam, known=registry.families.get(fam))
        if family is None or family.records.get(name) != record:
            raise UsageError(
                f"the record {name} changed since it was read (another writer); nothing was "
                "written",
                fix="run the command again",
            )
        tx.write(fam, [new if r.name == name else r for r in family.records.values()])
    out.print(f"wrote the expectation {escape(given)!r} of {escape(name)}")
