"""The ``fixture-store`` command: a thin layer over the library.

Exit codes: 0 everything asked for is verified, 1 something failed verification, 2 a usage or
registry error. Tables go to stdout for people, ``--json`` for machines, errors to stderr.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fixture_store import gc as gc_mod
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, FixtureStoreError, UsageError
from fixture_store.objects.digests import Algorithm
from fixture_store.objects.store import ENV_VAR, Store
from fixture_store.registry import HubSource, Registry, Source, UrlSource
from fixture_store.verify import Result, Status, verify_names

F = TypeVar("F", bound=Callable[..., Any])

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Context:
    store_flag: str | None
    registry_flag: str | None

    @property
    def store(self) -> Store:
        return Store.at(self.store_flag)

    def registry(self) -> Registry:
        return registry_mod.load(self.registry_flag)


def handle_errors(fn: F) -> F:
    """Turn library errors into a message on stderr and an exit code: never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FixtureStoreError as e:
            err.print(f"[bold red]error:[/] {escape(e.message)}", markup=True)
            if e.fix:
                err.print(f"  fix: {e.fix}", markup=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            err.print("interrupted; nothing partial was left in the store")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def progress(total: int, label: str, *, enabled: bool) -> Progress:
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled or total < 2,
    )


# Commands in modules of their own, loaded when invoked (or listed by --help): they pull in
# numpy, onnx, yaml and huggingface_hub, which a plain 'verify' should not pay for at start-up.
# A module either registers its commands on ``main`` when imported (attribute None) or exports
# the command object named here.
_LAZY_COMMANDS: dict[str, tuple[str, str | None]] = {
    "fetch": ("fixture_store.cli.fetch", "fetch"),
    "compare": ("fixture_store.cli.compare", "compare_cmd"),
    "regenerate": ("fixture_store.cli.regenerate", None),
    "regenerate-summary": ("fixture_store.cli.regenerate", None),
    "provenance": ("fixture_store.cli.regenerate", None),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY_COMMANDS and cmd_name not in self.commands:
            module_name, attr = _LAZY_COMMANDS[cmd_name]
            module = importlib.import_module(module_name)
            if attr is not None:
                self.add_command(getattr(module, attr), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_flag",
    metavar="DIR",
    envvar=None,
    help=f"Object store location (default: ${ENV_VAR}, else a per-user cache dir).",
)
@click.option(
    "--registry",
    "registry_flag",
    metavar="DIR",
    help="Project folder holding provenance/ (default: nearest parent with one, "
    "or $FIXTURE_STORE_REGISTRY).",
)
@click.version_option(package_name="fixture-store")
@click.pass_context
def main(ctx: click.Context, store_flag: str | None, registry_flag: str | None) -> None:
    """Content-addressed fixture store and provenance registry for ML parity tests.

    Every artifact is a record in provenance/ (digest, size, pinned source, lineage, tolerance);
    bytes live in a content-addressed store and are handed out only after verification.
    """
    ctx.obj = Context(store_flag, registry_flag)


# -- init ---------------------------------------------------------------------------------------
@main.command()
@click.argument("project", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
@handle_errors
def init(obj: Context, project: Path) -> None:
    """Create provenance/ in PROJECT (default: here) and the object store."""
    directory = project / registry_mod.files.DIRNAME
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    store = obj.store.ensure()
    out.print(f"registry: {directory} ({'created' if created else 'already there'})")
    out.print(f"store:    {store.root}")


# -- add ----------------------------------------------------------------------------------------
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


@main.command()
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
        assert record.digest is not None
        out.print(f"added {record.name}: {record.digest}")


# -- verify -------------------------------------------------------------------------------------
def _names(registry: Registry, names: Iterable[str], families: Iterable[str]) -> list[str]:
    return registry.select(names, families)


STATUS_STYLE = {
    Status.VERIFIED: "green",
    Status.MISSING: "yellow",
    Status.GAP: "cyan",
    Status.MISMATCH: "bold red",
    Status.INVALID_RECORD: "bold red",
    Status.UNSAFE: "bold red",
    Status.UNKNOWN: "bold red",
}


def exit_code_for(results: Iterable[Result]) -> int:
    statuses = {r.status for r in results}
    if statuses & {Status.INVALID_RECORD, Status.UNKNOWN}:
        return EXIT_USAGE
    if statuses - {Status.VERIFIED, Status.GAP}:
        return EXIT_FAILED
    return EXIT_OK


ROWS_SHOWN = 50


def print_results(results: list[Result], *, title: str, limit: int = ROWS_SHOWN) -> None:
    """A table of the first ``limit`` failures, then successes, plus a count line: a person reads
    the first rows and the counts; ``--json`` has every result."""
    counts = Counter(r.status for r in results)
    table = Table(title=title, show_lines=False)
    table.add_column("artifact", overflow="fold")
    table.add_column("kind")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    all_failures = [r for r in results if not r.ok]
    failures = all_failures[:limit]
    shown_ok = [r for r in results if r.ok][: max(0, limit - len(failures))]
    for r in [*failures, *shown_ok]:
        detail = (
            r.message
            if not r.ok
            else (
                f"{r.expected.short}… {r.expected.size:,} B" + (" (cached)" if r.cached else "")
                if r.expected
                else ""
            )
        )
        if r.fix and not r.ok:
            detail += f"\nfix: {r.fix}"
        style = STATUS_STYLE.get(r.status, "")
        table.add_row(escape(r.name), r.kind or "", f"[{style}]{r.status}[/]", escape(detail))
    hidden = len(results) - len(failures) - len(shown_ok)
    if hidden > 0:
        more_failed = len(all_failures) - len(failures)
        table.caption = (
            f"… and {hidden:,} more"
            + (f", {more_failed:,} of them not verified" if more_failed else "")
            + " (use --json for all)"
        )
    out.print(table)
    summary = ", ".join(f"{counts[s]} {s}" for s in Status if counts[s])
    out.print(f"{len(results)} artifacts: {summary or 'none'}")


@main.command()
@click.argument("names", nargs=-1)
@click.option("--family", "families", multiple=True, help="Verify every artifact of FAMILY.")
@click.option("--full", is_flag=True, help="Re-hash everything; ignore the verified-state cache.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Parallel hashing workers (default: number of CPUs).",
)
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
    algorithm: str,
) -> None:
    """Verify artifacts (default: all) against their records.

    Exit 0 if all verified (declared gaps allowed), 1 if any is missing or mismatched, 2 on
    registry or usage errors. 'verify --full --digest sha256' re-hashes every byte with the
    identity hash.
    """
    registry = obj.registry()
    chosen = _names(registry, names, families)
    with progress(len(chosen), "verifying", enabled=not as_json) as bar:
        task = bar.add_task("verify", total=len(chosen))
        results = verify_names(
            obj.store,
            registry,
            chosen,
            full=full,
            workers=workers,
            algorithm=Algorithm(algorithm),
            on_result=lambda _r: bar.advance(task),
        )
    if as_json:
        counts = Counter(str(r.status) for r in results)
        click.echo(
            json.dumps(
                {
                    "store": str(obj.store.root),
                    "full": full,
                    "digest": algorithm,
                    "hashed_bytes": sum(r.hashed_bytes for r in results),
                    "counts": dict(sorted(counts.items())),
                    "results": [r.to_json() for r in results],
                },
                indent=2,
            )
        )
    else:
        print_results(results, title=f"verify ({'full' if full else 'cached'})")
    report_failures(results)
    sys.exit(exit_code_for(results))


def report_failures(results: Iterable[Result], limit: int = 20) -> None:
    """One stderr line per failure, the first ``limit`` of them, and how many more."""
    failed = [r for r in results if not r.ok and r.status is not Status.GAP]
    for r in failed[:limit]:
        err.print(f"{r.status}: {r.name}: {r.message}", markup=False)
    if len(failed) > limit:
        err.print(f"… and {len(failed) - limit:,} more failures (use --json for all)")


# -- rehash -------------------------------------------------------------------------------------
@main.command()
@click.argument("names", nargs=-1)
@click.option("--family", "families", multiple=True, help="Every artifact of FAMILY.")
@click.option(
    "--replace",
    is_flag=True,
    help="Also rewrite a BLAKE3 already in a record (after SHA-256 matched).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Parallel hashing workers (default: number of CPUs).",
)
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
    from fixture_store.rehash import record_blake3

    registry = obj.registry()
    chosen = _names(registry, names, families)
    with progress(len(chosen), "hashing", enabled=not as_json) as bar:
        task = bar.add_task("rehash", total=len(chosen))
        report = record_blake3(
            obj.store,
            registry,
            chosen,
            replace=replace,
            workers=workers,
            on_result=lambda _r: bar.advance(task),
        )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "updated": list(report.updated),
                    "unchanged": list(report.unchanged),
                    "failed": [r.to_json() for r in report.failed],
                },
                indent=2,
            )
        )
    else:
        out.print(
            f"recorded BLAKE3 for {len(report.updated)} artifacts; "
            f"{len(report.unchanged)} already had it; {len(report.failed)} failed"
        )
    for r in report.failed:
        err.print(f"{r.status}: {r.name}: {r.message}", markup=False)
    sys.exit(exit_code_for(report.failed) if report.failed else EXIT_OK)


# -- list / show / status -----------------------------------------------------------------------
@main.command(name="list")
@click.option("--family", "families", multiple=True, help="Only artifacts of FAMILY.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def list_(obj: Context, families: tuple[str, ...], as_json: bool) -> None:
    """List registered artifacts."""
    registry = obj.registry()
    names = _names(registry, (), families)
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
                    "invalid": invalid[name].message,
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
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} artifacts")
    for col in ("artifact", "kind", "size", "digest", "source"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(
            row["name"],
            row["kind"] or "[red]invalid[/]",
            f"{row['size']:,}" if row["size"] is not None else "",
            (row["digest"] or "")[7:19],
            row["source"] or row.get("invalid", ""),
        )
    out.print(table)


@main.command()
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
    """Show the record of NAME and whether its bytes verify."""
    registry = obj.registry()
    record = registry.get(name)
    result = verify_names(obj.store, registry, [name], workers=1)[0]
    doc = {"name": name, **record.to_json(), "status": str(result.status)}
    if lineage:
        from fixture_store.cli.regenerate import print_lineage

        print_lineage(registry, name, as_json=as_json)
        return
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    out.print(f"[bold]{name}[/]  ({record.kind})")
    if record.digest:
        out.print(f"  digest:  {record.digest.text}")
        out.print(f"  size:    {record.digest.size:,} bytes")
    out.print(f"  source:  {record.source.describe()}", markup=False)
    if record.members is not None:
        out.print(f"  members: {len(record.members)} files, {record.members.total_size:,} bytes")
    if record.lineage:
        out.print(f"  lineage: {', '.join(record.lineage)}")
    if record.tolerance:
        out.print(f"  tolerance: {record.tolerance.to_json()}", markup=False)
    if record.gap:
        out.print(f"  gap:     {record.gap}", markup=False)
    style = STATUS_STYLE.get(result.status, "")
    out.print(f"  status:  [{style}]{result.status}[/] {escape(result.message)}")
    if not result.ok and result.status is not Status.GAP:
        sys.exit(exit_code_for([result]))


@main.command()
@click.argument("name")
@click.pass_obj
@handle_errors
def path(obj: Context, name: str) -> None:
    """Print the path of NAME's verified bytes (a tree artifact gives a folder).

    Exits non-zero, printing nothing on stdout, if the artifact does not verify.
    """
    from fixture_store.access import Fixtures

    fixtures = Fixtures(obj.store, obj.registry())
    record = fixtures.registry.get(name)
    click.echo(str(fixtures.tree(name) if record.is_tree else fixtures.path(name)))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def status(obj: Context, as_json: bool) -> None:
    """Summarise the registry and the store (presence only; 'verify' hashes)."""
    registry = obj.registry()
    store = obj.store
    per_family: dict[str, Counter[str]] = {}
    for fam_name, fam in registry.families.items():
        c: Counter[str] = Counter()
        for r in fam.records.values():
            if r.gap and r.digest is None:
                c["gap"] += 1
                continue
            digests_ = [d for _, d in r.members] if r.members is not None and r.is_tree else []
            digests_.append(r.digest) if r.digest else None
            c["present" if all(store.has(d) for d in digests_) else "missing"] += 1
        c["invalid"] += len(fam.invalid)
        per_family[fam_name] = c
    objects = sum(1 for _ in store.iter_objects())
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": str(store.root),
                    "registry": str(registry.directory),
                    "objects": objects,
                    "families": {k: dict(v) for k, v in per_family.items()},
                },
                indent=2,
            )
        )
        return
    out.print(f"registry: {registry.directory}")
    out.print(f"store:    {store.root} ({objects:,} objects)")
    table = Table()
    for col in ("family", "present", "missing", "gap", "invalid"):
        table.add_column(col, justify="right" if col != "family" else "left")
    for fam_name, c in per_family.items():
        table.add_row(fam_name, *(str(c[k]) for k in ("present", "missing", "gap", "invalid")))
    out.print(table)


# -- gc -----------------------------------------------------------------------------------------
@main.command()
@click.option("--yes", is_flag=True, help="Delete the unreferenced objects (default: dry run).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
@handle_errors
def gc(obj: Context, yes: bool, as_json: bool) -> None:
    """Remove objects no record of this registry references. Dry run unless --yes.

    The store may be shared by several checkouts: only objects unreferenced by this registry are
    considered, so run gc from the checkout whose registry is the superset.
    """
    registry = obj.registry()
    invalid = dict(registry.invalid())
    if invalid and yes:
        raise UsageError(
            f"{len(invalid)} record(s) are invalid, so their objects cannot be told apart from "
            "garbage; refusing to delete",
            fix="fixture-store verify, fix the records, rerun gc",
        )
    garbage = gc_mod.find_garbage(obj.store, [registry])
    removed = gc_mod.collect(obj.store, garbage) if yes else 0
    removed_tmp = obj.store.clean_tmp() if yes else 0
    total = sum(g.size for g in garbage)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "dry_run": not yes,
                    "unreferenced": len(garbage),
                    "bytes": total,
                    "removed": removed,
                    "removed_tmp": removed_tmp,
                    "objects": [g.hex for g in garbage],
                },
                indent=2,
            )
        )
        return
    verb = "removed" if yes else "would remove"
    out.print(
        f"{verb} {len(garbage)} unreferenced objects ({total:,} bytes)"
        + ("" if yes else "; rerun with --yes to delete")
    )
