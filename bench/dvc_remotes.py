"""Benchmark: push, pull and warm verify against DVC, boto3's transfer manager and the stat floor.

    uv run python -m bench.dvc_remotes [--large-mib 1024] [--repeat 3] [--only CASE ...]
                                       [--store DIR]

Every contender is a whole process (start to exit: wall time and peak RSS through the launcher
of ``bench.run``), measured round-robin with the others of its case after one discarded run
each; the table prints medians, spreads, peak RSS above a child that only imports fixture-store,
and each contender's median over fixture-store's (above 1: fixture-store is faster). The data:

- the **node corpus** is the real one, not a synthetic stand-in: the ``onnx-node`` family of
  ``provenance/`` (1,765 records, 7,794 member files of a few hundred bytes each), fetched once
  into a scratch store with ``fixture-store fetch --all`` (one download of the pinned onnx wheel
  from the package index; ``--store DIR`` uses a store that already holds it instead). DVC and
  boto3 get the same bytes: the member files are copied out of that store into their folders;
- the **large object** is ``--large-mib`` MiB of random bytes (default 1024), one ``checkpoint``
  record.

Cases (``--only``):

- ``s3``: ``fixture-store push`` / ``pull`` of the node corpus and of the large object against
  ``dvc push`` / ``dvc pull`` (dvc-s3) and boto3's ``upload_file`` / ``download_file``
  (``bench.remotes``: 8 threads for the corpus, the transfer manager's defaults for the large
  object), all to the same moto server on loopback. Every push goes to an empty prefix (emptied
  first); every pull goes into an empty store, an empty DVC cache with the workspace files
  removed, or an empty folder. DVC runs in a throwaway project (``dvc init --no-scm``) whose
  remote has ``endpointurl`` set to the server and takes the credentials from the environment;
  its ``dvc add`` runs once, untimed. After every run the bench checks, untimed, that the work
  was done (as many objects on the remote as the first push into a fresh prefix left, every
  file back), so a contender that skips work fails the bench instead of winning it.
- ``folder``: ``fixture-store pull`` of the node corpus from a shared-folder remote against
  ``dvc pull`` from a local DVC remote (both filled once, untimed).
- ``verify``: a warm ``python -m fixture_store.cli verify`` of the embedded corpus in this
  repository (every family ``fetch --all`` filled; the generator-made ones are left out unless
  the store already holds them) against ``dvc status`` of copies of the same object files
  tracked by a throwaway DVC project (warm: its first run is untimed), and against the floor:
  ``python -c`` doing one ``os.stat`` per object file.
- ``packs``: ``fixture-store push`` / ``pull`` in packs (the default: objects under 1 MiB go
  into pack files with an index, see ``docs/remotes.md``) against ``dvc push`` / ``dvc pull``
  (dvc-s3), on the node corpus and on ``--small-count`` files of ``--small-kib`` KiB (one tree
  record, default 10,000 x 4 KiB), timed straight to the server. Then one untimed run of each,
  and of fixture-store one object per key (``pack_threshold = 0``, as before packs), through a
  proxy in front of the server that counts every request: a second table prints the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import remotes
from bench.harness import REPO, Bench, Row, Sample, _rmtree, dvc_repo, project, write_random

CASES = ("s3", "folder", "verify", "packs")
NODE = "onnx-node"
JOBS = "8"
DVC = (sys.executable, "-m", "dvc")
RSS_TARGET_MIB = 64
S3_BASELINE = "import boto3, fixture_store.cli.app\nboto3.client('s3')\n"
# One os.stat per listed file and nothing else: the least a warm per-file check can cost.
FLOOR = "import os, sys\nfor p in open(sys.argv[1]).read().splitlines():\n    os.stat(p)\n"


@dataclass(frozen=True)
class Versus:
    """One table section: fixture-store's row and the rows it is compared with, with targets
    (the least other median / fixture-store median aimed for)."""

    title: str
    ours: Row
    others: tuple[tuple[Row, float | None], ...]
    baseline_kib: float  # peak RSS of a child that only imports what the contenders share


@dataclass(frozen=True)
class Payload:
    """What one case moves: fixture-store's project and store, the same bytes as a file or
    folder for the others, and their size."""

    label: str
    store: Path
    project: Path
    data: Path
    nbytes: int


class Setup:
    """What the cases share: the bench, the filled store, the moto server and its bucket."""

    def __init__(self, b: Bench, store: Path, endpoint: str, client: Any) -> None:
        self.b, self.store, self.endpoint, self.client = b, store, endpoint, client
        self.bucket = "bench"
        client.create_bucket(Bucket=self.bucket)
        self.sections: list[Versus] = []
        self.requests: list[tuple[str, dict[str, int]]] = []  # case → contender → requests
        self.large_store = b.work / "large-store"
        self.s3_baseline_kib = statistics.median(
            b.spawn([sys.executable, "-c", S3_BASELINE])[1] for _ in range(3)
        )

    def fs(self, *args: str, store: Path | None = None, registry: Path | None = None) -> list[str]:
        head = ["--store", str(store or self.store)]
        return self.b.fs(*head, *(["--registry", str(registry)] if registry else []), *args)

    def run(self, cmd: Sequence[str], cwd: Path | None = None) -> Sample:
        return self.b.external(cmd, cwd=cwd)

    def untimed(self, cmd: Sequence[str], cwd: Path | None = None) -> str:
        return self.b.spawn(cmd, cwd=cwd)[2]

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{prefix}/"
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def empty(self, prefix: str) -> None:
        keys = [{"Key": k} for k in self.keys(prefix)]
        for i in range(0, len(keys), 1000):
            self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": keys[i : i + 1000], "Quiet": True}
            )

    def pushed(self, prefix: str) -> Callable[[int], None]:
        """A check after each push to ``prefix``: it holds what the first push left there."""
        first: list[int] = []

        def check(_i: int) -> None:
            n = len(self.keys(prefix))
            first.append(first[0] if first else n)
            if n == 0 or n < first[0]:
                raise SystemExit(f"{prefix}: {n} objects after a push into an empty prefix")

        return check


# -- data -------------------------------------------------------------------------------------
def fill_store(b: Bench, store: Path) -> list[str]:
    """``fetch --all`` into ``store``; the families it filled completely, sorted."""
    cmd = b.fs("--store", str(store), "fetch", "--all", "--json")
    proc = subprocess.run(cmd, cwd=REPO, env=b.env, capture_output=True, text=True, check=False)
    try:
        results = json.loads(proc.stdout)["results"]
    except (ValueError, KeyError):
        raise SystemExit(f"fixture-store fetch --all failed:\n{proc.stderr[-2000:]}") from None
    complete: dict[str, bool] = {}
    for r in results:
        family = r["name"].split("/")[0]
        complete[family] = complete.get(family, True) and r["outcome"] in ("present", "fetched")
    if not complete.get(NODE):
        raise SystemExit(
            f"the {NODE} family is not in {store} after 'fixture-store fetch --all', which "
            "downloads the pinned onnx wheel from the package index: run the bench where the "
            "index is reachable, or pass a store that holds the family with --store DIR"
        )
    return sorted(f for f, ok in complete.items() if ok)


def object_paths(store: Path, registry: Path, families: Sequence[str]) -> list[str]:
    """Every distinct object file (members and manifests) of the families' records."""
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store

    reg = registry_mod.load(registry)
    hexes = {r.digest.hex for n in reg.select(families=families) for r in reg.get(n).objects()}
    return sorted(str(Store.at(store).object_path(h)) for h in hexes)


def node_corpus(s: Setup, work: Path, cases: int | None) -> Payload:
    """A scratch project whose registry is the node family alone (its first ``cases`` records
    if given), and a folder with a copy of every member file (``<case>/<member path>``) out of
    the store."""
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store

    proj = project(work / "node-project")
    doc = json.loads((REPO / "provenance" / f"{NODE}.json").read_text())
    doc["records"] = dict(list(doc["records"].items())[:cases])
    (proj / "provenance" / f"{NODE}.json").write_text(registry_mod.dumps(doc))
    folder, store, reg = work / "data" / "node", Store.at(s.store), registry_mod.load(proj)
    total = 0
    for name in reg.names():
        for path, digest in reg.get(name).members or ():
            target = folder / name.split("/", 1)[1] / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.object_path(digest), target)
            total += digest.size
    return Payload("node", s.store, proj, folder, total)


def large_object(s: Setup, work: Path, mib: int) -> Payload:
    """A scratch project with one checkpoint record of ``mib`` MiB in ``s.large_store``, and
    its file (never in the corpus store, which may be the caller's)."""
    proj = project(work / "large-project")
    data = proj / "large.bin"  # a local source lives in its project
    write_random(data, mib << 20)
    add = ["add", str(data), "--name", "bench/large", "--kind", "checkpoint"]
    s.untimed(s.fs(*add, store=s.large_store, registry=proj))
    return Payload("large", s.large_store, proj, data, mib << 20)


def many_small(s: Setup, work: Path, count: int, size: int) -> Payload:
    """A scratch project with one tree record of ``count`` random files of ``size`` bytes, in
    its own store."""
    proj = project(work / "small-project")
    folder = proj / "small"  # a local source lives in its project
    folder.mkdir()
    for i in range(count):
        (folder / f"f{i:06d}.bin").write_bytes(os.urandom(size))
    store = work / "small-store"
    add = ["add", str(folder), "--name", "bench/small", "--kind", "tree"]
    s.untimed(s.fs(*add, store=store, registry=proj))
    return Payload(f"{count:,} x {size // 1024} KiB", store, proj, folder, count * size)


def count_files(path: Path) -> int:
    if path.is_file():
        return 1
    return sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class DvcProject:
    """A throwaway DVC project tracking a copy of ``data`` (a file or a folder)."""

    def __init__(self, s: Setup, root: Path, data: Path) -> None:
        self.s, self.root = s, dvc_repo(root)
        self.data = self.root / data.name
        if data.is_dir():
            shutil.copytree(data, self.data)
        else:
            shutil.copyfile(data, self.data)
        self.files = count_files(self.data)
        self.dvc("add", "-q", data.name)

    def dvc(self, *args: str) -> None:
        self.s.untimed([*DVC, *args], cwd=self.root)

    def timed(self, *args: str) -> Callable[[int], Sample]:
        return lambda _i: self.s.run([*DVC, *args], cwd=self.root)

    def s3_remote(self, prefix: str) -> None:
        self.dvc("remote", "add", "-f", "s3", f"s3://{self.s.bucket}/{prefix}")
        self.dvc("remote", "modify", "s3", "endpointurl", self.s.endpoint)

    def forget(self, _i: int = 0) -> None:
        """Remove the cache and the workspace copy: a pull downloads and checks out all."""
        shutil.rmtree(self.root / ".dvc" / "cache", ignore_errors=True)
        if self.data.is_dir():
            shutil.rmtree(self.data)
        else:
            self.data.unlink(missing_ok=True)

    def pulled(self, _i: int = 0) -> None:
        if (n := count_files(self.data)) != self.files:
            raise SystemExit(f"dvc pull restored {n} of {self.files} files")


# -- cases ------------------------------------------------------------------------------------
def then(run: Callable[[int], Sample], check: Callable[[int], None]) -> Callable[[int], Sample]:
    """``run``, then (untimed) ``check`` that it did the work."""

    def both(i: int) -> Sample:
        sample = run(i)
        check(i)
        return sample

    return both


def fresh(path: Path) -> Callable[[int], None]:
    """A prepare step: ``path`` is an empty folder."""

    def prepare(_i: int) -> None:
        if path.exists():
            _rmtree(path)
        path.mkdir(parents=True)

    return prepare


@dataclass(frozen=True)
class Contender:
    """One side of a race: how it runs, what makes its run fair first, the target of
    fixture-store's speed-up over it (the first contender of a race is fixture-store)."""

    name: str
    run: Callable[[int], Sample]
    prepare: Callable[[int], None] | None = None
    target: float | None = None


def race(
    s: Setup, title: str, nbytes: int, contenders: Sequence[Contender], *, s3: bool = False
) -> None:
    """Measure the contenders round-robin and keep the comparison for the table; ``s3``: their
    RSS is taken above a child that also imports boto3 and makes a client, as they all do."""
    rows = s.b.measure_together(
        title,
        nbytes,
        [(c.name, c.run, None, None) for c in contenders],
        prepare={c.name: c.prepare for c in contenders if c.prepare is not None},
    )
    others = tuple((row, c.target) for row, c in zip(rows[1:], contenders[1:], strict=True))
    baseline = s.s3_baseline_kib if s3 else s.b.baseline_kib
    s.sections.append(Versus(title, rows[0], others, baseline))


def case_s3(s: Setup, p: Payload) -> None:
    """Push then pull of ``p``: fixture-store's records, and its bytes with DVC and boto3."""
    work, many = s.b.work / f"s3-{p.label}", p.data.is_dir()
    dvc = DvcProject(s, work / "dvc", p.data)
    dvc.s3_remote(f"{p.label}/dvc")
    url = f"s3://{s.bucket}/{p.label}/fs"
    # The boto3 child writes under "boto/" of the bucket it is given: one bucket per case.
    boto_bucket = f"{s.bucket}-{p.label}"
    s.client.create_bucket(Bucket=boto_bucket)
    boto = [sys.executable, "-c", remotes.CHILD]
    up, down = ("boto-up-many", "boto-down-many") if many else ("boto-up-one", "boto-down-one")
    how = "8 threads" if many else "transfer manager"
    vs_dvc, vs_boto = (3.0, None) if many else (None, 1.0)
    fs_push = s.fs(
        "push", "--all", "--remote", url, "--jobs", JOBS, store=p.store, registry=p.project
    )
    race(s, f"{p.label} push", p.nbytes, [
        Contender("fixture-store push", then(lambda _i: s.run(fs_push), s.pushed(f"{p.label}/fs")),
                  lambda _i: s.empty(f"{p.label}/fs")),
        Contender("dvc push (dvc-s3)",
                  then(dvc.timed("push", "-q", "-r", "s3"), s.pushed(f"{p.label}/dvc")),
                  lambda _i: s.empty(f"{p.label}/dvc"), vs_dvc),
        Contender(f"boto3 upload_file ({how})",
                  lambda _i: s.run([*boto, up, s.endpoint, boto_bucket, str(p.data)]),
                  target=vs_boto),
    ], s3=True)  # fmt: skip
    store, out = work / "pull-store", work / "boto-out"
    down_args = [str(p.data), str(out)] if many else [str(out / p.data.name)]
    fs_pull = s.fs(
        "pull", "--all", "--remote", url, "--jobs", JOBS, store=store, registry=p.project
    )
    race(s, f"{p.label} pull", p.nbytes, [
        Contender("fixture-store pull", lambda _i: s.run(fs_pull), fresh(store)),
        Contender("dvc pull (dvc-s3)", then(dvc.timed("pull", "-q", "-r", "s3"), dvc.pulled),
                  dvc.forget, vs_dvc),
        Contender(f"boto3 download_file ({how})",
                  lambda _i: s.run([*boto, down, s.endpoint, boto_bucket, *down_args]),
                  fresh(out), vs_boto),
    ], s3=True)  # fmt: skip
    for path in (store, out, dvc.root):
        _rmtree(path)
    for prefix in (f"{p.label}/fs", f"{p.label}/dvc"):
        s.empty(prefix)


def case_packs(s: Setup, p: Payload) -> None:
    """Push then pull of ``p`` in packs (fixture-store's default) against dvc-s3, timed as
    whole processes straight to the server; then each counted in one untimed run through a
    proxy in front of it, with fixture-store one object per key (as before packs) beside."""
    key = p.label.replace(",", "").replace(" ", "")
    work, fs_prefix, dvc_prefix = s.b.work / f"packs-{key}", f"{key}/packs", f"{key}/pdvc"
    dvc = DvcProject(s, work / "dvc", p.data)
    dvc.s3_remote(dvc_prefix)
    (p.project / "pyproject.toml").write_text(
        f'[tool.fixture-store.remotes.packs]\nurl = "s3://{s.bucket}/{fs_prefix}"\n\n'
        f'[tool.fixture-store.remotes.plain]\nurl = "s3://{s.bucket}/{key}/plain"\n'
        "pack_threshold = 0\n"
    )
    store = work / "pull-store"

    def fs(verb: str, remote: str, into: Path) -> list[str]:
        args = [verb, "--all", "--remote", remote, "--jobs", JOBS]
        return s.fs(*args, store=into, registry=p.project)

    race(s, f"{p.label} push, packs", p.nbytes, [
        Contender("fixture-store push (packs)",
                  then(lambda _i: s.run(fs("push", "packs", p.store)), s.pushed(fs_prefix)),
                  lambda _i: s.empty(fs_prefix)),
        Contender("dvc push (dvc-s3)",
                  then(dvc.timed("push", "-q", "-r", "s3"), s.pushed(dvc_prefix)),
                  lambda _i: s.empty(dvc_prefix), 5.0),
    ], s3=True)  # fmt: skip
    race(s, f"{p.label} pull, packs", p.nbytes, [
        Contender("fixture-store pull (packs)", lambda _i: s.run(fs("pull", "packs", store)),
                  fresh(store)),
        Contender("dvc pull (dvc-s3)", then(dvc.timed("pull", "-q", "-r", "s3"), dvc.pulled),
                  dvc.forget, 5.0),
    ], s3=True)  # fmt: skip
    counts = count_requests(s, p, dvc, fs, store=store, prefixes=(fs_prefix, dvc_prefix))
    s.requests.append((p.label, counts))
    for path in (store, dvc.root):
        _rmtree(path)
    for prefix in (fs_prefix, dvc_prefix, f"{key}/plain"):
        s.empty(prefix)


def count_requests(
    s: Setup,
    p: Payload,
    dvc: DvcProject,
    fs: Callable[[str, str, Path], list[str]],
    *,
    store: Path,
    prefixes: tuple[str, str],
) -> dict[str, int]:
    """One untimed run of each push and pull (into an empty prefix, an empty store or cache)
    through a proxy in front of the server that counts every request."""
    from tests.support.s3server import FaultProxy

    counts: dict[str, int] = {}
    with FaultProxy(s.endpoint) as proxy:
        env = {"AWS_ENDPOINT_URL": proxy.url}

        def counted(name: str, cmd: Sequence[str], cwd: Path | None = None) -> None:
            proxy.faults.requests = 0
            s.b.spawn(cmd, cwd=cwd, env=env)
            counts[name] = proxy.faults.requests

        for prefix in prefixes:
            s.empty(prefix)
        for remote, name in (("packs", "packs"), ("plain", "one per key")):
            counted(f"fixture-store push ({name})", fs("push", remote, p.store))
            fresh(store)(0)
            counted(f"fixture-store pull ({name})", fs("pull", remote, store))
        dvc.dvc("remote", "modify", "s3", "endpointurl", proxy.url)
        try:
            counted("dvc push (dvc-s3)", [*DVC, "push", "-q", "-r", "s3"], dvc.root)
            dvc.forget()
            counted("dvc pull (dvc-s3)", [*DVC, "pull", "-q", "-r", "s3"], dvc.root)
        finally:
            dvc.dvc("remote", "modify", "s3", "endpointurl", s.endpoint)
    return counts


def case_folder(s: Setup, p: Payload) -> None:
    """Pull of ``p`` from a shared-folder remote against ``dvc pull`` from a local remote."""
    work = s.b.work / "folder"
    remote, dvc_remote, store = work / "fs-remote", work / "dvc-remote", work / "pull-store"
    s.untimed(s.fs("push", "--all", "--remote", str(remote), store=p.store, registry=p.project))
    dvc = DvcProject(s, work / "dvc", p.data)
    dvc.dvc("remote", "add", "-f", "local", str(dvc_remote))
    dvc.dvc("push", "-q", "-r", "local")
    fs_pull = s.fs("pull", "--all", "--remote", str(remote), "--jobs", JOBS, store=store,
                   registry=p.project)  # fmt: skip
    race(s, f"{p.label} pull, folder", p.nbytes, [
        Contender("fixture-store pull (shared folder)", lambda _i: s.run(fs_pull), fresh(store)),
        Contender("dvc pull (local remote)",
                  then(dvc.timed("pull", "-q", "-r", "local"), dvc.pulled), dvc.forget, 3.0),
    ])  # fmt: skip
    _rmtree(work)


def case_verify(s: Setup, families: Sequence[str]) -> None:
    """Warm verify of the embedded corpus, whole process, against dvc status and the floor."""
    work = s.b.work / "verify"
    paths = [Path(p) for p in object_paths(s.store, REPO, families)]
    listing, copies = work / "objects.txt", work / "objects"
    copies.mkdir(parents=True)
    listing.write_text("".join(f"{p}\n" for p in paths))
    for path in paths:
        shutil.copyfile(path, copies / f"{path.parent.name}{path.name}")
    dvc = DvcProject(s, work / "dvc", copies)
    dvc.dvc("status", "-q")  # warm: the first run fills DVC's state database
    verify = [*s.b.fs("verify"), *(a for f in families for a in ("--family", f))]
    env = {"FIXTURE_STORE_DIR": str(s.store)}
    s.b.spawn(verify, cwd=REPO, env=env)  # warm: the first run fills the verified-state cache
    race(s, f"warm verify, {len(paths):,} objects", sum(p.stat().st_size for p in paths), [
        Contender("fixture-store verify (warm)", lambda _i: s.b.external(verify, REPO, env)),
        Contender("dvc status (warm)", dvc.timed("status", "-q"), target=8.0),
        # "Within 2.5x of the floor": the floor's time over fixture-store's is at least 0.4.
        Contender("floor: python -c, one os.stat each",
                  lambda _i: s.run([sys.executable, "-c", FLOOR, str(listing)]), target=0.4),
    ])  # fmt: skip
    _rmtree(work)


# -- output -----------------------------------------------------------------------------------
def render(b: Bench, sections: Sequence[Versus]) -> str:
    head = (
        f"{'contender':40s} {'median s':>9s} {'spread s':>15s} {'RSS+MiB':>8s} "
        f"{'vs fs':>7s} {'target':>10s}"
    )
    lines = [head, "-" * len(head)]
    for sec in sections:
        lines.append(f"{sec.title} (RSS above {sec.baseline_kib / 1024:.0f} MiB)")
        for row, target in ((sec.ours, None), *sec.others):
            lo, hi = row.spread
            rss = max(0.0, row.peak_rss_kib - sec.baseline_kib) / 1024
            ratio, aim = "", ""
            if row is sec.ours:
                aim = f"<={RSS_TARGET_MIB}MiB " + ("ok" if rss <= RSS_TARGET_MIB else "NO")
            else:
                ratio = f"{row.median / sec.ours.median:.2f}x"
            if target is not None:
                aim = f">={target:g}x " + ("ok" if row.median / sec.ours.median >= target else "NO")
            lines.append(
                f"  {row.contender:38s} {row.median:9.2f} {f'{lo:.2f}-{hi:.2f}':>15s} "
                f"{rss:8.1f} {ratio:>7s} {aim:>10s}"
            )
    lines.append(
        "vs fs = that contender's median / fixture-store's (above 1: fixture-store is faster); "
        "RSS above a child importing fixture-store (and for S3 boto3, with a client); "
        f"{b.repeat} runs each, whole processes; load average now "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    return "\n".join(lines)


# Packs: at most 1/50 of the requests of one object per key; dvc's at least 5x packs' time.
REQUEST_TARGET = 50


def render_requests(cases: Sequence[tuple[str, dict[str, int]]]) -> str:
    """Each case's requests per contender, and how many times fewer packs make."""
    head = (
        f"{'requests (one untimed run each)':48s} {'requests':>9s} {'/ packs':>8s} {'target':>10s}"
    )
    lines = [head, "-" * len(head)]
    for label, counts in cases:
        lines.append(label)
        for verb in ("push", "pull"):
            ours = counts[f"fixture-store {verb} (packs)"]
            for name, n in counts.items():
                if verb not in name:
                    continue
                ratio = n / max(ours, 1)
                aim = ""
                if "one per key" in name:
                    aim = f">={REQUEST_TARGET}x " + ("ok" if ratio >= REQUEST_TARGET else "NO")
                lines.append(f"  {name:46s} {n:9,d} {ratio:7.1f}x {aim:>10s}")
    lines.append(
        "counted by a proxy in front of the same server; / packs = that contender's requests "
        "over fixture-store's in packs; one per key = fixture-store with pack_threshold = 0, "
        "as before packs"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.dvc_remotes", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--large-mib", type=int, default=1024, help="size of the large object (1024)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender (3)")
    ap.add_argument("--only", action="append", choices=CASES, help="run only these cases")
    ap.add_argument("--node-cases", type=int, help="only the first N node cases (all 1,765)")
    ap.add_argument("--store", type=Path, help="a store holding the corpus (default: fetch one)")
    ap.add_argument("--small-count", type=int, default=10_000, help="packs: small files (10000)")
    ap.add_argument("--small-kib", type=int, default=4, help="packs: their size in KiB (4)")
    args = ap.parse_args(argv)
    chosen = args.only or list(CASES)
    work = Path(tempfile.mkdtemp(prefix="fixture-store-bench-dvc-"))
    try:
        b = Bench(work, args.repeat)
        b.env.update(remotes.bench_env(work))
        store = (args.store or work / "store").resolve()
        families = fill_store(b, store)
        with remotes.moto_server() as (endpoint, client):
            b.env["AWS_ENDPOINT_URL"] = endpoint
            s = Setup(b, store, endpoint, client)
            node = node_corpus(s, work, args.node_cases)
            if "s3" in chosen:
                case_s3(s, node)
                case_s3(s, large_object(s, work, args.large_mib))
            if "folder" in chosen:
                case_folder(s, node)
            if "verify" in chosen:
                case_verify(s, families)
            if "packs" in chosen:
                case_packs(s, node)
                case_packs(s, many_small(s, work, args.small_count, args.small_kib << 10))
        print(render(b, s.sections))
        if s.requests:
            print(render_requests(s.requests))
    finally:
        _rmtree(work)


if __name__ == "__main__":
    main()
