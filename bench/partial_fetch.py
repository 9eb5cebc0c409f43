"""Benchmark: one 16 MiB tensor of a large safetensors reference, by range, against the whole file.

Run: uv run python bench/partial_fetch.py [--size-mib 1024] [--repeat 3] [--no-s3]

A safetensors file of ``--size-mib`` MiB (default 1024, the most the ``1GiB`` limits profile
allows: the default profile stops at 512 MiB of tensors) holds one 16 MiB float32 tensor of
random values and zero-filled filler tensors (the file is sparse on disk). Its record is made as
``add`` makes it (whole-object digest, per-tensor ranges and digests) with a ``url`` source on a
loopback HTTPS server that honours ``Range``. Each round, from an empty store:

- ``tensor``: ``Fixtures.tensor(name, "target")`` with the object not in the store: one range
  request, the tensor's bytes verified against its digest, nothing stored;
- ``whole``: ``fetch_names`` of the record (the whole file, verified by its digest, stored),
  then ``Fixtures.tensor`` from the store.

Then from an S3 remote (moto's server in its own process on loopback; the object pushed there by
the S3 remote's own upload), each round:

- ``s3 tensor``: ``Fixtures.tensor`` with that remote (the remotes come before the source, as
  in a fetch): one ``GetObject`` with ``Range``, verified against the tensor's digest, nothing
  stored;
- ``s3 whole``: boto3's ``download_file`` of the object as one GET (a multipart threshold above
  its size; nothing verified), the baseline a script that fetches the file would use;
- ``s3 parts``: ``download_file`` as it comes (8 MiB ranged parts, 10 at a time).

moto reads the whole object from its own storage for every ranged GET: the tensor's side there
carries a cost of the file's size that a real S3 does not (the bytes on the wire are the
tensor's alone), and ``s3 parts`` pays it once per part, which is why it is far slower than one
GET here; against a real S3 the parts are the faster way to fetch the file.

Why not 2 GiB: the largest limits profile (``1GiB``) bounds a record's tensors at 1 GiB, so no
record can describe a 2 GiB safetensors file with its arrays and their ranges; the bench stops at
the largest file a record can describe. The range read does not depend on the file's size (one
request of the tensor's bytes): run it at ``--size-mib 512`` and ``1024`` to see the tensor's
side stay flat while the whole file's doubles.

Medians of ``--repeat`` rounds after one untimed round; the bytes the server sent per side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import statistics
import struct
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from boto3.s3.transfer import TransferConfig

from bench.harness import make_cert
from bench.remotes import CREDENTIALS, moto_server
from fixture_store import limits
from fixture_store.access import Fixtures
from fixture_store.fetch import fetch_names
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.registry import Kind
from fixture_store.registry import load as load_registry
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.s3 import S3Remote

MiB = 1024 * 1024
# boto3's download_file as one GET: a multipart threshold above any file of the bench
ONE_GET = TransferConfig(multipart_threshold=64 * 1024 * MiB)
TARGET = (64, 65536)  # float32: 16 MiB
ROW = 65536  # filler rows of uint8, within the 65,536 dimension bound


def write_file(path: Path, size_mib: int) -> bytes:
    """The sparse safetensors file; returns the target tensor's bytes."""
    target = np.random.default_rng(0).standard_normal(TARGET, dtype=np.float32).tobytes()
    filler = size_mib * MiB - len(target)
    # fillers of at most 256 MiB each (the default profile's tensor bound), whole rows
    header: dict[str, Any] = {}
    begin = 0
    for i, rows in enumerate(_chunks(filler // ROW, 256 * MiB // ROW)):
        end = begin + rows * ROW
        header[f"filler{i}"] = {"dtype": "U8", "shape": [rows, ROW], "data_offsets": [begin, end]}
        begin = end
    header["target"] = {
        "dtype": "F32",
        "shape": list(TARGET),
        "data_offsets": [begin, begin + len(target)],
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.seek(8 + len(raw) + begin)  # the fillers stay holes: zeros
        f.write(target)
    return target


def _chunks(total: int, most: int) -> list[int]:
    return [min(most, total - i) for i in range(0, total, most)]


def serve(file: Path, folder: Path) -> tuple[ThreadingHTTPServer, str, list[int]]:
    """A loopback HTTPS server of ``file`` that honours ``Range``; the bytes it sent."""
    sent: list[int] = []
    size = file.stat().st_size

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
            first, last = (int(m[1]), int(m[2])) if m else (0, size - 1)
            self.send_response(206 if m else 200)
            if m:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            with file.open("rb") as f:
                f.seek(first)
                left = last - first + 1
                while left:
                    chunk = f.read(min(4 * MiB, left))
                    self.wfile.write(chunk)
                    left -= len(chunk)
            sent.append(last - first + 1)

    cert, key = make_cert(folder)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["SSL_CERT_FILE"] = str(cert)
    return server, f"https://127.0.0.1:{server.server_address[1]}/model.safetensors", sent


def project(root: Path, file: Path, url: str) -> None:
    """A registry whose one record is ``file`` behind ``url``, made as ``add`` makes it."""
    url_project(root, file, url, "ckpt/big", kind=Kind.CHECKPOINT, array_name="model")


def url_project(
    root: Path, file: Path, url: str, name: str, *, kind: Kind, array_name: str
) -> float:
    """A registry whose one record ``name`` is ``file`` behind ``url``, described as ``add``
    describes it (under the 1GiB profile, its tensor, chunk or member ranges with it); the
    seconds the describing took."""
    started = time.perf_counter()
    described = content.describe(
        file, kind=kind, array_name=array_name, profile=limits.profile("1GiB")
    )
    took = time.perf_counter() - started
    record = {
        "kind": kind.value,
        "source": {"type": "url", "url": url},
        "digest": digests.of_file(file).text,
        "size": file.stat().st_size,
        "media_type": described.media_type,
        "profile": "1GiB",
        "arrays": described.arrays,
    }
    (root / "provenance").mkdir(parents=True)
    doc = {"format_version": 1, "records": {name: record}}
    family = name.split("/", 1)[0]
    (root / "provenance" / f"{family}.json").write_text(json.dumps(doc, indent=2))
    return took


def round_(
    root: Path, store_dir: Path, sent: list[int], target: bytes
) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    for side, run in (("tensor", _partial), ("whole", _whole)):
        shutil.rmtree(store_dir, ignore_errors=True)
        sent.clear()
        started = time.perf_counter()
        got = run(root, store_dir)
        out[side] = (time.perf_counter() - started, sum(sent))
        assert got.tobytes() == target, side
    return out


def _partial(root: Path, store_dir: Path) -> np.ndarray[Any, Any]:
    fixtures = Fixtures(Store.at(store_dir), load_registry(root))
    return fixtures.tensor("ckpt/big", "target")


def _whole(root: Path, store_dir: Path) -> np.ndarray[Any, Any]:
    store, registry = Store.at(store_dir), load_registry(root)
    report = fetch_names(store, registry, ["ckpt/big"])
    assert report.results[0].ok, report.results[0].message
    return Fixtures(store, registry).tensor("ckpt/big", "target")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="file size in MiB (1024)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (3)")
    parser.add_argument("--no-s3", action="store_true", help="leave out the S3 remote's rows")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-partial-"))
    try:
        file = work / "model.safetensors"
        target = write_file(file, args.size_mib)
        server, url, sent = serve(file, work)
        made = time.perf_counter()
        project(work / "p", file, url)
        record_s = time.perf_counter() - made
        rounds: list[dict[str, tuple[float, int]]] = []
        for i in range(args.repeat + 1):
            result = round_(work / "p", work / "store", sent, target)
            if i:
                rounds.append(result)
        if not args.no_s3:
            for i, result in enumerate(s3_rounds(work, file, target, args.repeat + 1)):
                if i:
                    rounds[i - 1].update(result)
        server.shutdown()
        _print(args.size_mib, record_s, rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def s3_rounds(work: Path, file: Path, target: bytes, count: int) -> list[dict[str, Any]]:
    """``count`` rounds of the S3 remote's sides: the tensor by one ranged GET through the
    library, the whole object by boto3's ``download_file``."""
    os.environ.update(CREDENTIALS)
    os.environ["FIXTURE_STORE_CONFIG"] = str(work / "no-config.toml")
    rounds: list[dict[str, Any]] = []
    with moto_server() as (endpoint, client):
        client.create_bucket(Bucket="bench")
        spec = RemoteSpec("bench", "s3://bench/fx", endpoint_url=endpoint)
        remote = S3Remote.connect(spec)
        registry = load_registry(work / "p")
        digest = registry.get("ckpt/big").object
        pushed = time.perf_counter()
        assert remote.upload(file, digest)
        push_s = time.perf_counter() - pushed
        for _ in range(count):
            out: dict[str, Any] = {"s3 push": (push_s, digest.size)}
            store_dir = work / "store"
            shutil.rmtree(store_dir, ignore_errors=True)
            started = time.perf_counter()
            fixtures = Fixtures(Store.at(store_dir), registry, remotes=(remote,))
            got = fixtures.tensor_read("ckpt/big", "target")
            out["s3 tensor"] = (time.perf_counter() - started, len(target))
            assert got.array.tobytes() == target
            assert got.read is not None
            assert got.read.remote
            assert not fixtures.store.has(digest)
            whole = work / "downloaded.safetensors"
            for side, config in (("s3 whole", ONE_GET), ("s3 parts", None)):
                started = time.perf_counter()
                client.download_file("bench", remote.key(digest), str(whole), Config=config)
                out[side] = (time.perf_counter() - started, whole.stat().st_size)
                whole.unlink()
            rounds.append(out)
    return rounds


def _print(size_mib: int, record_s: float, rounds: list[dict[str, tuple[float, int]]]) -> None:
    def med(side: str, i: int) -> float:
        return statistics.median(r[side][i] for r in rounds)

    print(f"file: {size_mib} MiB safetensors, one 16 MiB float32 tensor; loopback")
    print(f"recording it (whole digest + per-tensor digests): {record_s:.2f} s")
    sides = [
        ("tensor", "HTTPS: Fixtures.tensor by range (verified, nothing stored)"),
        ("whole", "HTTPS: fetch the whole file (verified, stored), then Fixtures.tensor"),
        (
            "s3 tensor",
            "S3 remote: Fixtures.tensor by one ranged GetObject (verified, nothing stored)",
        ),
        ("s3 whole", "S3 remote: boto3 download_file, one GET of the object (not verified)"),
        ("s3 parts", "S3 remote: boto3 download_file as it comes, 8 MiB ranged parts"),
    ]
    sides = [(side, what) for side, what in sides if side in rounds[0]]
    width = max(len(s) for s, _ in sides)
    for side, what in sides:
        print(f"  {side:<{width}}  {med(side, 0):7.3f} s  {int(med(side, 1)):>13,} bytes  {what}")
    pairs = [
        ("HTTPS", "tensor", "whole"),
        ("S3, one GET", "s3 tensor", "s3 whole"),
        ("S3, parts", "s3 tensor", "s3 parts"),
    ]
    for label, part, whole in pairs:
        if part in rounds[0]:
            speedup, share = med(whole, 0) / med(part, 0), med(whole, 1) / med(part, 1)
            print(f"  {label}: speed-up {speedup:.1f}x, bytes moved 1/{share:.0f}")
    if "s3 push" in rounds[0]:
        print(f"  (the object's push to the S3 remote, once: {rounds[0]['s3 push'][0]:.1f} s)")


if __name__ == "__main__":
    main()
