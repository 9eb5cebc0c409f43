"""Commands for reviewing a registry change: diff (what it does to trust), check (the records
alone, without the store)."""

from __future__ import annotations

import sys

import click

from fixture_store.cli._common import Context, echo_lines, handle_errors, leave, print_json
from fixture_store.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError


@click.command(name="diff")
@click.argument("revisions", nargs=-1, metavar="[REV [REV]]")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="text: a line per change; markdown: a table for a pull-request comment.",
)
@click.option(
    "--fail-on",
    metavar="KINDS",
    default="",
    help="Exit 1 if a change of these kinds is found, comma-separated: loosened, tightened, "
    "reshaped, reworded, digest, size, source, gap-made (or gap), gap-filled, added, removed, "
    "renamed, invalid, fields; tolerance (loosened and reshaped); any.",
)
@click.pass_obj
@handle_errors
def diff(obj: Context, revisions: tuple[str, ...], as_json: bool, fmt: str, fail_on: str) -> None:
    """Show what a registry change does to trust.

    Compare the registry at REV (default HEAD) with the working tree, or at two revisions:
    records added, removed and renamed; digests, sizes and sources changed; gaps made and
    filled; and every tolerance change classed as loosened, tightened, reshaped or reworded,
    per rule and environment, with its why. The registry at a revision is read with git; the
    store is not needed.

    Exit 0, or 1 when --fail-on names a kind of change that is there; 2 on a usage error or a
    registry file that does not parse.
    """
    from fixture_store.registry import files
    from fixture_store.review import changes
    from fixture_store.review import revisions as revs

    kinds = changes.parse_fail_on(fail_on)
    if len(revisions) > 2:  # noqa: PLR2004 - REV [REV]
        raise UsageError("diff takes at most two revisions", fix="fixture-store diff REV REV")
    names = revisions or ("HEAD",)
    root = obj.project()
    old = revs.resolve(root, names[0])
    before = revs.load(root, old)
    if len(names) == 2:  # noqa: PLR2004
        new = revs.resolve(root, names[1])
        after = revs.load(root, new)
    else:
        new, after = revs.Revision(), files.load(root, cached=False)
    result = changes.compare(before, after, old=old, new=new)
    if as_json:
        print_json(result.to_json())
    elif fmt == "markdown":
        sys.stdout.write(result.markdown())  # escaped for Markdown cell by cell
    else:
        echo_lines(result.lines())
    leave(EXIT_FAILED if result.failing(kinds) else EXIT_OK)


@click.command(name="check")
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
@click.pass_obj
@handle_errors
def check(obj: Context, as_json: bool) -> None:
    """Check the registry's records, no store.

    Check that every registry file parses and every record is valid, and that every record a
    tolerance names (an oracle, an expectation's reference) is registered. Reads provenance/
    only: no object is read and no store is needed (a pre-commit hook, a CI's first step).

    Exit 0 when the registry is valid, 2 when it is not.
    """
    from fixture_store.review import checking

    problems = checking.problems(obj.registry(cached=False))
    if as_json:
        print_json({"problems": [p.to_json() for p in problems]})
    elif problems:
        fix = "correct each record named above in its provenance/ file, then check again"
        echo_lines([*map(str, problems), f"registry: {len(problems)} problem(s)", f"  fix: {fix}"])
    else:
        echo_lines(["registry: valid"])
    leave(EXIT_USAGE if problems else EXIT_OK)
