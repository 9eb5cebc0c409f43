"""Benchmark: push and pull in packs as a project grows, with every request counted.

    uv run python -m bench.scale_remotes [--sizes 1000,10000,100000] [--members 2]

The project of ``bench.scale`` (``bench.scale.build``: one family of tree records, each with
``--members`` small members and its manifest, so ``size * (members + 1)`` objects of a few
bytes to a few hundred). For each size, in this process: ``sync.push`` of every record to an
empty prefix of moto's S3 server on loopback, then ``sync.pull`` of every record into an empty
store, both through a proxy in front of the server that counts every request (its own cost is
in the times). One object per key, as before packs, costs at least one request an object; the
target is at most 1/50 of that (``objects / requests >= 50``).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.scale import build
from fixture_store import registry
from fixture_store.objects.store import Store
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.s3 import S3Remote
from fixture_store.remotes.sync import plan, pull, push
from tests.support.s3server import FAKE_CREDENTIALS, FaultProxy, moto_server

TARGET = 50  # at most 1/50 of the requests of one object per key


def measure(work: Path, size: int, members: int, endpoint: str) -> dict[str, float]:
    """Push and pull of every record at ``size``: seconds and requests of each."""
    project, store, _ = build(work, size, members)
    reg = registry.load(project)
    the_plan = plan(reg, reg.names())
    bucket = f"scale-{uuid.uuid4().hex[:8]}"
    out: dict[str, float] = {"objects": len(the_plan.objects)}
    with FaultProxy(endpoint) as proxy:
        remote = S3Remote.connect(RemoteSpec("bench", f"s3://{bucket}/fs", endpoint_url=proxy.url))
        remote.client.create_bucket(Bucket=bucket)
        for verb in ("push", "pull"):
            target = store if verb == "push" else Store.at(work / "pulled").ensure()
            run = push if verb == "push" else pull
            proxy.faults.requests = 0
            start = time.perf_counter()
            report = run(target, reg, remote, the_plan)
            out[verb] = time.perf_counter() - start
            out[f"{verb} requests"] = proxy.faults.requests
            assert all(r.ok for r in report.results), [r for r in report.results if not r.ok][:3]
    shutil.rmtree(work)
    return out


def table(rows: dict[int, dict[str, float]]) -> str:
    head = (
        f"{'records':>8s} {'objects':>8s} {'push s':>8s} {'requests':>9s} {'pull s':>8s} "
        f"{'requests':>9s} {'objects/request':>16s} {'target':>10s}"
    )
    lines = [head, "-" * len(head)]
    for size, r in rows.items():
        worst = max(r["push requests"], r["pull requests"])
        ratio = r["objects"] / max(worst, 1)
        aim = f">={TARGET} " + ("ok" if ratio >= TARGET else "NO")
        lines.append(
            f"{size:8,d} {int(r['objects']):8,d} {r['push']:8.2f} {int(r['push requests']):9,d} "
            f"{r['pull']:8.2f} {int(r['pull requests']):9,d} {ratio:16.0f} {aim:>10s}"
        )
    lines.append(
        "objects/request: objects over the requests of the push or pull that made more (one "
        "object per key makes at least one an object); load average now "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.scale_remotes", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--members", type=int, default=2)
    args = ap.parse_args(argv)
    os.environ.update(FAKE_CREDENTIALS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    rows: dict[int, dict[str, float]] = {}
    with moto_server() as endpoint:
        for size in (int(s) for s in args.sizes.split(",")):
            work = Path(tempfile.mkdtemp(prefix="fixture-store-bench-scale-remotes-"))
            os.environ["FIXTURE_STORE_DIR"] = str(work / "store")
            rows[size] = measure(work, size, args.members, endpoint)
            print(f"  {size:,} records done", file=sys.stderr)
    print(table(rows))


if __name__ == "__main__":
    main()
