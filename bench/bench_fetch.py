"""Benchmark: `fixture-store fetch --family onnx-node` against pooch + a hand-rolled validator.

Run: uv run python bench/bench_fetch.py [--repeat 3]   (needs the package index once, for the
onnx wheel)

Both sides start from the same pinned onnx 1.22.0 wheel on local disk (so the network is not
measured): fixture-store gets it through pip from a local wheelhouse, pooch from a loopback
HTTP server. Both check the wheel's sha256, extract the 7,794 node-case files (pooch: its
``Unzip`` processor with the node-case folder as the member) and check each one against the
registry's digests (pooch cannot, so a hand-rolled loop hashes every extracted file, which is
what projects do today). Then the warm case: everything already there, for both.

One untimed round first (imports, page cache), then ``--repeat`` rounds; each round empties
both stores and runs fixture-store cold, fixture-store warm, pooch cold, pooch warm. Cold is
compared with cold and warm with warm; the medians are printed, with the spread.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pooch

from fixture_store import registry as registry_mod
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import fsutil
from fixture_store.objects.store import Store

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "scripts"))
import onnx_corpus  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (3)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    house = work / "wheelhouse"
    house.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            str(house),
            *onnx_corpus_flags(),
            onnx_corpus.REQUIREMENT,
        ],
        check=True,
    )
    wheel = house / onnx_corpus.WHEEL
    registry = registry_mod.load(PROJECT)
    names = registry.select(families=["onnx-node"])
    records = [registry.get(n) for n in names]
    manifest = {
        f"{r.source.path}/{m}": d.hex  # type: ignore[union-attr]  # package sources
        for r in records
        for m, d in (r.members or ())
    }

    os.environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(house), PIP_CONFIG_FILE=os.devnull)
    store = Store.at(work / "store")

    def fs_fetch() -> None:
        report = fetch_names(store, registry, names)
        failed = [
            r.name for r in report.results if r.outcome not in (Outcome.FETCHED, Outcome.PRESENT)
        ]
        if failed:
            raise SystemExit(f"fixture-store fetch failed: {failed[0]}")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = partial(Quiet, directory=str(house))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}"
    cache = work / "pooch"
    # The node-case folder as pooch's one member, as a user would write it: pooch matches each
    # member against every archive name and every extracted file, so 7,794 members cost it
    # minutes that say nothing about a fetch.
    node_folder = os.path.commonpath(list(manifest))
    pooch.get_logger().setLevel("WARNING")  # one log line per member would be measured too

    def pooch_fetch_and_validate() -> None:
        files = pooch.retrieve(
            url,
            known_hash=onnx_corpus.WHEEL_DIGEST.text,
            path=cache,
            processor=pooch.Unzip(members=[node_folder]),
            progressbar=False,
        )
        by_member = {f.split(".whl.unzip/", 1)[1]: f for f in files}
        for member, hexdigest in manifest.items():
            with open(by_member[member], "rb") as f:
                if hashlib.file_digest(f, "sha256").hexdigest() != hexdigest:
                    raise SystemExit(f"{member} does not verify")

    times: dict[str, list[float]] = {
        k: [] for k in ("cold fs", "warm fs", "cold pooch", "warm pooch")
    }
    for round_ in range(args.repeat + 1):
        remove_tree(store.root)
        remove_tree(cache)
        samples = {
            "cold fs": timed(fs_fetch),
            "warm fs": timed(fs_fetch),
            "cold pooch": timed(pooch_fetch_and_validate),
            "warm pooch": timed(pooch_fetch_and_validate),
        }
        if round_:  # the first round is untimed
            for key, seconds in samples.items():
                times[key].append(seconds)
    server.shutdown()

    remove_tree(work)
    print(f"onnx-node: {len(names)} cases, {len(manifest)} files; medians of {args.repeat} rounds")
    for state in ("cold", "warm"):
        ours, theirs = times[f"{state} fs"], times[f"{state} pooch"]
        fs, po = statistics.median(ours), statistics.median(theirs)
        print(
            f"{state}  fixture-store fetch {fs:6.2f}s ({min(ours):.2f}-{max(ours):.2f})   "
            f"pooch+validator {po:6.2f}s ({min(theirs):.2f}-{max(theirs):.2f})   "
            f"ratio {po / fs:5.2f}x"
        )


def remove_tree(path: Path) -> None:
    """Remove ``path`` if it is there (store objects are read-only)."""
    if path.exists():
        fsutil.remove_tree(path)


def onnx_corpus_flags() -> list[str]:
    from fixture_store.sources.package import selection_flags

    return selection_flags(onnx_corpus.WHEEL)


if __name__ == "__main__":
    main()
