"""Benchmark: `fixture-store fetch --family onnx-node` against pooch + a hand-rolled validator.

Run: uv run python bench/bench_fetch.py   (needs the package index once, for the onnx wheel)

Both sides start from the same pinned onnx 1.22.0 wheel on local disk (so the network is not
measured): fixture-store gets it through pip from a local wheelhouse, pooch from a loopback
HTTP server. Both check the wheel's sha256, extract the 7,794 node-case files and check each one
against the registry's digests (pooch cannot, so a hand-rolled loop hashes every extracted file,
which is what projects do today). Then the warm case: everything already there.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
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
from fixture_store.fetch import fetch_names
from fixture_store.objects.store import Store

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "scripts"))
import onnx_corpus  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
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
    cold_fs = timed(lambda: fetch_names(store, registry, names))
    warm_fs = timed(lambda: fetch_names(store, registry, names))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = partial(Quiet, directory=str(house))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}"
    cache = work / "pooch"
    pooch.get_logger().setLevel("WARNING")  # one log line per member would be measured too

    def pooch_fetch_and_validate() -> None:
        files = pooch.retrieve(
            url,
            known_hash=onnx_corpus.WHEEL_DIGEST.text,
            path=cache,
            processor=pooch.Unzip(members=sorted(manifest)),
            progressbar=False,
        )
        by_member = {f.split(".whl.unzip/", 1)[1]: f for f in files}
        for member, hexdigest in manifest.items():
            with open(by_member[member], "rb") as f:
                if hashlib.file_digest(f, "sha256").hexdigest() != hexdigest:
                    raise SystemExit(f"{member} does not verify")

    cold_pooch = timed(pooch_fetch_and_validate)
    warm_pooch = timed(pooch_fetch_and_validate)
    server.shutdown()

    shutil.rmtree(work, ignore_errors=True)
    print(f"onnx-node: {len(names)} cases, {len(manifest)} files")
    print(
        f"cold  fixture-store fetch {cold_fs:6.2f}s   pooch+validator {cold_pooch:6.2f}s   "
        f"ratio {cold_pooch / cold_fs:5.2f}x"
    )
    print(
        f"warm  fixture-store fetch {warm_fs:6.2f}s   pooch+validator {warm_pooch:6.2f}s   "
        f"ratio {warm_pooch / warm_fs:5.2f}x"
    )


def onnx_corpus_flags() -> list[str]:
    from fixture_store.sources.package import selection_flags

    return selection_flags(onnx_corpus.WHEEL)


if __name__ == "__main__":
    main()
