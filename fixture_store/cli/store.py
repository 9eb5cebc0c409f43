"""Commands that put bytes into the store or take them out: init, add, rehash, gc."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from fixture_store import gc as gc_mod
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.cli._common import (
    Context,
    Failure,
    err,
    exit_code,
    handle_errors,
    out,
    print_json,
    progress,
    report_failures,
    workers_option,
)
from fixture_store.errors import UsageError
from fixture_store.registry import HubSource, Source, UrlSource
from fixture_store.rehash import record_blake3


@click.command()
@click.argument("project", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
@handle_errors
def init(obj: Context, project: Path) -> None:
    """Create provenance/ in PROJECT (default: here) and the object store."""
    directory, created = registry_mod.files.create_directory(project)
    store = obj.store.ensure()
    out.print(f"registry: {directory} ({'created' if created else 'already there'})")
    out.print(f"store:    {store.root}")


def parse_source(text: str | None) -> Source | None:
    """``https://...`` (url) or ``hf://[datasets/|spaces/]REPO@REV/PATH`` (hub); None: local."""
    if text is None or text == "local":
        return None
    if text.startswith("https://") or text.startswith("http://"):
        return UrlSource(text)
    if text.startswith("hf://"):
        return HubSource.from_uri(text)
    raise UsageError(
        f"unknown --source {text!r}",
        fix="use https://..., hf://REPO@REVISION/PATH, or omit it for a local file",
    )


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--name", required=True, help="Artifact name, 'family/...'.")
@click.option(
    "--kind",
    required=True,
    type=click.Choice(registry_mod.records.KINDS),
    help="What the artifact is; folders are 'tree' or 'onnx-case'.",
)
@click.option(
    "--source",
    "source_text",
    metavar="SOURCE",
    help="Pinned source: https://URL, hf://REPO@REV/PATH; default: local path.",
)
@click.option("--license", "license_", help="License of the bytes (SPDX id).")
@click.option("--replace", is_flag=True, help="Rewrite an existing record whose bytes changed.")
@click.option(
    "--link",
    is_flag=True,
    help="Hard-link the files into the store instead of copying them (no second "
    "copy, no bytes written). They become read-only and share their bytes with "
    "the store: replace them, never edit them in place. Files on another "
    "filesystem or owned by someone else are copied, and named.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.pass_obj
@handle_errors
def add(
    obj: Context,
    path: Path,
    name: str,
    kind: str,
    source_text: str | None,
    license_: str | None,
    replace: bool,
    link: bool,
    as_json: bool,
) -> None:
    """Register a local file or folder PATH as NAME and ingest its bytes."""
    registry = obj.registry()
    extra = {"license": license_} if license_ else None
    record = ingest.add(
        obj.store,
        registry,
        path,
        name=name,
        kind=kind,
        source=parse_source(source_text),
        extra=extra,
        replace=replace,
        link=link,
    )
    copied = ingest.copied_not_linked(obj.store, path, record) if link else []
    if copied:
        err.print(
            f"note: {len(copied)} file(s) copied, not linked (another filesystem, not "
            f"yours, or the store had the bytes already), e.g. {copied[0]}",
            markup=False,
        )
    if as_json:
        out.print_json(json.dumps({"name": record.name, **record.to_json()}))
    else:
        out.print(f"added {record.name}: {record.object}")


@click.command()
@click.argument("names", nargs=-1)
@click.option("--family", "families", multiple=True, help="Every artifact of FAMILY.")
@click.option(
    "--replace",
    is_flag=True,
    help="Also rewrite a BLAKE3 already in a record (after SHA-256 matched).",
)
@workers_option
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_obj
@handle_errors
def rehash(
    obj: Context,
    names: tuple[str, ...],
    families: tuple[str, ...],
    replace: bool,
    workers: int | None,
    as_json: bool,
) -> None:
    """Record BLAKE3 beside SHA-256 for artifacts (default: all) whose SHA-256 verifies.

    Reads every object once, hashing it with SHA-256 and BLAKE3; records whose bytes match
    their SHA-256 get the BLAKE3 written into provenance/ (review the diff), so later 'verify'
    runs re-check them with the faster hash. Exit 1 if some object failed its SHA-256 check
    (those records are left untouched).
    """
    registry = obj.registry()
    chosen = registry.select(names, families)
    with progress(len(chosen), "hashing", enabled=not as_json) as advance:
        report = record_blake3(
            obj.store,
            registry,
            chosen,
            replace=replace,
            workers=workers,
            on_result=advance,
        )
    if as_json:
        print_json(
            {
                "updated": list(report.updated),
                "unchanged": list(report.unchanged),
                "failed": [r.to_json() for r in report.failed],
            }
        )
    else:
        out.print(
            f"recorded BLAKE3 for {len(report.updated)} artifacts; "
            f"{len(report.unchanged)} already had it; {len(report.failed)} failed"
        )
    report_failures(Failure(r.status, r.name, r.message, r.fix) for r in report.failed)
    sys.exit(exit_code(r.status for r in report.failed))


@click.command()
@click.option("--yes", is_flag=True, help="Delete the unreferenced objects (default: dry run).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def gc(obj: Context, yes: bool, as_json: bool) -> None:
    """Remove objects no record of this registry references. Dry run unless --yes.

    The store may be shared by several checkouts: only objects unreferenced by this registry are
    considered, so run gc from the checkout whose registry is the superset. Deleting waits for
    commands writing to the store (add, fetch, regenerate, rehash) to finish first.
    """
    swept = gc_mod.sweep(
        obj.store,
        obj.registry(),
        delete=yes,
        on_wait=lambda: err.print("waiting for the store's writers to finish", markup=False),
    )
    if as_json:
        print_json(
            {
                "dry_run": not yes,
                "unreferenced": len(swept.garbage),
                "bytes": swept.size,
                "removed": swept.removed,
                "removed_tmp": swept.removed_tmp,
                "objects": [g.hex for g in swept.garbage],
            }
        )
        return
    verb = "removed" if yes else "would remove"
    out.print(
        f"{verb} {len(swept.garbage)} unreferenced objects ({swept.size:,} bytes)"
        + ("" if yes else "; rerun with --yes to delete")
    )
