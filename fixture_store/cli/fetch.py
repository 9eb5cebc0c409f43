"""``fixture-store fetch``: bring artifacts from their pinned sources into the store, verified."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Sequence

import click
from rich.table import Table

from fixture_store.cli._common import (
    Context,
    Failure,
    OutputPath,
    check_selection,
    counts_text,
    err,
    exit_code,
    family_lines,
    handle_errors,
    out,
    print_json,
    progress,
    report_failures,
    selection_options,
    styled,
    verbose_option,
    write_json,
)
from fixture_store.errors import UsageError
from fixture_store.fetch import FetchReport, FetchResult, Outcome, fetch_names
from fixture_store.objects.outputs import Target
from fixture_store.registry import Registry
from fixture_store.remotes import Remote, configured_mirrors
from fixture_store.sources import offline_from_env

# What a fetch may end in and still have everything asked for in the store, verified.
FETCHED = (Outcome.PRESENT, Outcome.FETCHED, Outcome.GAP)


@click.command()
@selection_options
@click.option(
    "--offline",
    is_flag=True,
    help="Never use the network; fail on anything not already in the store "
    "(also on with HF_HUB_OFFLINE=1).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=None,
    help="Parallel fetches (default: twice the CPUs, at most 8).",
)
@click.option(
    "--remote",
    "remote",
    metavar="NAME|URL",
    help="Try only this remote before the pinned sources (default: every configured remote, "
    "the default first).",
)
@click.option("--no-remote", is_flag=True, help="Fetch from the pinned sources only.")
@click.option(
    "--regenerate",
    "regenerate_missing",
    is_flag=True,
    help="Bring back generator-made artifacts the store lacks by running their stages again "
    "(as `regenerate STAGE --fetch`: only bit-identical outputs are put).",
)
@click.option(
    "--tensor",
    "tensor",
    metavar="KEY",
    help="Read and verify only this tensor of one safetensors, NPY or NPZ artifact: from the "
    "store if its object is there, else only the tensor's byte range, from the remotes then its "
    "source as a fetch tries them (checked against the tensor's digests in the record; nothing "
    "stored).",
)
@click.option(
    "--rows",
    metavar="START:STOP",
    help="With --tensor: only rows [START, STOP) of its first axis (of a large NPY, only the "
    "chunks that cover them are read and verified).",
)
@click.option(
    "--output",
    type=OutputPath(what="tensor file"),
    help="With --tensor: write the verified tensor to this .npy file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@verbose_option
@click.option(
    "--report",
    "report_path",
    type=OutputPath(what="fetch report"),
    help="Also write a summary (verified artifacts per family, the pinned sources) "
    "to this file; it is the same on every machine, so DVC can track it.",
)
@click.pass_obj
@handle_errors
def fetch(
    obj: Context,
    names: tuple[str, ...],
    all_: bool,
    families: tuple[str, ...],
    offline: bool,
    jobs: int | None,
    remote: str | None,
    no_remote: bool,
    regenerate_missing: bool,
    tensor: str | None,
    rows: str | None,
    output: Target | None,
    as_json: bool,
    verbose: bool,
    report_path: Target | None,
) -> None:
    """Bring artifacts from their pinned sources.

    Fetch NAMES (glob patterns allowed), a --family, or --all from their pinned sources.

    Artifacts that already verify are not downloaded again; a missing or damaged object is
    fetched and replaced. Every byte is checked against its record before it enters the store.

    A declared gap is lifted when its bytes arrive, in one registry transaction after the
    downloads. One that kept its digest and size is fetched as any record and keeps its digest;
    only the gap goes, once its bytes verify in the store. One known by its digest alone (a
    sha256 without its size, or a weak md5 or sha1 from a manifest) with a url source is filled:
    the download is checked against that digest, and the SHA-256 and size of its bytes are
    recorded as the record's digest. A gap with no source stays one.

    Configured remotes are tried first, as mirrors (the default remote, then the others in the
    order they are declared; see `fixture-store remote list`); an artifact no remote has comes
    from its pinned source. --remote tries only that one, --no-remote none, --offline none.

    Downloads are bounded in time: each artifact must arrive within
    $FIXTURE_STORE_DOWNLOAD_DEADLINE seconds, all attempts included (default: 120 plus its size
    at the minimum rate; 900 for the package tool), and its body at no less than
    $FIXTURE_STORE_DOWNLOAD_MIN_RATE bytes per second averaged over 10 seconds (default: 16384).

    Exit 0 if everything asked for is present and verified, 1 if any fetch failed, 2 on usage
    or registry errors (an unknown name, an invalid record, a source whose extra is not
    installed: 'needs-extra').
    """
    check_selection("fetch", names, families, all_)
    if remote is not None and no_remote:
        raise UsageError("--remote cannot be combined with --no-remote")
    registry = obj.registry()
    chosen = registry.select(names, families)
    offline = offline or offline_from_env()
    if tensor is not None or output is not None or rows is not None:
        _tensor_only(regenerate_missing, report_path, tensor)
    mirrors = () if no_remote or offline else configured_mirrors(registry.root, remote)
    if tensor is not None:
        from fixture_store.cli.fetch_tensor import fetch_tensor, parse_rows

        span = parse_rows(rows) if rows is not None else None
        where = (mirrors, offline)
        fetch_tensor(obj, registry, list(chosen), tensor, output, where, as_json=as_json, rows=span)
        return
    started = time.perf_counter()
    with progress(len(chosen), "fetching", enabled=not as_json) as advance:
        report = fetch_names(
            obj.store,
            registry,
            chosen,
            offline=offline,
            jobs=jobs,
            on_result=advance,
            remotes=mirrors,
        )
    if regenerate_missing:
        report = _restored(obj, registry, report, offline=offline, remotes=mirrors)
    elapsed = time.perf_counter() - started
    if report_path is not None:
        write_json(report_path, report.summary(registry), sort_keys=True)
    results = report.results
    counts = Counter(str(r.outcome) for r in results)
    if as_json:
        print_json(
            {
                "store": str(obj.store.root),
                "offline": offline,
                "downloaded_bytes": report.downloaded_bytes,
                "downloads": report.downloads,
                "refused_downloads": report.refused,
                "refused_bytes": report.refused_bytes,
                "lifted": [r.name for r in report.lifted],
                "recorded": [r.name for r in report.recorded],
                "seconds": round(elapsed, 3),
                "counts": dict(sorted(counts.items())),
                "results": [r.to_json() for r in results],
            }
        )
    else:
        _print_table(results, verbose=verbose)
        for line in family_lines(((r.name, r.outcome) for r in results), Outcome):
            out.print(line, markup=False)
        summary = counts_text((o, counts[str(o)]) for o in Outcome)
        out.print(
            f"{len(results)} artifacts: {summary or 'none'}; downloaded "
            f"{report.downloaded_bytes:,} bytes in {report.downloads} downloads; "
            + (
                f"refused {report.refused} downloads ({report.refused_bytes:,} bytes that did "
                "not match their records; nothing stored); "
                if report.refused
                else ""
            )
            + f"{elapsed:.1f}s"
        )
        for line in _lifted_lines(report):
            out.print(line, markup=False)
    for r in results:
        if r.ok and r.message:  # fetched from its pinned source after a remote failed
            err.print(f"warning: {r.name}: {r.message}", markup=False)
    report_failures(Failure(r.outcome, r.name, r.message, r.fix) for r in results if not r.ok)
    sys.exit(exit_code((r.outcome for r in results), ok=FETCHED))


def _lifted_lines(report: FetchReport) -> list[str]:
    """A line for each gap the fetch lifted: for one known by its digest alone, the SHA-256 and
    size now in its record and the digest its bytes were checked against; for one that kept
    its digest and size, that digest."""
    lines = []
    for r in report.lifted:
        fill = r.fill
        assert fill is not None  # FetchReport.lifted said so
        digest = f"{fill.digest.text} ({fill.digest.size:,} bytes)"
        lines.append(
            f"recorded {r.name}: {digest}, its bytes checked against {fill.proved}; the gap is "
            "lifted"
            if fill.proved is not None
            else f"lifted the gap of {r.name}: its bytes are in the store with the digest it "
            f"kept, {digest}"
        )
    return lines


def _tensor_only(regenerate_missing: bool, report_path: Target | None, tensor: str | None) -> None:
    if tensor is None:
        raise UsageError("--output and --rows read a tensor: give --tensor KEY too")
    if regenerate_missing or report_path is not None:
        raise UsageError(
            "--tensor reads one tensor from the store, a remote or its source's range; it takes "
            "no --regenerate or --report",
            fix="fixture-store fetch NAME --tensor KEY [--output FILE.npy]",
        )


def _restored(
    obj: Context,
    registry: Registry,
    report: FetchReport,
    *,
    offline: bool,
    remotes: Sequence[Remote],
) -> FetchReport:
    """``report`` after running the stages of the generator-made artifacts it could not fetch."""
    # params.yaml, pyyaml and the runner only when asked
    from fixture_store.regenerate import restore
    from fixture_store.regenerate.restore import producer

    wanted = {
        r.name: stage
        for r in report.results
        if r.outcome is Outcome.FAILED and (stage := producer(registry, r.name)) is not None
    }
    if not wanted:
        return report
    done = restore(
        registry.root,
        obj.store,
        wanted,
        offline=offline,
        remotes=lambda: remotes,
        log=lambda m: err.print(m, markup=False),
    )
    back = set(done.restored)

    def after(r: FetchResult) -> FetchResult:
        if r.name in back:
            return FetchResult(r.name, Outcome.FETCHED, r.source, size=r.size)
        if r.name not in wanted:
            return r
        stage = wanted[r.name]
        return FetchResult(
            r.name,
            Outcome.FAILED,
            r.source,
            f"its stage {stage!r} ran again but did not make these bytes here",
            f"fixture-store regenerate {stage}  (shows what differs)",
            r.size,
        )

    return dataclasses.replace(report, results=[after(r) for r in report.results])


def _print_table(results: list[FetchResult], *, verbose: bool) -> None:
    """A row for each artifact that did not come out fine (every artifact with ``verbose``);
    nothing when there is none to show."""
    shown = results if verbose else [r for r in results if not r.ok]
    if not shown:
        return
    table = Table(title="fetch")
    for col in ("artifact", "outcome", "source", "detail"):
        table.add_column(col, overflow="fold")
    for r in shown:
        table.add_row(
            r.name,
            styled(r.outcome),
            r.source,
            r.message if not r.ok else f"{r.size:,} B",
        )
    out.print(table)
