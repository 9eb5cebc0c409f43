"""Run the benchmarks: fixture-store side by side with hashlib, sha256sum, dvc and pooch.

    uv run python -m bench [--size-mib 1024] [--small 10000] [--repeat 3] [--only CASE ...]
                           [--json results.json] [--keep DIR]

Every case builds its own data in a temp folder. Each contender runs as a child process, so its
peak RSS (``os.wait4``) is its own; RSS is reported above the baseline of a child that only
imports fixture-store. The contenders of a case run round-robin (one discarded run each, then
``--repeat`` rounds), so load from elsewhere falls on all of them; the table shows the median
and the spread (min-max), and ratios are taken between medians measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.harness import (
    REPO,
    Bench,
    Entry,
    Sample,
    _rmtree,
    dvc_repo,
    finish,
    free_port,
    make_cert,
    project,
    table,
    write_random,
    write_small,
    write_tensor,
)

CASES = ("big", "tensor", "many", "small", "corpus", "archive", "onnx", "safetensors")


def case_single(
    b: Bench, case: str, size: int, writer: Callable[[Path, int], None], fetch: bool
) -> None:
    """One large object: full verify, BLAKE3 verify, warm verify, ingest, https fetch."""
    root = b.work / case
    data = root / "proj" / "data" / ("object.bin" if case == "big" else "tensor.npy")
    data.parent.mkdir(parents=True)
    writer(data, size)
    nbytes = data.stat().st_size
    listing = root / "files.txt"
    listing.write_text(f"{data}\n")
    proj = project(root / "proj")
    store = root / "store"
    b.spawn(
        b.fs(
            "--store",
            str(store),
            "--registry",
            str(proj),
            "add",
            str(data),
            "--name",
            f"bench/{case}",
            "--kind",
            "fixture",
        )
    )

    hashlib_row = "hashlib sha256 (1 core)"
    full = "fixture-store verify --full sha256"
    b.measure_together(
        case,
        nbytes,
        [
            (hashlib_row, lambda _i: b.child(["hashlib", str(listing)]), None, None),
            (
                "sha256sum (coreutils)",
                lambda _i: b.external(["sha256sum", str(data)]),
                hashlib_row,
                None,
            ),
            (full, _verify(b, store, proj, "full", "sha256"), hashlib_row, 0.95),
            (
                "fixture-store verify --full (blake3)",
                _verify(b, store, proj, "full", "auto"),
                hashlib_row,
                3.0,
            ),
            ("fixture-store verify (warm)", _verify(b, store, proj, "warm", "auto"), full, None),
        ],
    )

    _ingest_rows(_Ingest(b, case, root, proj, data, "fixture"), ("", ""))
    if fetch:
        _fetch_case(b, case, data, nbytes)


def _verify(
    b: Bench, store: Path | str, proj: Path | str, mode: str, algorithm: str
) -> Callable[[int], Sample]:
    """A run of the verify child: ``mode`` is "full" or "warm", ``algorithm`` sha256 or auto."""
    return lambda _i: b.child(["verify", str(store), str(proj), mode, algorithm, "thread"])


def fewest_links(path: Path) -> int:
    """The fewest hard links of ``path``, or of any file under it: 1 means a copy somewhere."""
    if not path.is_dir():
        return path.stat().st_nlink
    return min(p.stat().st_nlink for p in path.rglob("*") if p.is_file())


@dataclass
class _Ingest:
    """The ``add`` rows of one case: fresh stores and DVC repositories, one per run."""

    b: Bench
    case: str
    root: Path
    proj: Path
    source: Path
    kind: str
    dirs: dict[str, Path] = field(default_factory=dict)

    def fresh(self, key: str, i: int) -> Path:
        previous = self.dirs.get(key)
        if previous is not None and previous.exists():
            _rmtree(previous)
        self.dirs[key] = self.root / f"ingest-{key}-{i + 1}"
        return self.dirs[key]

    def prep_dvc(self, key: str, *, hardlink: bool) -> Callable[[int], None]:
        def prepare(i: int) -> None:
            repo = dvc_repo(self.fresh(key, i))
            if hardlink:
                config = [sys.executable, "-m", "dvc", "config", "cache.type", "hardlink"]
                subprocess.run(config, cwd=repo, check=True, env=self.b.env)
            if self.source.is_dir():
                shutil.copytree(self.source, repo / self.source.name)
            else:
                shutil.copyfile(self.source, repo / self.source.name)

        return prepare

    def prep_fs(self, key: str) -> Callable[[int], None]:
        def prepare(i: int) -> None:
            self.fresh(key, i)
            (self.proj / "provenance" / "bench.json").unlink(missing_ok=True)

        return prepare

    def dvc_add(self, key: str, *, hardlink: bool) -> Callable[[int], Sample]:
        def run(_i: int) -> Sample:
            repo = self.dirs[key]
            cmd = [sys.executable, "-m", "dvc", "add", "-q", self.source.name]
            sample = self.b.external(cmd, cwd=repo)
            if hardlink:
                sample.links = fewest_links(repo / self.source.name)
            return sample

        return run

    def fs_add(self, key: str, *, link: bool) -> Callable[[int], Sample]:
        def run(_i: int) -> Sample:
            args = ["--store", str(self.dirs[key]), "--registry", str(self.proj), "add"]
            args += [str(self.source), "--name", f"bench/{self.case}", "--kind", self.kind]
            sample = self.b.external(self.b.fs(*args, *(["--link"] if link else [])))
            if link:
                sample.links = fewest_links(self.source)
            return sample

        return run

    def clean(self) -> None:
        for path in self.dirs.values():
            if path.exists():
                _rmtree(path)


def _ingest_rows(ingest: _Ingest, labels: tuple[str, str]) -> None:
    """``add`` against copying ``dvc add``, ``add --link`` against ``dvc add`` with
    ``cache.type hardlink``, round-robin. Every run gets a fresh store or DVC repository (the
    previous run's is deleted first), so nothing is ever already there; the linking rows read
    the source's link count after each run and the row fails if any file was copied.

    ``labels``: what the dvc rows say in parentheses, and the fixture-store rows' suffix.
    """
    dvc_label, fs_label = labels
    dvc_copy = f"dvc add ({dvc_label})" if dvc_label else "dvc add"
    dvc_link = f"dvc add ({dvc_label + ', ' if dvc_label else ''}cache.type hardlink)"
    fs_copy = f"fixture-store add{fs_label}"
    fs_link = f"fixture-store add --link{fs_label}"
    ingest.b.measure_together(
        ingest.case,
        source_bytes(ingest.source),
        [
            (dvc_copy, ingest.dvc_add("dvc-copy", hardlink=False), None, None),
            (fs_copy, ingest.fs_add("fs-copy", link=False), dvc_copy, 5.0),
            (dvc_link, ingest.dvc_add("dvc-link", hardlink=True), None, None),
            (fs_link, ingest.fs_add("fs-link", link=True), dvc_link, 5.0),
        ],
        prepare={
            dvc_copy: ingest.prep_dvc("dvc-copy", hardlink=False),
            fs_copy: ingest.prep_fs("fs-copy"),
            dvc_link: ingest.prep_dvc("dvc-link", hardlink=True),
            fs_link: ingest.prep_fs("fs-link"),
        },
        linked=(dvc_link, fs_link),
        note="CLI wall time, round-robin, fresh store or repository each run",
    )
    ingest.clean()


def source_bytes(path: Path) -> int:
    if not path.is_dir():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# An https mirror on loopback for the fetch rows: serves a folder with the bench's certificate.
HTTPS_MIRROR = """
import functools, http.server, ssl, sys
folder, cert, key, port = sys.argv[1:5]
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=folder)
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
server.daemon_threads = True
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def _fetch_case(b: Bench, case: str, data: Path, nbytes: int) -> None:
    """``fixture-store fetch`` of a url record (https, then verified) against pooch.retrieve,
    both as whole processes from the same loopback https mirror, round-robin, fresh store or
    cache folder each run. Both trust the mirror's certificate through the environment:
    ``SSL_CERT_FILE`` for the url source, ``REQUESTS_CA_BUNDLE`` for pooch's requests."""
    from fixture_store.objects import digests

    root = b.work / case / "fetch"
    root.mkdir()
    cert, _ = make_cert(root)
    digest = digests.of_file(data)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HTTPS_MIRROR,
            str(data.parent),
            str(cert),
            str(root / "key.pem"),
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"https://127.0.0.1:{port}/{data.name}"
        _wait_for_port(port)
        proj = project(root / "proj")
        record: dict[str, object] = {"kind": "fixture", "source": {"type": "url", "url": url}}
        record |= {"digest": digest.text, "size": digest.size}
        doc = {"format_version": 1, "records": {f"bench/{case}": record}}
        (proj / "provenance" / "bench.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
        env = {"SSL_CERT_FILE": str(cert), "REQUESTS_CA_BUNDLE": str(cert)}
        dirs: dict[str, Path] = {}

        def fresh(key: str) -> Callable[[int], None]:
            def prepare(i: int) -> None:
                previous = dirs.get(key)
                if previous is not None and previous.exists():
                    _rmtree(previous)
                dirs[key] = root / f"{key}-{i + 1}"

            return prepare

        pooch = "pooch.retrieve (https loopback mirror)"
        fs = "fixture-store fetch (https, verified)"
        b.measure_together(
            case,
            nbytes,
            [
                (
                    pooch,
                    lambda _i: b.external(
                        [
                            sys.executable,
                            "-m",
                            "bench.child",
                            "pooch",
                            url,
                            digest.text,
                            str(dirs["pooch"]),
                        ],
                        cwd=REPO,
                        env=env,
                    ),
                    None,
                    None,
                ),
                (
                    fs,
                    lambda _i: b.external(
                        b.fs(
                            "--store",
                            str(dirs["store"]),
                            "--registry",
                            str(proj),
                            "fetch",
                            f"bench/{case}",
                        ),
                        env=env,
                    ),
                    pooch,
                    2.0,
                ),
            ],
            prepare={pooch: fresh("pooch"), fs: fresh("store")},
            note="process wall time, round-robin, fresh store or cache folder each run",
        )
    finally:
        server.terminate()
        server.wait()
    _rmtree(root)


def _wait_for_port(port: int) -> None:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing is listening on 127.0.0.1:{port}")


def _executor_rows(
    b: Bench,
    case: str,
    store: str,
    proj: str,
    *,
    nbytes: int,
    listing: Path,
    extra: Sequence[Entry] = (),
) -> None:
    """Full SHA-256 verify across objects against one-core hashlib: the default, and each way of
    running it forced, measured round-robin with the anchor (and the ``extra`` contenders)."""
    anchor = "hashlib sha256 (1 core)"
    entries: list[Entry] = [
        (anchor, lambda _i: b.child(["hashlib", str(listing)]), None, None),
        (
            "fixture-store verify --full sha256",
            lambda _i: b.child(["verify", store, proj, "full", "sha256", "thread"]),
            anchor,
            1.8,
        ),
    ]
    for label, executor, workers in (
        ("2 threads", "thread", "2"),
        ("2 processes", "process", "2"),
        ("1 thread", "thread", "1"),
    ):
        entries.append(
            (
                f"  forced: {label}",
                lambda _i, ex=executor, w=workers: b.child(  # type: ignore[misc]
                    ["verify", store, proj, "full", "sha256", ex, w]
                ),
                anchor,
                None,
            )
        )
    b.measure_together(case, nbytes, [*entries, *extra])


def case_many(b: Bench, size: int, count: int = 64) -> None:
    """One large tree of ``count`` objects: full verify across objects vs one-core hashlib."""
    case = "many"
    root = b.work / case
    proj = project(root / "proj")
    folder = proj / "objects"
    folder.mkdir()
    for i in range(count):
        write_random(folder / f"o{i:03d}.bin", size // count)
    _files, listing, nbytes, store = _ingested_tree(b, case, root, proj, folder)
    blake3 = _verify(b, store, proj, "full", "auto")
    _executor_rows(
        b,
        case,
        str(store),
        str(proj),
        nbytes=nbytes,
        listing=listing,
        extra=[("fixture-store verify --full (blake3)", blake3, "hashlib sha256 (1 core)", 3.0)],
    )


def _ingested_tree(
    b: Bench, case: str, root: Path, proj: Path, folder: Path
) -> tuple[list[str], Path, int, Path]:
    """Add ``folder`` as the tree artifact bench/CASE; return its files, a listing of them for
    the hashlib child, their total size and the store."""
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file())
    listing = root / "files.txt"
    listing.write_text("\n".join(files) + "\n")
    nbytes = sum(os.path.getsize(p) for p in files)
    store = root / "store"
    b.spawn(
        b.fs(
            "--store",
            str(store),
            "--registry",
            str(proj),
            "add",
            str(folder),
            "--name",
            f"bench/{case}",
            "--kind",
            "tree",
        )
    )
    return files, listing, nbytes, store


def case_small(b: Bench, count: int) -> None:
    """Many small objects: parallel full verify vs one-core hashlib, and ingest vs dvc add."""
    case = "small"
    root = b.work / case
    proj = project(root / "proj")
    folder = proj / "files"
    write_small(folder, count)
    files, listing, nbytes, store = _ingested_tree(b, case, root, proj, folder)

    hashlib_row = "hashlib sha256 (1 core)"
    extra: list[Entry] = [
        ("sha256sum (coreutils)", lambda _i: b.external(["sha256sum", *files]), hashlib_row, None),
        (
            "fixture-store verify --full (blake3)",
            _verify(b, store, proj, "full", "auto"),
            hashlib_row,
            None,
        ),
        (
            "fixture-store verify (warm)",
            _verify(b, store, proj, "warm", "auto"),
            "fixture-store verify --full sha256",
            None,
        ),
    ]
    _executor_rows(b, case, str(store), str(proj), nbytes=nbytes, listing=listing, extra=extra)

    _ingest_rows(_Ingest(b, case, root, proj, folder, "tree"), ("folder", " (tree)"))


def case_corpus(b: Bench, records: int = 1765, files: int = 8000) -> None:
    """A synthetic corpus shaped like the ONNX node cases: warm verify vs full verify."""
    from fixture_store import registry as registry_mod
    from fixture_store.ingest import build_record, with_blake3
    from fixture_store.objects import trees
    from fixture_store.objects.store import Store
    from fixture_store.registry import LocalSource

    case = "corpus"
    root = b.work / case
    proj = project(root / "proj")
    src = root / "src"
    rng = np.random.default_rng(1)
    layout: list[list[Path]] = []
    for r in range(records):
        per = files // records + (1 if r < files % records else 0)
        case_dir = src / f"test_case_{r:04d}"
        (case_dir / "test_data_set_0").mkdir(parents=True)
        paths = [case_dir / "model.onnx"]
        paths += [case_dir / "test_data_set_0" / f"input_{k}.pb" for k in range(per - 1)]
        for p in paths:
            p.write_bytes(rng.bytes(int(rng.integers(200, 5000))))
        layout.append(paths)
    store = Store.at(root / "store")
    flat = [p for paths in layout for p in paths]
    stored = dict(zip(flat, store.write_files(flat), strict=True))
    recs = []
    for r, paths in enumerate(layout):
        base = paths[0].parent
        tree = trees.Tree({p.relative_to(base).as_posix(): stored[p].digest for p in paths})
        store.put_bytes(tree.canonical_bytes(), tree.digest)
        rec = build_record(
            f"corpus/test_case_{r:04d}",
            "onnx-case",
            tree.digest,
            LocalSource(f"src/{base.name}"),
            members=tree,
        )
        recs.append(
            with_blake3(
                rec, None, {p.relative_to(base).as_posix(): stored[p].blake3 for p in paths}
            )
        )
    registry_mod.write_family(registry_mod.load(proj), "corpus", recs)
    nbytes = sum(p.stat().st_size for p in flat)
    s = str(store.root)
    _corpus_rows(b, case, s, str(proj), nbytes)


def _corpus_rows(b: Bench, case: str, store: str, proj: str, nbytes: int) -> None:
    listing = Path(proj) / "objects.txt"
    listing.write_text("".join(f"{p}\n" for p in _object_paths(store, proj)))
    full_row = "fixture-store verify --full sha256"
    full, _blake3, warm, _stat = b.measure_together(
        case,
        nbytes,
        [
            (full_row, _verify(b, store, proj, "full", "sha256"), None, None),
            (
                "fixture-store verify --full (blake3)",
                _verify(b, store, proj, "full", "auto"),
                full_row,
                None,
            ),
            (
                "fixture-store verify (warm)",
                _verify(b, store, proj, "warm", "auto"),
                full_row,
                20.0,
            ),
            (
                # The least any per-file warm check costs: the ceiling of the warm ratio.
                "  stat floor: os.stat of each object",
                lambda _i: b.child(["stat", str(listing)]),
                "  verify phase --full sha256",
                None,
            ),
        ],
    )
    b.phase(full, "registry load", "  registry load (part of each verify)")
    b.phase(full, "verify", "  verify phase --full sha256")
    b.phase(
        warm, "verify", "  verify phase (warm)", anchor="  verify phase --full sha256", target=20.0
    )


def _object_paths(store: str, proj: str) -> list[str]:
    """Every distinct object file the project's records use (members and manifests)."""
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store

    reg = registry_mod.load(proj)
    st = Store.at(store)
    hexes = {ref.digest.hex for n in reg.names() for ref in reg.get(n).objects()}
    return sorted(str(st.object_path(h)) for h in hexes)


def case_archive(b: Bench, size: int, count: int = 16) -> None:
    """Checked extraction of a ~1 GiB .tar.zst under the 1 GiB profile vs GNU tar."""
    from fixture_store.limits import GIB_1
    from fixture_store.readers import archives

    case = "archive"
    root = b.work / case
    src = root / "src"
    src.mkdir(parents=True)
    # Headers count against the profile's expanded bytes: leave them room below ``size``.
    each = (size - (1 << 20)) // count
    for i in range(count):
        write_random(src / f"m{i:02d}.bin", each)
    archive = root / "data.tar.zst"
    if shutil.which("zstd"):
        # The zstd tool builds the archive many times faster than a streaming Python encoder;
        # the tar itself still comes from write_tar, so its layout is the reproducible one.
        plain = root / "data.tar"
        archives.write_tar({p.name: p for p in src.iterdir()}, plain, "none")
        subprocess.run(
            ["zstd", "-q", "-1", "-T0", "--rm", str(plain), "-o", str(archive)], check=True
        )
    else:
        archives.write_tar({p.name: p for p in src.iterdir()}, archive, "zstd")
    tree = archives.scan(archive, GIB_1)
    manifest = root / "manifest.json"
    manifest.write_bytes(tree.canonical_bytes())
    _rmtree(src)
    nbytes = tree.total_size
    tar_row = "tar --zstd -xf (unchecked)"
    entries: list[Entry] = []
    if shutil.which("tar") and shutil.which("zstd"):

        def tar_run(i: int) -> Sample:
            dest = root / f"tar-{i + 1}"
            dest.mkdir()
            return b.external(["tar", "--zstd", "-xf", str(archive), "-C", str(dest)])

        entries.append((tar_row, tar_run, None, None))
    entries.append(
        (
            "fixture-store extract (checked, 1GiB profile)",
            lambda i: b.child(
                ["extract", str(archive), str(manifest), str(root / f"store-{i + 1}")]
            ),
            tar_row,
            None,
        )
    )
    b.measure_together(case, nbytes, entries)
    for p in [*root.glob("tar-*"), *root.glob("store-*")]:
        _rmtree(p)


def case_onnx(b: Bench) -> None:
    """The real ONNX node corpus, when its records and objects are here.

    The registry file is copied into a scratch project and given BLAKE3 there (``rehash``), so
    the bench never edits the repository; the objects come from the default store
    (``--store``-less: ``$FIXTURE_STORE_DIR`` or the per-user cache), filled by
    ``fixture-store fetch --family onnx-node``.
    """
    from fixture_store import registry as registry_mod
    from fixture_store.objects.store import Store
    from fixture_store.rehash import record_blake3
    from fixture_store.verify import verify_names

    reg_file = REPO / "provenance" / "onnx-node.json"
    if not reg_file.exists():
        b.skipped["onnx"] = "no provenance/onnx-node.json in this checkout"
        return
    proj = project(b.work / "onnx" / "proj")
    shutil.copyfile(reg_file, proj / "provenance" / reg_file.name)
    reg = registry_mod.load(proj)
    store = Store.at(None)
    names = reg.names()
    results = verify_names(store, reg, names)
    missing = [r for r in results if not r.ok and r.status.value != "gap"]
    if missing:
        b.skipped["onnx"] = (
            f"{len(missing)} of {len(names)} node cases are not verified in "
            f"{store.root} (run 'fixture-store fetch --family onnx-node')"
        )
        return
    record_blake3(store, reg, names)
    nbytes = sum(
        sum(d.size for _, d in (reg.get(n).members or ())) for n in names if reg.get(n).members
    )
    _corpus_rows(b, "onnx", str(store.root), str(proj), nbytes)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024, help="size of the big cases (1024)")
    ap.add_argument("--small", type=int, default=10_000, help="number of 4 KiB objects (10000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (3)")
    ap.add_argument("--only", action="append", choices=CASES, help="run only these cases")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    ap.add_argument("--keep", type=Path, help="build the data here and keep it")
    args = ap.parse_args(argv)
    chosen = args.only or list(CASES)
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixture-store-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        b = Bench(work, args.repeat)
        size = args.size_mib << 20
        if "big" in chosen:
            case_single(b, "big", size, write_random, fetch=True)
        if "tensor" in chosen:
            case_single(b, "tensor", size, write_tensor, fetch=False)
        if "many" in chosen:
            case_many(b, size)
        if "small" in chosen:
            case_small(b, args.small)
        if "corpus" in chosen:
            case_corpus(b)
        if "archive" in chosen:
            case_archive(b, size)
        if "onnx" in chosen:
            case_onnx(b)
        if "safetensors" in chosen:
            from bench.safetensors import case_safetensors

            case_safetensors(b, size)
        finish(b)
        print(table(b))
        if args.json:
            doc = {
                "baseline_rss_kib": b.baseline_kib,
                "repeat": b.repeat,
                "size_mib": args.size_mib,
                "small": args.small,
                "skipped": b.skipped,
                "rows": [
                    {
                        **asdict(r),
                        "median": r.median,
                        "spread": r.spread,
                        "rss_above_baseline_kib": b.above(r),
                        "links": r.links,
                    }
                    for r in b.rows
                ],
            }
            args.json.write_text(json.dumps(doc, indent=2) + "\n")
        unlinked = [f"{r.case}: {r.contender}" for r in b.rows if r.not_linked]
        if unlinked:
            raise SystemExit(f"not hard-linked after the run: {', '.join(unlinked)}")
    finally:
        if args.keep is None:
            _rmtree(work)


if __name__ == "__main__":
    main()
