"""Benchmark: one 16 MiB tensor of a large safetensors reference, by range, against the whole file.

Run: uv run python bench/partial_fetch.py [--size-mib 1024] [--repeat 3]

A safetensors file of ``--size-mib`` MiB (default 1024, the most the ``1GiB`` limits profile
allows: the default profile stops at 512 MiB of tensors) holds one 16 MiB float32 tensor of
random values and zero-filled filler tensors (the file is sparse on disk). Its record is made as
``add`` makes it (whole-object digest, per-tensor ranges and digests) with a ``url`` source on a
loopback HTTPS server that honours ``Range``. Each round, from an empty store:

- ``tensor``: ``Fixtures.tensor(name, "target")`` with the object not in the store: one range
  request, the tensor's bytes verified against its digest, nothing stored;
- ``whole``: ``fetch_names`` of the record (the whole file, verified by its digest, stored),
  then ``Fixtures.tensor`` from the store.

Medians of ``--repeat`` rounds after one untimed round; the bytes the server sent per side.
"""

from __future__ import annotations

import argparse
import hashlib
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

from bench.harness import make_cert
from fixture_store import limits
from fixture_store.access import Fixtures
from fixture_store.fetch import fetch_names
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.registry import Kind
from fixture_store.registry import load as load_registry

MiB = 1024 * 1024
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
    described = content.describe(
        file, kind=Kind.CHECKPOINT, array_name="model", profile=limits.profile("1GiB")
    )
    h = hashlib.sha256()
    with file.open("rb") as f:
        while chunk := f.read(16 * MiB):
            h.update(chunk)
    record = {
        "kind": "checkpoint",
        "source": {"type": "url", "url": url},
        "digest": "sha256:" + h.hexdigest(),
        "size": file.stat().st_size,
        "media_type": described.media_type,
        "profile": "1GiB",
        "arrays": described.arrays,
    }
    (root / "provenance").mkdir(parents=True)
    doc = {"format_version": 1, "records": {"ckpt/big": record}}
    (root / "provenance" / "ckpt.json").write_text(json.dumps(doc, indent=2))


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
        server.shutdown()
        _print(args.size_mib, record_s, rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _print(size_mib: int, record_s: float, rounds: list[dict[str, tuple[float, int]]]) -> None:
    def med(side: str, i: int) -> float:
        return statistics.median(r[side][i] for r in rounds)

    print(f"file: {size_mib} MiB safetensors, one 16 MiB float32 tensor; loopback HTTPS")
    print(f"recording it (whole digest + per-tensor digests): {record_s:.2f} s")
    width = max(len(s) for s in ("tensor", "whole"))
    for side, what in (
        ("tensor", "Fixtures.tensor by range (verified, nothing stored)"),
        ("whole", "fetch the whole file (verified, stored), then Fixtures.tensor"),
    ):
        print(f"  {side:<{width}}  {med(side, 0):7.3f} s  {int(med(side, 1)):>13,} bytes  {what}")
    speedup, share = med("whole", 0) / med("tensor", 0), med("whole", 1) / med("tensor", 1)
    print(f"  speed-up {speedup:.1f}x, bytes moved 1/{share:.0f}")


if __name__ == "__main__":
    main()
