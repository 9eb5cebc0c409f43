"""Commands that put bytes into the store or take them out: init, add, rehash, gc."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fixture_store import gc as gc_mod
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.cli import typed
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
from fixture_store.importers import installed
from fixture_store.objects import digests
from fixture_store.registry import HubSource, PackageSource, Source, UrlSource, shorthand
from fixture_store.registry import project as project_mod
from fixture_store.registry.upstream import PYPI_SCHEME
from fixture_store.rehash import record_blake3


@click.command()
@click.argument("project", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
@handle_errors
def init(obj: Context, project: Path) -> None:
    """Create the registry and the store.

    Create provenance/ in PROJECT (default: here) and the object store.

    In a project that uses DVC (a dvc.yaml or a .dvc/ folder), also adds /reports/, /metrics/
    and /plots/ to PROJECT's .gitignore: committed, the pipeline's outputs make a fresh clone's
    'dvc repro' skip the stages that put the generator-made fixtures into its store. A
    project without DVC gets no such lines.
    """
    directory, created = registry_mod.files.create_directory(project)
    ignored = project_mod.ignore_pipeline_outputs(project)
    store = obj.store.ensure()
    out.print(f"registry: {directory} ({'created' if created else 'already there'})")
    out.print(f"store:    {store.root}")
    if ignored:
        out.print(f".gitignore: added {' '.join(ignored)} (pipeline outputs)", markup=False)


def parse_source(
    text: str | None,
    project: Path | None = None,
    dist: str | None = None,
    dist_digest: str | None = None,
) -> Source | None:
    """``https://...`` (url), ``hf://[datasets/|spaces/]REPO@REV/PATH`` (hub) or
    ``pypi:NAME==VERSION/PATH`` (package: the distribution ``dist`` of SHA-256 ``dist_digest``,
    else the installed one's wheel, its digest from the project's uv.lock); None: local."""
    if (dist is not None or dist_digest is not None) and (
        text is None or not text.startswith(PYPI_SCHEME)
    ):
        raise UsageError("--dist and --dist-digest pin a --source pypi:NAME==VERSION/PATH")
    if text is None or text == "local":
        return None
    if text.startswith("https://") or text.startswith("http://"):
        return UrlSource(text)
    if text.startswith("hf://"):
        return HubSource.from_uri(text)
    if text.startswith(PYPI_SCHEME):
        where = registry_mod.Where(typed.COMMAND_LINE, None)
        requirement = text[len(PYPI_SCHEME) :].partition("/")[0]
        file, digest, size = installed.distribution_file(
            requirement, project or Path.cwd(), dist, dist_digest
        )
        return shorthand.package_source(text, where, file=file, file_digest=digest, file_size=size)
    raise UsageError(
        f"unknown --source {text!r}",
        fix="use https://..., hf://REPO@REVISION/PATH, pypi:NAME==VERSION/PATH, or omit it "
        "for a local file",
    )


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--name", help="Artifact name, 'family/...' (one PATH, or a --gap).")
@click.option("--family", help="Register each PATH as FAMILY/<its file name> (many files at once).")
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
    help="Pinned source: https://URL, hf://REPO@REV/PATH, pypi:NAME==VERSION/PATH; default: "
    "local path.",
)
@click.option(
    "--dist",
    metavar="FILE",
    help="pypi: source: the distribution's file name (default: the installed wheel's).",
)
@click.option(
    "--dist-digest",
    metavar="sha256:HEX",
    help="pypi: source: its SHA-256 (default: from the project's uv.lock).",
)
@click.option("--license", "license_", help="License of the bytes (SPDX id).")
@click.option("--description", help="What the artifact is, in a sentence.")
@click.option(
    "--tolerance",
    "tolerance_text",
    metavar="TOLERANCE",
    help="How a comparison judges it: JSON, METRIC, METRIC:BOUND (mean_abs:5e-4) or "
    "METRIC:KEY=VALUE,... (allclose:atol=1e-6,rtol=1e-4).",
)
@click.option(
    "--inputs",
    "inputs",
    multiple=True,
    metavar="PATTERN",
    help="An array of an NPZ that is a model input, not an output (name or glob pattern; "
    "with --tolerance): not required from a parity candidate, compared exactly if given. "
    "Repeatable.",
)
@click.option(
    "--metadata",
    "metadata_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A metadata field (text; KEY:=JSON for a JSON value). Repeatable. Over an existing "
    "record, sets that key and keeps the others.",
)
@click.option(
    "--metadata-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON object of metadata (--metadata fields are set over it).",
)
@click.option(
    "--unset-metadata",
    "unset_metadata",
    multiple=True,
    metavar="KEY",
    help="Remove a metadata key of the existing record (with --replace). Repeatable.",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="PIN",
    help="What the bytes were derived from, pinned, digest optional: OWNER/NAME@<40-hex>:FILE "
    "or hf://REPO@<40-hex>/PATH (Hub), git+https://HOST/REPO@<40-hex>[#PATH] or "
    "https://github.com/OWNER/REPO/tree/<40-hex> (git; no PATH: the repository at that commit), "
    "pypi:NAME==VERSION/FILE, https://URL, or the JSON object. Repeatable.",
)
@click.option("--upstream-license", help="License of the upstreams given (SPDX id).")
@click.option("--seed", type=int, help="The generator's random seed.")
@click.option("--input-shape", help="The generator's input shape: 1,3,224,224 or JSON.")
@click.option("--command", "command_text", help="The generator's command line.")
@click.option(
    "--gap",
    "gap_reason",
    metavar="REASON",
    help="Declare a gap: an artifact expected but not available yet (no PATH, no source).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Rewrite an existing record that differs (bytes, kind, source or a stated field).",
)
@click.option(
    "--link",
    is_flag=True,
    help="Hard-link the files into the store instead of copying them (no second "
    "copy, no bytes written). They become read-only and share their bytes with "
    "the store: replace them, never edit them in place. Files on another "
    "filesystem or owned by someone else are copied, and named.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
@click.pass_obj
@handle_errors
def add(
    obj: Context,
    paths: tuple[Path, ...],
    name: str | None,
    family: str | None,
    kind: str,
    source_text: str | None,
    dist: str | None,
    dist_digest: str | None,
    license_: str | None,
    description: str | None,
    tolerance_text: str | None,
    inputs: tuple[str, ...],
    metadata_pairs: tuple[str, ...],
    metadata_file: Path | None,
    unset_metadata: tuple[str, ...],
    upstreams: tuple[str, ...],
    upstream_license: str | None,
    seed: int | None,
    input_shape: str | None,
    command_text: str | None,
    gap_reason: str | None,
    replace: bool,
    link: bool,
    as_json: bool,
) -> None:
    """Register local files or folders.

    Register local files or folders PATHS (or a declared --gap) and ingest their bytes.

    One PATH with --name, or many with --family (each named FAMILY/<file name>), in one
    registry transaction: all are registered, or none when one is refused. The arrays manifest
    of NPY/NPZ files and the members of archives are read from their bytes. A record that
    exists is never changed silently: an identical add does nothing, one that differs is
    refused with the differences unless --replace. Exit 2 on a refusal.
    """
    names = _names(paths, name, family, gap=gap_reason is not None)
    where = registry_mod.Where(typed.COMMAND_LINE, names[0] if names else None)
    blame = typed.of(
        ("tolerance", "--tolerance", [tolerance_text]),
        ("tolerance.inputs", "--inputs", inputs),
        ("metadata", "--metadata", metadata_pairs),
        ("metadata", "--metadata-file", [metadata_file]),
        ("upstream", "--upstream", upstreams),
        ("upstream", "--upstream-license", [upstream_license]),
        ("license", "--license", [license_]),
        ("description", "--description", [description]),
        ("seed", "--seed", [seed]),
        ("input_shape", "--input-shape", [input_shape]),
        ("command", "--command", [command_text]),
        ("source", "--source", [source_text]),
    )
    with blame.blaming():
        stated = shorthand.stated(
            where,
            license=license_,
            description=description,
            tolerance=tolerance_text,
            metadata=metadata_pairs,
            metadata_file=metadata_file.read_text() if metadata_file is not None else None,
            upstream=upstreams,
            upstream_license=upstream_license,
            seed=seed,
            input_shape=input_shape,
            command=command_text,
            inputs=inputs,
        )
    with blame.parsing("--source", source_text or ""):
        source = parse_source(source_text, obj.registry().root, dist, dist_digest)
    if source is not None and len(names) > 1:
        raise UsageError("--source names one file's source: give it with one PATH and --name")
    if isinstance(source, PackageSource) and paths:
        _check_installed_bytes(source, paths[0])
    gap = registry_mod.Gap(gap_reason) if gap_reason is not None else None
    registrations = [
        ingest.Registration(
            n, kind, p, source, stated, gap, unset_metadata=unset_metadata, stated_in=where.file
        )
        for n, p in zip(names, paths or (None,), strict=True)
    ]
    with blame.blaming():
        done = ingest.register(obj.store, obj.registry(), registrations, replace=replace, link=link)
    if as_json:
        print_json([_outcome_json(d) for d in done])
        return
    for d in done:
        _print_outcome(d)
    for p, d in zip(paths, done, strict=False):
        _note_copied(obj, p, d.record, link)


def _check_installed_bytes(source: PackageSource, path: Path) -> None:
    """PATH must be the file the installed distribution's RECORD lists at the source's path
    (when that version is installed): a package source names where its bytes come from."""
    if not path.is_file():
        return
    recorded = installed.recorded_sha256(source.requirement, source.path)
    actual = digests.of_file(path).hex
    if recorded is not None and recorded != actual:
        raise UsageError(
            f"{path} is not {source.path} of {source.requirement}: its sha256 is {actual}, the "
            f"installed distribution's RECORD says {recorded}",
            fix="add the distribution's own file, or give the source the bytes came from",
        )


def _names(
    paths: tuple[Path, ...], name: str | None, family: str | None, *, gap: bool
) -> list[str]:
    """The artifact name of each PATH (or of the one declared gap)."""
    if (name is None) == (family is None):
        raise UsageError(
            "give --name NAME (one PATH or a --gap) or --family FAMILY (PATHS named by file)"
        )
    if gap:
        if paths or name is None:
            raise UsageError(
                "a declared gap has no bytes: --gap REASON with --name NAME and no PATH",
                fix="fixture-store add --name FAMILY/NAME --kind KIND --gap 'why it is missing'",
            )
        return [name]
    if not paths:
        raise UsageError("nothing to add: give PATHS, or --gap REASON to declare a gap")
    if name is not None:
        if len(paths) > 1:
            raise UsageError(
                f"--name names one artifact, but {len(paths)} paths were given",
                fix="use --family FAMILY to name each by its file name",
            )
        return [name]
    return [f"{family}/{p.name}" for p in paths]


def _print_outcome(done: ingest.Registered) -> None:
    record = done.record
    what = record.digest.text if record.digest else f"gap: {record.gap}"
    note = {
        ingest.Change.UNCHANGED: "  (already registered exactly so; nothing written)",
        ingest.Change.FILLED: "  (same bytes; filled in what the record lacked)",
    }.get(done.change, "")
    out.print(f"{done.change} {record.name}: {what}{note}", markup=False)
    for line in done.differences:
        out.print(f"    {line}", markup=False)


def _outcome_json(done: ingest.Registered) -> dict[str, object]:
    return {
        "name": done.record.name,
        "change": str(done.change),
        "differences": list(done.differences),
        "record": done.record.to_json(),
    }


def _note_copied(obj: Context, path: Path, record: registry_mod.Record, link: bool) -> None:
    copied = ingest.copied_not_linked(obj.store, path, record) if link else []
    if copied:
        err.print(
            f"note: {len(copied)} file(s) copied, not linked (another filesystem, not "
            f"yours, or the store had the bytes already), e.g. {copied[0]}",
            markup=False,
        )


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
    """Record BLAKE3 beside SHA-256.

    Record BLAKE3 beside SHA-256 for artifacts (default: all) whose SHA-256 verifies.

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
    """Remove objects no record references.

    Remove objects no record of this registry references. Dry run unless --yes.

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
