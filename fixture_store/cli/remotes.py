"""``fixture-store push``, ``pull`` and ``remote add/list/remove``: the store and its remotes."""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from fixture_store import display
from fixture_store.cli._common import (
    Context,
    Failure,
    check_selection,
    counts_text,
    err,
    exit_code,
    handle_errors,
    out,
    print_json,
    progress,
    report_failures,
    selection_options,
    styled,
)
from fixture_store.cli.remote_gc import remote_gc_cmd
from fixture_store.errors import UsageError
from fixture_store.remotes import config, open_remote, packs, sync
from fixture_store.remotes.sync import Outcome, SyncReport

if TYPE_CHECKING:
    from fixture_store.registry import Registry
    from fixture_store.remotes import Remote
    from fixture_store.remotes.hub_pin import PinReport

ROWS_SHOWN = 30


# The URLs each command takes for --remote: an https mirror only serves bytes.
_REMOTE_URLS = {
    "push": "s3://BUCKET/PREFIX, hf://datasets/ORG/NAME, file:///PATH or a path",
    "pull": "s3://BUCKET/PREFIX, https://HOST/PATH, hf://datasets/ORG/NAME, file:///PATH or a path",
}


def _selection(verb: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return functools.partial(_with_selection, verb=verb)


def _with_selection(command: Callable[..., None], *, verb: str) -> Callable[..., None]:
    for decorator in reversed(
        [
            selection_options,
            click.option(
                "--remote",
                metavar="NAME|URL",
                help=f"A configured remote or a URL ({_REMOTE_URLS[verb]}); default: the "
                "default remote.",
            ),
            click.option(
                "--jobs",
                type=click.IntRange(1, 64),
                default=sync.DEFAULT_JOBS,
                show_default=True,
                help="Parallel transfers.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print results as JSON."),
        ]
    ):
        command = decorator(command)
    return command


@click.command()
@_selection("push")
@click.option(
    "--pin",
    is_flag=True,
    help="Hub remotes: write the commit into the pushed records as their pinned Hub source.",
)
@click.option(
    "--create-repo",
    is_flag=True,
    help="Hub remotes: create the repo, private, if the Hub has none (an existing one is kept "
    "as it is).",
)
@click.pass_obj
@handle_errors
def push(
    obj: Context,
    names: tuple[str, ...],
    all_: bool,
    families: tuple[str, ...],
    remote: str | None,
    jobs: int,
    as_json: bool,
    pin: bool,
    create_repo: bool,
) -> None:
    """Upload objects to a remote.

    Upload the objects NAMES (glob patterns allowed), a --family or --all reference.

    Only objects that verify in the store are sent; objects the remote already holds are
    skipped. To a Hub remote, the objects go in commits of at most 100 files, whose 40-hex ids
    are printed; --pin writes that commit into the pushed records (one object each, from a
    local or hub source) as their pinned Hub source, a registry change to review and commit,
    and only if every object landed; --create-repo creates a missing Hub repo, private (without
    it a missing repo is an error). Exit 0 if everything asked for is on the remote, 1 if
    anything failed, 2 on usage or registry errors.
    """
    _run("push", obj, names, all_, families, remote, jobs, as_json, pin=pin, create=create_repo)


@click.command()
@_selection("pull")
@click.pass_obj
@handle_errors
def pull(
    obj: Context,
    names: tuple[str, ...],
    all_: bool,
    families: tuple[str, ...],
    remote: str | None,
    jobs: int,
    as_json: bool,
) -> None:
    """Bring objects from a remote into the store.

    Bring the objects NAMES, a --family or --all reference from a remote into the store.

    Every object is hashed as it is written and published only if it matches its record;
    objects that already verify are not downloaded. A Hub remote is read at one commit (its
    branch resolved once). Exit codes as for fetch.
    """
    _run("pull", obj, names, all_, families, remote, jobs, as_json)


def _run(
    verb: str,
    obj: Context,
    names: tuple[str, ...],
    all_: bool,
    families: tuple[str, ...],
    remote: str | None,
    jobs: int,
    as_json: bool,
    *,
    pin: bool = False,
    create: bool = False,
) -> None:
    check_selection(verb, names, families, all_)
    registry = obj.registry()
    spec = config.load(registry.root).resolve(remote)
    for flag, what in ((pin, "--pin writes a Hub commit into records"), (create, _CREATES)):
        if flag and spec.kind != "hub":
            raise UsageError(
                f"{what}; the remote {spec.name!r} is not a Hub repo",
                fix=f"push {what.split()[0]} --remote hf://datasets/ORG/NAME (or a configured Hub "
                "remote)",
            )
    target = open_remote(spec, jobs=jobs, note=lambda line: err.print(line, markup=False))
    if create:
        _ensure_repo(target)
    the_plan = sync.plan(registry, registry.select(names, families))
    with progress(len(the_plan.objects), f"{verb}ing", enabled=not as_json) as advance:
        if verb == "push":
            packing = packs.packing_of(spec)
            report = sync.push(
                obj.store, registry, target, the_plan, jobs=jobs, on_object=advance, packing=packing
            )
        else:
            report = sync.pull(obj.store, registry, target, the_plan, jobs=jobs, on_object=advance)
    pinned = _pin(registry, target, the_plan, report) if pin else None
    _print(verb, report, as_json=as_json, pinned=pinned)
    failures = (Failure(r.outcome, r.name, r.message, r.fix) for r in report.results if not r.ok)
    report_failures(failures, limit=20)
    sys.exit(exit_code((r.outcome for r in report.results), ok=sync.OK))


_CREATES = "--create-repo creates a Hub repo"


def _ensure_repo(target: Remote) -> None:
    from fixture_store.remotes.hub import HubRemote

    assert isinstance(target, HubRemote)  # --create-repo is refused for any other remote
    target.ensure_repo()


def _pin(
    registry: Registry, target: Remote, the_plan: sync.SyncPlan, report: SyncReport
) -> PinReport:
    from fixture_store.remotes.hub import HubRemote
    from fixture_store.remotes.hub_pin import pin

    assert isinstance(target, HubRemote)  # --pin is refused for any other remote
    return pin(registry, target, the_plan, report)


def _print(
    verb: str, report: SyncReport, *, as_json: bool, pinned: PinReport | None = None
) -> None:
    counts = Counter(str(r.outcome) for r in report.results)
    if as_json:
        extra = {} if pinned is None else {"pin": pinned.to_json()}
        print_json({**report.to_json(), "counts": dict(sorted(counts.items())), **extra})
        return
    table = Table(title=f"{verb} {report.remote}")
    for col in ("artifact", "outcome", "objects", "bytes"):
        table.add_column(col, overflow="fold")
    failed = [r for r in report.results if not r.ok]
    shown = [r for r in report.results if r.ok][:ROWS_SHOWN]
    for r in [*failed, *shown]:
        table.add_row(r.name, styled(r.outcome), str(r.objects), f"{r.size:,}")
    hidden = len(report.results) - len(failed) - len(shown)
    if hidden > 0:
        table.caption = f"… and {hidden:,} more (use --json for all)"
    out.print(table)
    summary = counts_text((str(o), counts[str(o)]) for o in Outcome)
    moved = "sent" if verb == "push" else "received"
    out.print(
        f"{len(report.results)} artifacts: {summary or 'none'}; {moved} "
        f"{report.moved_bytes:,} bytes in {report.moved_objects} objects",
        markup=False,
    )
    for commit in report.commits:
        out.print(f"committed {commit}", markup=False)
    if report.at is not None:
        checked = "checked at" if verb == "push" else "read at"
        out.print(f"{checked} commit {report.at}", markup=False)
    if pinned is not None:
        _print_pins(pinned)


def _print_pins(pinned: PinReport) -> None:
    out.print(
        f"pinned {len(pinned.pinned)} record(s) to commit {pinned.commit}"
        + (": review and commit provenance/" if pinned.pinned else ""),
        markup=False,
    )
    for name, why in pinned.kept[:ROWS_SHOWN]:
        out.print(f"  not pinned: {name}: {why}", markup=False)


# -- fixture-store remote -----------------------------------------------------------------------
@click.group()
def remote() -> None:
    """Configure the remotes push and pull use.

    The remotes push, pull and fetch use: in pyproject.toml ([tool.fixture-store.remotes])
    and, per user, in a file outside the repository."""


def _target(obj: Context, project: bool) -> Path:
    return obj.project() / config.PYPROJECT if project else config.user_config_file()


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--endpoint-url", help="The S3 endpoint of an S3-compatible server.")
@click.option("--profile", help="The AWS profile whose credentials to use.")
@click.option("--region", help="The S3 region.")
@click.option(
    "--pack-threshold",
    type=click.IntRange(min=0),
    metavar="BYTES",
    help="Folder and S3 remotes: push packs objects smaller than this (default 1 MiB; 0: no "
    "packs, each object under its own key).",
)
@click.option("--default", "default", is_flag=True, help="Make it the default remote.")
@click.option(
    "--project",
    is_flag=True,
    help="Declare it in the project's pyproject.toml (shared) instead of the user's file.",
)
@click.pass_obj
@handle_errors
def remote_add(
    obj: Context,
    name: str,
    url: str,
    endpoint_url: str | None,
    profile: str | None,
    region: str | None,
    pack_threshold: int | None,
    default: bool,
    project: bool,
) -> None:
    """Declare a remote.

    Declare the remote NAME at URL (s3://BUCKET/PREFIX, https://HOST/PREFIX,
    hf://datasets/ORG/NAME or hf://ORG/NAME for a Hub repo, optionally @BRANCH, or a folder)."""
    path = _target(obj, project)
    raw = {
        "url": url,
        "endpoint_url": endpoint_url,
        "profile": profile,
        "region": region,
        "pack_threshold": pack_threshold,
    }
    spec = config.RemoteSpec.from_json(
        name, {k: v for k, v in raw.items() if v is not None}, str(path)
    )
    config.add(path, spec, project=project, default=default)
    out.print(f"added remote {name} ({display.url(url)}) to {path}", markup=False)


@remote.command("remove")
@click.argument("name")
@click.option("--project", is_flag=True, help="Remove it from the project's pyproject.toml.")
@click.pass_obj
@handle_errors
def remote_remove(obj: Context, name: str, project: bool) -> None:
    """Remove a remote.

    Remove the remote NAME (from the user's file, or with --project the project's)."""
    path = _target(obj, project)
    config.remove(path, config.check_name(name), project=project)
    out.print(f"removed remote {name} from {path}", markup=False)


@remote.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the remotes as JSON.")
@click.pass_obj
@handle_errors
def remote_list(obj: Context, as_json: bool) -> None:
    """List the configured remotes.

    The configured remotes, the default first (the order fetch tries them in)."""
    try:
        project: Path | None = obj.project()
    except UsageError:
        project = None
    conf = config.load(project)
    mirrors = conf.mirrors()
    if as_json:
        print_json(
            {
                "default": conf.default,
                "remotes": [
                    {"name": s.name, "kind": s.kind, "origin": s.origin, **s.shown()}
                    for s in mirrors
                ],
            }
        )
        return
    table = Table(title="remotes")
    for col in ("name", "kind", "url", "endpoint", "packs", "declared in"):
        table.add_column(col, overflow="fold")
    for s in mirrors:
        mark = " (default)" if s.name == conf.default else ""
        shown = s.shown()
        row = (s.name + mark, s.kind, str(shown["url"]), str(shown.get("endpoint_url", "")))
        table.add_row(*row, _packs(s), s.origin)
    out.print(table)


def _packs(spec: config.RemoteSpec) -> str:
    """What push packs on the remote: objects under which size, or none."""
    if spec.kind not in ("folder", "s3"):
        return ""
    threshold = packs.packing_of(spec).threshold
    return f"under {threshold:,} B" if threshold else "none"


remote.add_command(remote_gc_cmd)
