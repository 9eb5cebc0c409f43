"""Benchmark: what a hostile S3 server costs ``fixture-store pull`` (peak memory and time).

Each row runs ``pull`` in a child process (its peak RSS: the child's own ``VmHWM``) against
moto on loopback behind the tests' fault proxy (``tests/support/s3server.py``), which spoils the
answers to object requests:

- ``clean``: no fault (the baseline);
- ``error body``: every object GET answered 500 with an XML error body of ``--error-mib``;
- ``lying range``: every ranged GET announces ``Content-Length: 6 GiB`` and sends
  ``--extra-mib`` of filler after the range;
- ``petabyte length``: every object GET announces ``Content-Length: 10**15`` (the right bytes);
- ``header drip``: the status line and headers of every object GET come a byte each 0.2 s,
  with ``FIXTURE_STORE_DOWNLOAD_DEADLINE=2``.

The promises (docs/remotes.md): a ranged download holds at most 7 ranges of 8 MiB; an error
body is read no further than its first 4 KiB; an object's attempts end by its deadline.

Usage: ``uv run python -m bench.hostile_bodies [--error-mib 256] [--extra-mib 256]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.remotes import REPO, bench_env, fs_cli, moto_server
from tests.support.s3server import FaultProxy, Faults

MiB = 1 << 20
LARGE_MIB = 40  # ranges of 8 MiB: five of them


# The exit each case must end with: the refusal (1) where the server's answer is unusable, the
# pulled objects (0) where it is right however it is framed.
EXPECTED_EXIT = {"clean": 0, "error body": 1, "lying range": 1, "petabyte length": 0,
                 "header drip": 1}  # fmt: skip
# The promise (docs/remotes.md): beyond what a clean pull holds, at most 7 ranges of 8 MiB (and
# a byte each) and an error body's first 4 KiB, whatever the server sends or claims.
PROMISED_EXTRA_MIB = 7 * 8 + 1


@dataclass
class Case:
    """One row: the case, pull's exit, its seconds and peak RSS, whether it printed a traceback."""

    name: str
    exit: int
    seconds: float
    peak_mib: float
    traceback: bool

    @property
    def expected_exit(self) -> bool:
        return self.exit == EXPECTED_EXIT[self.name]


# The child's own peak: VmHWM of its address space, which starts afresh at exec. (ru_maxrss from
# wait4 also counts the parent's pages the child was forked with, so it grows with the parent.)
_PEAK = """import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
        out.write(str(kib))
atexit.register(_peak)
sys.argv = ["fixture-store", *sys.argv[1:]]
runpy.run_module("fixture_store.cli", run_name="__main__")
"""


def pull(env: dict[str, str], project: Path, remote: str) -> tuple[float, int, int, str]:
    """``pull --all`` in a child: seconds, its peak RSS in KiB, exit code, its stderr."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        with open(Path(tmp) / "stderr", "w+b") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", _PEAK, "pull", "--all", "--remote", remote],
                env={**env, "BENCH_PEAK_FILE": str(peak_file)},
                cwd=project,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            err.seek(0)
            text = err.read().decode(errors="replace")
        peak = int(peak_file.read_text()) if peak_file.exists() else int(usage.ru_maxrss)
    code = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, peak, code, text


def cases(args: argparse.Namespace) -> dict[str, Callable[[Faults], None]]:
    def error_body(f: Faults) -> None:
        f.errors, f.error_size = 10**6, args.error_mib * MiB

    def lying_range(f: Faults) -> None:
        f.announce, f.extra = 6 << 30, args.extra_mib * MiB

    def petabyte(f: Faults) -> None:
        f.announce = 10**15

    def drip(f: Faults) -> None:
        f.drip_headers = 0.2

    return {
        "clean": lambda _f: None,
        "error body": error_body,
        "lying range": lying_range,
        "petabyte length": petabyte,
        "header drip": drip,
    }


def measure(error_mib: int, extra_mib: int, large_mib: int = LARGE_MIB) -> list[Case]:
    """Every case of :func:`cases` against moto behind the fault proxy, in a temporary folder."""
    spoilers = cases(argparse.Namespace(error_mib=error_mib, extra_mib=extra_mib))
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-bodies-"))
    env = bench_env(work)
    found = []
    try:
        with moto_server() as (endpoint, client):
            project = work / "project"
            (project / "provenance").mkdir(parents=True)
            (project / "small.bin").write_bytes(os.urandom(64 * 1024))
            with open(project / "large.bin", "wb") as f:
                for _ in range(large_mib):
                    f.write(os.urandom(MiB))
            fs_cli(env, project, "add", "small.bin", "--name", "bench/small", "--kind", "fixture")
            fs_cli(
                env, project, "add", "large.bin", "--name", "bench/large", "--kind", "checkpoint"
            )
            client.create_bucket(Bucket="hostile")
            remote = "s3://hostile/x"
            fs_cli(
                {**env, "AWS_ENDPOINT_URL": endpoint}, project, "push", "--all", "--remote", remote
            )
            for name, spoil in spoilers.items():
                with FaultProxy(endpoint) as proxy:
                    spoil(proxy.faults)
                    run_env = {
                        **env,
                        "AWS_ENDPOINT_URL": proxy.url,
                        "FIXTURE_STORE_DIR": str(work / f"store-{name.replace(' ', '-')}"),
                    }
                    if name == "header drip":
                        run_env["FIXTURE_STORE_DOWNLOAD_DEADLINE"] = "2"
                    seconds, rss, code, err = pull(run_env, project, remote)
                found.append(Case(name, code, seconds, rss / 1024, "Traceback" in err))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return found


def bound_mib(found: list[Case]) -> float:
    """The promised peak of every case: the clean pull's, plus :data:`PROMISED_EXTRA_MIB`."""
    clean = next(c for c in found if c.name == "clean")
    return clean.peak_mib + PROMISED_EXTRA_MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--error-mib", type=int, default=256)
    parser.add_argument("--extra-mib", type=int, default=256)
    args = parser.parse_args()
    found = measure(args.error_mib, args.extra_mib)
    print(f"pull of a {LARGE_MIB} MiB and a 64 KiB object from a hostile S3 server (moto)")
    print(f"{'case':<18} {'exit':>4} {'seconds':>8} {'peak RSS':>10}")
    for c in found:
        print(f"{c.name:<18} {c.exit:>4} {c.seconds:>8.1f} {c.peak_mib:>7.0f} MiB")
    print(
        f"promised peak: the clean pull's + {PROMISED_EXTRA_MIB} MiB = {bound_mib(found):.0f} MiB"
    )


if __name__ == "__main__":
    os.chdir(REPO)
    main()
