"""Where an artifact comes from: the provenance export and the lineage ``show --lineage`` prints."""

from __future__ import annotations

import click

from fixture_store import provenance as provenance_mod
from fixture_store.cli._common import Context, handle_errors, out, print_json
from fixture_store.registry import Registry


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
    """Print NAME's provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate."""
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
