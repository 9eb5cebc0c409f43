"""Benchmark: gc of an S3 remote, packs and objects under their own key, with every request
counted.

    uv run python -m bench.remote_gc [--objects 10000] [--size 4096] [--cut-uploads 3]

``--objects`` records of one object of ``--size`` bytes each, pushed to moto's S3 server on
loopback (through a proxy that counts every request) twice: in packs (the default threshold)
and one object per key (``pack_threshold = 0``). Then, for each, ``remote gc`` (the plan, then
its execution) with the project cut to a fraction of its records: 90 % kept (the pack is kept
whole), 30 % kept (repacked), none kept (the pack deleted); one per key, 50 % kept. After each
gc every kept object is pulled into an empty store and verified. Before each gc, ``--cut-uploads``
multipart uploads are left open under the remote's prefix (a push of a large object cut after
its first part: one part of 64 KiB each), as cut pushes leave them; gc lists them (one request),
sizes each (one ListParts) and aborts each (one request).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from fixture_store import registry
from fixture_store.objects.store import Store
from fixture_store.remotes import gc as remote_gc
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.keys import keys_of
from fixture_store.remotes.packs import ONE_PER_KEY, Packing
from fixture_store.remotes.s3 import S3Remote
from fixture_store.remotes.sync import plan, pull, push
from fixture_store.verify import verify_names
from tests.support.records import local_record
from tests.support.s3server import FAKE_CREDENTIALS, FaultProxy, moto_server

# (layout, fraction of the records kept)
CASES = (("packs", 0.9), ("packs", 0.3), ("packs", 0.0), ("one per key", 0.5))


def project(work: Path, store: Store, count: int, size: int, kept: float) -> registry.Registry:
    """``count`` records (or the first ``kept`` of them), each of one object of ``size`` bytes."""
    root = work / f"project-{kept}"
    (root / "provenance").mkdir(parents=True)
    records = []
    for i in range(int(count * kept)):
        data = i.to_bytes(8, "big") * (size // 8)
        if kept == 1.0:
            store.put_bytes(data)
        records.append(local_record(f"fam/r{i:06d}", i, data=data))
    registry.write_family(registry.load(root), "fam", records)
    return registry.load(root)


def cut_uploads(remote: S3Remote, n: int) -> None:
    """``n`` multipart uploads left open under the remote's objects, one part of 64 KiB each."""
    for i in range(n):
        key = f"{remote.prefix}objects/sha256/{i:02x}/{uuid.uuid4().hex}{uuid.uuid4().hex[:30]}"
        upload = remote.client.create_multipart_upload(Bucket=remote.bucket, Key=key)["UploadId"]
        remote.client.upload_part(
            Bucket=remote.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 65536
        )


def measure(
    work: Path, count: int, size: int, endpoint: str, uploads: int
) -> list[dict[str, object]]:
    store = Store.at(work / "store").ensure()
    everything = project(work, store, count, size, 1.0)
    the_plan = plan(everything, everything.names())
    rows: list[dict[str, object]] = []
    with FaultProxy(endpoint) as proxy:
        for layout, kept in CASES:
            bucket = f"gc-{uuid.uuid4().hex[:8]}"
            spec = RemoteSpec("bench", f"s3://{bucket}/fs", endpoint_url=proxy.url)
            remote = S3Remote.connect(spec)
            remote.client.create_bucket(Bucket=bucket)
            packing = Packing() if layout == "packs" else ONE_PER_KEY
            assert all(
                r.ok for r in push(store, everything, remote, the_plan, packing=packing).results
            )
            now = project(work, store, count, size, kept)
            cut_uploads(remote, uploads)
            keys = keys_of(remote)
            assert keys is not None
            row: dict[str, object] = {"layout": layout, "kept": kept}
            proxy.faults.requests = 0
            start = time.perf_counter()
            gc_plan = remote_gc.plan(keys, remote_gc.referenced([now]), min_age=0)
            row["plan s"], row["plan requests"] = time.perf_counter() - start, proxy.faults.requests
            proxy.faults.requests = 0
            start = time.perf_counter()
            swept = remote_gc.execute(keys, gc_plan)
            row["gc s"], row["gc requests"] = time.perf_counter() - start, proxy.faults.requests
            assert swept.ok, swept.failed
            row["removed"] = len(swept.removed)
            row["aborted"] = len(swept.aborted)
            row["fates"] = ",".join(sorted({str(p.fate) for p in gc_plan.packs})) or "-"
            fresh = Store.at(work / f"pulled-{layout}-{kept}").ensure()
            pulled = pull(fresh, now, remote, plan(now, now.names()))
            assert all(r.ok for r in pulled.results)
            assert all(r.ok for r in verify_names(fresh, now, now.names()))
            rows.append(row)
            print(f"  {layout} {kept:.0%} kept done", file=sys.stderr)
    return rows


def table(count: int, size: int, rows: list[dict[str, object]]) -> str:
    head = (
        f"{'layout':>12s} {'kept':>5s} {'packs':>14s} {'plan s':>7s} {'requests':>9s} "
        f"{'gc s':>7s} {'requests':>9s} {'keys removed':>13s} {'uploads aborted':>16s}"
    )
    lines = [f"remote gc of {count:,} objects of {size:,} bytes on moto", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['layout']!s:>12s} {r['kept']:>5.0%} {r['fates']!s:>14s} {r['plan s']:7.2f} "
            f"{r['plan requests']!s:>9s} {r['gc s']:7.2f} {r['gc requests']!s:>9s} "
            f"{r['removed']!s:>13s} {r['aborted']!s:>16s}"
        )
    lines.append("load average now " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.remote_gc", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--cut-uploads", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.update(FAKE_CREDENTIALS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    with (
        moto_server() as endpoint,
        tempfile.TemporaryDirectory(prefix="fixture-store-bench-remote-gc-") as work,
    ):
        os.environ["FIXTURE_STORE_DIR"] = str(Path(work) / "store")
        rows = measure(Path(work), args.objects, args.size, endpoint, args.cut_uploads)
    print(table(args.objects, args.size, rows))


if __name__ == "__main__":
    main()
