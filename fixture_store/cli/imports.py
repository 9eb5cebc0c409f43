"""``fixture-store import``: register the files an existing manifest lists, checked first."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from fixture_store import importers
from fixture_store.cli._common import Context, err, handle_errors, out, print_json
from fixture_store.errors import EXIT_FAILED, FixtureStoreError, UsageError
from fixture_store.importers import folders, held, report, wheelrecord
from fixture_store.importers import plan as plan_mod
from fixture_store.importers import register as register_mod
from fixture_store.registry import KINDS, TREE_KINDS, Kind, PackageSource, Where
from fixture_store.registry import project as project_mod

_FORMATS = ", ".join(importers.FORMATS)


def _split_args(args: tuple[str, ...]) -> tuple[str | None, str | None]:
    if not args:
        return None, None
    if len(args) == 1:
        return None, args[0]
    if len(args) == 2:  # noqa: PLR2004 - FORMAT MANIFEST
        return args[0], args[1]
    raise UsageError(
        "give the manifest, optionally after its format: fixture-store import [FORMAT] MANIFEST",
        fix=f"FORMAT is one of {_FORMATS}",
    )


def _distribution(
    requirement: str, dist: str | None, dist_digest: str | None, manifest: str
) -> PackageSource:
    if dist is None or dist_digest is None:
        raise UsageError(
            "--package needs --dist FILE and --dist-digest sha256:HEX (the pinned distribution)",
            fix="pip download --no-deps NAME==VERSION, then sha256sum the file it saved",
        )
    source = PackageSource(requirement, dist, dist_digest, manifest)
    source.check(Where("--package", None))
    return source


def _note(label: str, paths: list[str], hint: str) -> None:
    if not paths:
        return
    err.print(f"{label}: {len(paths)} ({register_mod.named(paths)}); {hint}", markup=False)


@click.command()
@click.argument("args", nargs=-1, metavar="[FORMAT] MANIFEST")
@click.option("--family", required=True, help="Family the records join: FAMILY/<listed path>.")
@click.option(
    "--root",
    metavar="DIR",
    help="Folder the listed paths are relative to (default: the manifest's folder).",
)
@click.option(
    "--kind",
    default=Kind.FIXTURE.value,
    show_default=True,
    type=click.Choice([k for k in KINDS if k not in TREE_KINDS]),
    help="Kind of every imported record.",
)
@click.option("--gaps", is_flag=True, help="Declare listed but absent files as gaps.")
@click.option("--replace", is_flag=True, help="Rewrite records whose bytes changed.")
@click.option(
    "--strict",
    is_flag=True,
    help="Fail (exit 1, nothing registered) if an entry is refused, a listed file is absent "
    "(unless --gaps) or an orphan sits beside listed files.",
)
@click.option("--dry-run", is_flag=True, help="Check and report; store and register nothing.")
@click.option(
    "--package",
    "requirement",
    metavar="NAME==VERSION",
    help="Read MANIFEST and the files inside this pinned distribution (package sources); "
    "without MANIFEST, the installed distribution's RECORD.",
)
@click.option(
    "--revision",
    metavar="REF",
    help="Hugging Face cache: the commit or ref to import (default: main).",
)
@click.option(
    "--include",
    metavar="GLOB",
    multiple=True,
    help="Import only the listed files whose path matches (repeatable; '*' matches across '/').",
)
@click.option(
    "--exclude",
    metavar="GLOB",
    multiple=True,
    help="Leave out the listed files whose path matches (repeatable; after --include).",
)
@click.option(
    "--upstream-host",
    type=click.Choice(["hf", "github"]),
    help="Where bare OWNER/NAME upstreams live: hf (the Hugging Face Hub) or github "
    "(default: upstream-host in [tool.fixture-store]; without either, they are refused, every "
    "one named).",
)
@click.option(
    "--json-pointer",
    metavar="POINTER",
    help="JSON manifest: where its map of name -> entry is (RFC 6901, e.g. /datasets); "
    "default: found by itself.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="pooch registry: the base_url its files are downloaded from (each name's URL is "
    "BASE_URL + name, as pooch joins them, unless the registry gives one).",
)
@click.option("--dist", metavar="FILE", help="The distribution's file name (with --package).")
@click.option("--dist-digest", metavar="sha256:HEX", help="Its SHA-256 (with --package).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and outcome as JSON.")
@click.pass_obj
@handle_errors
def import_cmd(
    obj: Context,
    args: tuple[str, ...],
    family: str,
    root: str | None,
    kind: str,
    gaps: bool,
    replace: bool,
    strict: bool,
    dry_run: bool,
    requirement: str | None,
    revision: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    upstream_host: str | None,
    json_pointer: str | None,
    base_url: str | None,
    dist: str | None,
    dist_digest: str | None,
    as_json: bool,
) -> None:
    """Register the files a manifest lists.

    Register the files a manifest lists, after checking their bytes against it.

    FORMAT is one of pooch, sha256sum (md5sum, sha1sum and sha512sum outputs too), dvc, json,
    record (a wheel's RECORD), tfds (a TFDS checksums.tsv), hf-cache, git-lfs (default:
    detected from MANIFEST). MANIFEST may be a folder: a Hugging Face cache
    (models--ORG--NAME or its snapshots/COMMIT; Hub sources at that commit) or a Git LFS
    repository (its pointers; bytes from .git/lfs/objects). --package NAME==VERSION alone
    imports the installed distribution's RECORD (package sources). Every
    listed file is hashed and must match the manifest's digests (DVC: its md5, then SHA-256 is
    recorded). An entry that cannot be registered (a path that is no name, a file that does not
    match, a record the registry would refuse) is refused by itself with its reason, the rest
    is registered, and the exit status is 1. Listed files that are absent and unlisted files
    beside listed ones (orphans) are reported; with --strict any of these, or a refused entry,
    fails the import and nothing is stored or registered (absent files declared by --gaps
    excepted). --include and --exclude select the entries of any import. A field the importer
    does not know is kept verbatim (metadata.unknown_fields) and listed; one it knows under
    another name is read as that field and listed. --dry-run builds and checks every record
    as the import does, and stores and registers nothing.
    """
    fmt, manifest = _split_args(args)
    registry = obj.registry()
    store = obj.store
    with tempfile.TemporaryDirectory(prefix="import-") as scratch:
        held_options = held.Options(
            registry.root,
            Path(scratch),
            revision,
            include,
            exclude,
            dist=dist,
            dist_digest=dist_digest,
            root=root,
        )
        found = folders.plan_for(fmt, manifest, requirement, held_options)
        if found is not None:
            plan, origin = found
        else:
            assert manifest is not None  # plan_for refuses no manifest without --package
            origin = _manifest_origin(obj, manifest, root, requirement, dist, dist_digest, scratch)
            host = upstream_host or project_mod.upstream_host(registry.root)
            read_options = importers.ReadOptions(json_pointer, host, base_url)
            plan = importers.plan_import(
                origin, manifest, fmt, held.selection(held_options), read_options
            )
        plan = register_mod.registered_elsewhere(plan, origin, registry)
        # --dry-run or not, every record is built and checked by the same code; only the
        # commit (storing and registering) is left out.
        prepared = register_mod.prepare(
            registry, plan, origin, family=family, kind=Kind(kind), gaps=gaps
        )
        if strict:
            _refuse(prepared, gaps=gaps, as_json=as_json)
        imported = None
        if not dry_run:
            imported = register_mod.commit(store, registry, prepared, replace=replace)
    _report(prepared, imported, as_json=as_json)
    if prepared.refused:  # each entry was named with its reason; the rest was registered
        sys.exit(EXIT_FAILED)


def _manifest_origin(
    obj: Context,
    manifest: str,
    root: str | None,
    requirement: str | None,
    dist: str | None,
    dist_digest: str | None,
    scratch: str,
) -> plan_mod.Origin:
    """Where a manifest file's entries are: a pinned distribution, or a project folder (the
    manifest's, or for a RECORD the one holding its .dist-info)."""
    registry = obj.registry()
    base = root if root is not None else wheelrecord.default_root(manifest)
    if base is None:
        base = str(Path(manifest).parent)
    if requirement is not None:
        source = _distribution(requirement, dist, dist_digest, manifest)
        return plan_mod.package_origin(
            obj.store, registry.root, source, base.removeprefix("./"), Path(scratch)
        )
    return plan_mod.LocalOrigin(registry.root, Path(base))


def _refuse(prepared: register_mod.Prepared, *, gaps: bool, as_json: bool) -> None:
    """``--strict``, --dry-run or not: refuse the import if it has mismatches, refused entries
    or leaves files unaccounted for; with --json, the plan is printed first, for machines."""
    plan = prepared.plan
    try:
        register_mod.refuse_mismatches(plan)
        register_mod.refuse_unaccounted(plan, gaps=gaps)
        register_mod.refuse_entries(prepared)
    except FixtureStoreError:
        if as_json:
            print_json({**plan.to_json(), **prepared.to_json(), "imported": None})
        raise


def _report(
    prepared: register_mod.Prepared,
    imported: register_mod.Imported | None,
    *,
    as_json: bool,
) -> None:
    plan = prepared.plan
    if as_json:
        print_json(
            {
                **plan.to_json(),
                **prepared.to_json(),
                "imported": imported.to_json() if imported else None,
            }
        )
    else:
        out.print(register_mod.outcome(prepared, imported), markup=False)
    if not as_json:
        for line in report.lines(plan.entries()):
            out.print(line, markup=False)
        refused = {r.path for r in prepared.refused}
        absent = [e.path for e in plan.absent if e.path not in refused]
        _note("absent", absent, register_mod.absent_fate(prepared, imported))
        _note("orphans", list(plan.orphans), "present but not in the manifest; not registered")
        for u in plan.unverified:
            err.print(
                f"not verified: {u.path} ({u.where}): {u.reason}; not registered", markup=False
            )
        for r in prepared.refused:
            err.print(f"refused: {r}; not registered", markup=False)
        if prepared.refused:
            err.print(
                f"{len(prepared.refused)} entr{'y' if len(prepared.refused) == 1 else 'ies'} "
                "refused, the rest registered (exit 1)\n"
                "fix: leave them out with --exclude GLOB, or fix the manifest",
                markup=False,
            )
