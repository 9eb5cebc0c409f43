"""Commands that read the registry (list, show, status), and migrate, which rewrites a family in the
registry's current form."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from typing import Any

import click
from rich.table import Table

from fixture_store.cli._common import (
    Context,
    exit_code,
    handle_errors,
    line,
    out,
    print_json,
    styled,
)
from fixture_store.registry import Record, Registry
from fixture_store.registry import project as project_mod
from fixture_store.registry.frozen import thaw
from fixture_store.sources.local import Orphan, orphans
from fixture_store.verify import presence_by_family, verify_names

PRESENCE_COLUMNS = ("present", "missing", "gap", "invalid")


@click.command(name="list")
@click.option("--family", "families", multiple=True, help="Only artifacts of FAMILY.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def list_(obj: Context, families: tuple[str, ...], as_json: bool) -> None:
    """List registered artifacts."""
    registry = obj.registry()
    rows = _rows(registry, registry.select((), families))
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} artifacts")
    for col in ("artifact", "kind", "size", "digest", "source"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(
            row["name"],
            row["kind"] or styled("invalid-record", "invalid"),
            f"{row['size']:,}" if row["size"] is not None else "",
            (row["digest"] or "")[7:19],
            row["source"] or row.get("invalid", ""),
        )
    out.print(table)


def _rows(registry: Registry, names: list[str]) -> list[dict[str, Any]]:
    invalid = dict(registry.invalid())
    rows: list[dict[str, Any]] = []
    for name in names:
        if name in invalid:
            rows.append(
                {
                    "name": name,
                    "kind": None,
                    "size": None,
                    "digest": None,
                    "source": None,
                    "invalid": invalid[name].about(name),
                }
            )
            continue
        r = registry.get(name)
        rows.append(
            {
                "name": name,
                "kind": r.kind,
                "size": r.digest.size if r.digest else None,
                "digest": r.digest.text if r.digest else None,
                "source": r.source.describe(),
                "gap": r.gap,
            }
        )
    return rows


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option(
    "--lineage",
    is_flag=True,
    help="Print the chain of parents (upstream case -> archive -> fixture).",
)
@click.pass_obj
@handle_errors
def show(obj: Context, name: str, as_json: bool, lineage: bool) -> None:
    """Show NAME's record and whether it verifies.

    Show the record of NAME and whether its bytes verify."""
    registry = obj.registry()
    record = registry.get(name)
    if lineage:
        from fixture_store.cli.provenance import print_lineage

        print_lineage(registry, name, as_json=as_json)
        return
    result = verify_names(obj.store, registry, [name], workers=1)[0]
    if as_json:
        print_json({"name": name, **record.to_json(), "status": str(result.status)}, sort_keys=True)
        return
    _print_record(name, record)
    out.print(line("  status:  ", styled(result.status), " ", result.message))
    if result.fix:
        out.print(f"  fix:     {result.fix}")
    sys.exit(exit_code([result.status]))


def _print_record(name: str, record: Record) -> None:
    out.print(line((name, "bold"), f"  ({record.kind})"))
    if record.digest:
        out.print(f"  digest:  {record.digest.text}")
        out.print(f"  size:    {record.digest.size:,} bytes")
    out.print(f"  source:  {record.source.describe()}", markup=False)
    if record.members is not None:
        out.print(f"  members: {len(record.members)} files, {record.members.total_size:,} bytes")
    if record.lineage:
        out.print(f"  lineage: {', '.join(record.lineage)}")
    for label, value in _described(record):
        out.print(f"  {label + ':':<12} {value}", markup=False)
    for up in record.upstream:
        out.print(f"  {'upstream:':<12} {up.describe()}", markup=False)
    if record.gap:
        out.print(f"  gap:     {record.gap}", markup=False)


def _described(record: Record) -> list[tuple[str, str]]:
    """What the record says about its bytes, as ``show`` prints it (only the fields it has)."""
    fields: list[tuple[str, Any]] = [
        ("license", record.license),
        ("description", record.description),
        ("tolerance", json.dumps(record.tolerance.to_json()) if record.tolerance else None),
        ("arrays", len(record.arrays) if record.arrays else None),
        ("seed", record.seed),
        ("input shape", json.dumps(thaw(record.input_shape)) if record.input_shape else None),
        ("command", shlex.join(record.command) if record.command else None),
        (
            "metadata",
            json.dumps(thaw(record.metadata), sort_keys=True) if record.metadata else None,
        ),
    ]
    return [(label, str(value)) for label, value in fields if value is not None]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def status(obj: Context, as_json: bool) -> None:
    """Summarise the registry and the store.

    Summarise the registry and the store (presence only; 'verify' hashes)."""
    registry = obj.registry()
    store = obj.store
    per_family = presence_by_family(store, registry)
    objects = sum(1 for _ in store.iter_objects())
    unnamed = orphans(registry.root, registry.records(), project_mod.orphans_ignored(registry.root))
    if as_json:
        print_json(
            {
                "store": str(store.root),
                "registry": str(registry.directory),
                "objects": objects,
                "families": {k: dict(v) for k, v in per_family.items()},
                "orphans": [o.to_json() for o in unnamed],
            }
        )
        return
    out.print(f"registry: {registry.directory}")
    out.print(f"store:    {store.root} ({objects:,} objects)")
    table = Table()
    table.add_column("family", justify="left")
    for col in PRESENCE_COLUMNS:
        table.add_column(col, justify="right")
    for family, counts in per_family.items():
        table.add_row(family, *(str(counts[k]) for k in PRESENCE_COLUMNS))
    out.print(table)
    _print_orphans(unnamed)


def _print_orphans(unnamed: list[Orphan]) -> None:
    if not unnamed:
        return
    out.print(
        line(
            styled("orphan", f"{len(unnamed)} orphan(s)"),
            ": files in folders of local sources that no record names",
        )
    )
    for o in unnamed:
        out.print(f"  {o.path}")
    out.print(f"  fix: {unnamed[0].fix}")


@click.command()
@click.argument("families", nargs=-1, required=True, metavar="FAMILY...")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def migrate(obj: Context, families: tuple[str, ...], as_json: bool) -> None:
    """Rewrite families in the current form.

    Rewrite each FAMILY in the registry's current form, each in one transaction: its arrays
    manifests grouped by dtype and shape ("float64[1,12]": [names]), without the byte ranges of
    files whose arrays are too small for partial fetch to use. Names, dtypes, shapes, digests
    and tolerances are unchanged; families not migrated read as they are."""
    from fixture_store.migrate import migrate_family

    registry = obj.registry()
    done = [migrate_family(registry, family) for family in families]
    if as_json:
        print_json([dataclasses.asdict(m) for m in done])
        return
    for m in done:
        out.print(
            f"{m.family}: {m.records:,} records, {m.arrays:,} arrays; "
            f"{m.before:,} -> {m.after:,} bytes"
            + (f"; ranges left out of {len(m.unranged)} records" if m.unranged else "")
        )
