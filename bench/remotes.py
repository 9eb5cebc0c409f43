"""Benchmark: `fixture-store push` / `pull` against boto3's transfer manager, same loopback S3.

    uv run python -m bench.remotes [--small 2000] [--large-mib 256] [--repeat 3]

moto's S3 server runs in its own process on 127.0.0.1. Each contender runs as a child process,
so its time and peak RSS (``os.wait4``) are its own; RSS is reported above a child that only
imports boto3 and fixture-store. Cases:

- many small objects (``--small`` files of 4 KiB, one tree record): fixture-store push/pull
  (8 parallel transfers) against ``upload_file`` / ``download_file`` from 8 threads;
- one large object (``--large-mib``): push (parallel parts) / pull against ``upload_file`` /
  ``download_file`` with the transfer manager's defaults (multipart, 10 threads).

Every round starts from an empty bucket (push) or an empty store / folder (pull). The ratios
are boto3's median time over fixture-store's: above 1 means fixture-store is faster. Note that
fixture-store also hashes everything it pulls and publishes it atomically; boto3 does neither.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}

# The operations, run in a child: argv[1] names one, the rest are its arguments. Each prints
# the seconds the operation took (imports excluded).
CHILD = r"""
import os, sys, time, json
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
op, endpoint, bucket, *rest = sys.argv[1:]
import boto3
from boto3.s3.transfer import TransferConfig
client = boto3.client("s3", endpoint_url=endpoint)
def fs(verb, project, store):
    from fixture_store import registry
    from fixture_store.objects.store import Store
    from fixture_store.remotes.config import RemoteSpec
    from fixture_store.remotes import open_remote, sync
    reg = registry.load(project)
    remote = open_remote(RemoteSpec("bench", f"s3://{bucket}/fs", endpoint_url=endpoint))
    plan = sync.plan(reg, reg.names())
    run = sync.push if verb == "push" else sync.pull
    report = run(Store.at(store), reg, remote, plan, jobs=8)
    assert all(r.ok for r in report.results), report.results
start = time.perf_counter()
if op == "noop":
    import fixture_store.remotes.sync
elif op in ("fs-push", "fs-pull"):
    fs(op[3:], *rest)
elif op == "boto-up-many":
    folder = Path(rest[0])
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: client.upload_file(str(folder / n), bucket, f"boto/{n}"), names))
elif op == "boto-down-many":
    folder, out = Path(rest[0]), Path(rest[1])
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    for parent in {(out / n).parent for n in names}:
        parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: client.download_file(bucket, f"boto/{n}", str(out / n)), names))
elif op == "boto-up-one":
    client.upload_file(rest[0], bucket, "boto/large", Config=TransferConfig())
elif op == "boto-down-one":
    client.download_file(bucket, "boto/large", rest[0], Config=TransferConfig())
else:
    raise SystemExit(f"unknown op {op}")
print(json.dumps(time.perf_counter() - start))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child(env: dict[str, str], *args: str) -> tuple[float, int]:
    """Run one operation in a child; its seconds and its peak RSS in KiB."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], env=env, stdout=subprocess.PIPE, cwd=REPO
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} failed with exit code {proc.returncode}")
    return float(json.loads(output)), int(usage.ru_maxrss)


def fs_cli(env: dict[str, str], project: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "fixture_store.cli", *args],
        env=env,
        cwd=project,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def make_project(work: Path, env: dict[str, str], small: int, large_mib: int) -> Path:
    """A project holding ``many`` (small files, one tree record) and ``large.bin``."""
    project = work / "project"
    (project / "provenance").mkdir(parents=True)
    many = project / "many"
    many.mkdir()
    for i in range(small):
        (many / f"f{i:06d}.bin").write_bytes(os.urandom(4096))
    with open(project / "large.bin", "wb") as f:
        for _ in range(large_mib):
            f.write(os.urandom(1 << 20))
    fs_cli(env, project, "add", "many", "--name", "bench/many", "--kind", "tree")
    fs_cli(env, project, "add", "large.bin", "--name", "bench/large", "--kind", "checkpoint")
    return project


def only(project: Path, name: str) -> Path:
    """A copy of the project with one of its two records."""
    copy = project.parent / f"project-{name}"
    if not copy.exists():
        shutil.copytree(project, copy)
        doc = json.loads((copy / "provenance" / "bench.json").read_text())
        doc["records"] = {k: v for k, v in doc["records"].items() if k == f"bench/{name}"}
        (copy / "provenance" / "bench.json").write_text(json.dumps(doc, indent=2))
    return copy


@contextlib.contextmanager
def moto_server() -> Iterator[tuple[str, Any]]:
    """moto's S3 server in its own process on 127.0.0.1: its endpoint and a boto3 client."""
    import boto3

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        for _ in range(100):
            try:
                client.list_buckets()
                break
            except Exception:
                time.sleep(0.1)
        yield endpoint, client
    finally:
        server.terminate()
        server.wait()


def bench_env(work: Path) -> dict[str, str]:
    """The environment of every contender: the bench's credentials, no user configuration."""
    env = {**os.environ, **CREDENTIALS, "FIXTURE_STORE_DIR": str(work / "store")}
    env.pop("AWS_PROFILE", None)
    env["FIXTURE_STORE_CONFIG"] = str(work / "no-config.toml")
    return env


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-remotes-"))
    env = bench_env(work)
    try:
        with moto_server() as (endpoint, client):
            project = make_project(work, env, args.small, args.large_mib)
            rows = run_cases(env, endpoint, client, work=work, project=project, repeat=args.repeat)
            print_table(rows, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


Row = tuple[str, list[tuple[float, int]], list[tuple[float, int]]]


def run_cases(
    env: dict[str, str], endpoint: str, client: Any, *, work: Path, project: Path, repeat: int
) -> list[Row]:
    base = child(env, "noop", endpoint, "none")[1]
    cases = [("many", "many", "boto-up-many", "boto-down-many"),
             ("large", "large.bin", "boto-up-one", "boto-down-one")]  # fmt: skip
    rows: list[Row] = []
    for name, data, boto_up, boto_down in cases:
        proj = only(project, name)
        samples: dict[str, list[tuple[float, int]]] = {k: [] for k in ("fp", "bp", "fl", "bl")}
        for _ in range(repeat):
            bucket = f"bench-{uuid.uuid4().hex[:10]}"
            client.create_bucket(Bucket=bucket)
            samples["fp"].append(
                child(env, "fs-push", endpoint, bucket, str(proj), env["FIXTURE_STORE_DIR"])
            )
            samples["bp"].append(child(env, boto_up, endpoint, bucket, str(project / data)))
            fresh = work / f"fresh-{bucket}"
            samples["fl"].append(child(env, "fs-pull", endpoint, bucket, str(proj), str(fresh)))
            out = work / f"out-{bucket}"
            out.mkdir()
            target = out if name == "many" else out / "large"
            args = [str(project / data), str(target)] if name == "many" else [str(target)]
            samples["bl"].append(child(env, boto_down, endpoint, bucket, *args))
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
        rows.append((f"push {name}", _above(samples["fp"], base), _above(samples["bp"], base)))
        rows.append((f"pull {name}", _above(samples["fl"], base), _above(samples["bl"], base)))
    return rows


def _above(samples: list[tuple[float, int]], base: int) -> list[tuple[float, int]]:
    return [(s, max(0, rss - base)) for s, rss in samples]


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    print(f"push/pull vs boto3 transfer manager, moto on loopback; small={args.small} x 4 KiB, "
          f"large={args.large_mib} MiB, {args.repeat} rounds (median)")  # fmt: skip
    header = f"{'case':<12} {'fixture-store s':>16} {'boto3 s':>10} {'ratio':>7} "
    header += f"{'fs RSS MiB':>11} {'boto3 RSS MiB':>14}"
    print(header)
    for case, fs, boto in rows:
        fs_t = statistics.median(t for t, _ in fs)
        bt_t = statistics.median(t for t, _ in boto)
        fs_m = max(r for _, r in fs) / 1024
        bt_m = max(r for _, r in boto) / 1024
        print(f"{case:<12} {fs_t:>16.2f} {bt_t:>10.2f} {bt_t / fs_t:>6.2f}x "
              f"{fs_m:>11.1f} {bt_m:>14.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
