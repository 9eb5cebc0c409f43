"""``fixture-store remote gc``: remove from a folder or S3 remote what no record references."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from fixture_store import registry as registry_mod
from fixture_store.cli._common import (
    Context,
    Failure,
    err,
    handle_errors,
    out,
    print_json,
    progress,
    report_failures,
)
from fixture_store.errors import EXIT_FAILED
from fixture_store.remotes import config, open_remote
from fixture_store.remotes import gc as remote_gc
from fixture_store.remotes.keys import keys_of


@click.command("gc")
@click.argument("name", metavar="NAME|URL")
@click.option("--yes", is_flag=True, help="Delete what the plan finds (default: dry run).")
@click.option(
    "--keep-registry",
    "keep_registries",
    multiple=True,
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also keep the objects this project's records reference (repeat for every project "
    "or branch checkout sharing the remote).",
)
@click.option(
    "--repack-below",
    type=click.FloatRange(0.0, 1.0),
    default=remote_gc.DEFAULT_REPACK_BELOW,
    show_default=True,
    help="Repack a partly-garbage pack whose referenced bytes are under this fraction of it "
    "(0: never repack, keep such packs whole).",
)
@click.option(
    "--min-age",
    type=click.FloatRange(0.0),
    default=remote_gc.DEFAULT_MIN_AGE,
    show_default=True,
    metavar="SECONDS",
    help="Leave what was written less than this long ago (a push in flight).",
)
@click.option(
    "--jobs", type=click.IntRange(1, 64), default=8, show_default=True, help="Parallel requests."
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def remote_gc_cmd(
    obj: Context,
    name: str,
    yes: bool,
    keep_registries: tuple[Path, ...],
    repack_below: float,
    min_age: float,
    jobs: int,
    as_json: bool,
) -> None:
    """Remove what no record needs from a remote.

    Remove from the folder or S3 remote NAME the objects no record of this registry (and of
    each --keep-registry) references: objects under their own key, packs none of whose objects
    is referenced (and their indexes, replaced by one naming what survives), packs no index
    names, temp files of cut pushes, and on S3 the multipart uploads cut pushes left open
    (aborted). A pack partly garbage is repacked below --repack-below, else kept whole. Dry
    run unless --yes; --min-age spares what is younger (a push in flight).

    Refused when a registry has an invalid record or a pack index of the remote cannot be
    read, and for a Hub remote (its history keeps every file). Run it at a quiet moment with
    every registry sharing the remote: a push of another registry running meanwhile may see an
    object present that gc then removes. Exit 0: done (or planned); 1: something could not be
    removed or repacked (the remote stays readable); 2: refused.
    """
    registry = obj.registry()
    registries = [registry, *(registry_mod.load(path) for path in keep_registries)]
    keep = remote_gc.referenced(registries)
    spec = config.load(registry.root).resolve(name)
    target = open_remote(spec, jobs=jobs)
    refused = remote_gc.refusal(target)
    keys = keys_of(target)
    if refused is not None or keys is None:
        raise refused or AssertionError("a remote with keys is never refused")
    plan = remote_gc.plan(keys, keep, min_age=min_age, repack_below=repack_below, jobs=jobs)
    swept = None
    if yes:
        total = len(plan.objects) + len(plan.temps) + len(plan.fated(*remote_gc.GOES))
        total += len(plan.uploads)
        with progress(total, "removing", enabled=not as_json) as advance:
            swept = remote_gc.execute(keys, plan, jobs=jobs, on_key=advance)
    _print(plan, swept, as_json=as_json)
    if swept is not None and not swept.ok:
        report_failures(
            (Failure("failed", key, e.message, e.fix) for key, e in swept.failed.items()),
            limit=20,
        )
        sys.exit(EXIT_FAILED)


def _print(plan: remote_gc.Plan, swept: remote_gc.Swept | None, *, as_json: bool) -> None:
    if as_json:
        done = {} if swept is None else swept.to_json()
        print_json({"dry_run": swept is None, **plan.to_json(), **done})
        return
    table = Table(title=f"remote gc {plan.label}")
    for col in ("what", "count", "bytes"):
        table.add_column(col, overflow="fold")
    table.add_row("objects under their own key", str(len(plan.objects)), _bytes(plan.objects))
    for fate, what in _FATES:
        found = plan.fated(fate)
        size = sum(p.garbage_bytes if fate in _KEPT else p.pack.size for p in found)
        table.add_row(what, str(len(found)), f"{size:,}")
    table.add_row("pack indexes replaced", str(len(plan.replaced)), "")
    table.add_row("temp files of cut pushes", str(len(plan.temps)), _bytes(plan.temps))
    parts = sum(u.size or 0 for u in plan.uploads)
    table.add_row("uploads cut pushes left (aborted)", str(len(plan.uploads)), f"{parts:,}")
    out.print(table)
    young = plan.young_objects + len(plan.fated(remote_gc.Fate.YOUNG)) + plan.young_uploads
    if young:
        err.print(f"left {young} item(s) written too recently (--min-age)", markup=False)
    if swept is None:
        out.print(
            f"would free {plan.freed:,} bytes; {plan.kept_bytes:,} garbage bytes stay in packs "
            "kept whole or too young; rerun with --yes to delete",
            markup=False,
        )
        return
    out.print(
        f"removed {len(swept.removed)} keys, aborted {len(swept.aborted)} upload(s), repacked "
        f"{len(swept.repacked)} pack(s), freed ~{plan.freed:,} bytes; {plan.kept_bytes:,} "
        "garbage bytes stay in packs kept whole or too young",
        markup=False,
    )


_FATES = (
    (remote_gc.Fate.DELETE, "packs all garbage (removed)"),
    (remote_gc.Fate.REPACK, "packs repacked (garbage bytes)"),
    (remote_gc.Fate.KEEP, "packs kept whole (garbage bytes)"),
    (remote_gc.Fate.ORPHAN, "packs no index names (removed)"),
    (remote_gc.Fate.YOUNG, "packs too young (garbage bytes)"),
)
_KEPT = frozenset({remote_gc.Fate.REPACK, remote_gc.Fate.KEEP, remote_gc.Fate.YOUNG})


def _bytes(items: tuple[tuple[str, int], ...]) -> str:
    return f"{sum(size for _, size in items):,}"
