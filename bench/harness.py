"""The bench harness: contenders run as child processes side by side, rows, ratios and the table.

Shared by every bench module (``bench.run``, ``bench.safetensors``, ``bench.dvc_remotes``), so
none of them imports another's runner.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# Peak RSS is read with wait4 by this small launcher, not by the bench process: Linux carries a
# process's high-water RSS across fork and exec, so a child forked from a large parent would
# report the parent's size.
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{time.perf_counter() - start} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


# A file shared with the store has (at least) two names: its own and the object's.
LINKED = 2


@dataclass
class Sample:
    seconds: float
    rss_kib: int
    hashed_bytes: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    links: int | None = None  # the fewest hard links any source file had after the run


@dataclass
class Row:
    case: str
    contender: str
    samples: list[Sample]
    nbytes: int
    anchor: str | None = None  # the row this one is compared with, by contender name
    target: float | None = None  # the speed ratio aimed for (anchor time / this time)
    note: str = ""
    ratio: float | None = field(default=None)
    expect_linked: bool = False  # the run must leave every source file hard-linked

    @property
    def links(self) -> int | None:
        """The fewest hard links a source file had after any run (None: not checked)."""
        counts = [s.links for s in self.samples if s.links is not None]
        return min(counts) if counts else None

    @property
    def not_linked(self) -> bool:
        links = self.links
        return self.expect_linked and (links is None or links < LINKED)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def spread(self) -> tuple[float, float]:
        secs = [s.seconds for s in self.samples]
        return min(secs), max(secs)

    @property
    def peak_rss_kib(self) -> int:
        return max(s.rss_kib for s in self.samples)


# (contender, run, anchor, target) for Bench.measure_together
Entry = tuple[str, Callable[[int], Sample], str | None, float | None]


class Bench:
    def __init__(self, work: Path, repeat: int) -> None:
        self.work = work
        self.repeat = repeat
        self.rows: list[Row] = []
        self.skipped: dict[str, str] = {}
        # Users have bytecode caches; without them every run would recompile every import.
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["DVC_NO_ANALYTICS"] = "1"
        # The fetch rows use a loopback mirror; the caller's offline switch is not for them.
        for var in ("FIXTURE_STORE_OFFLINE", "HF_HUB_OFFLINE"):
            self.env.pop(var, None)
        self._warm_up()
        self.baseline_kib = statistics.median(self.child(["noop"]).rss_kib for _ in range(3))

    def _warm_up(self) -> None:
        """Write the bytecode caches of fixture-store and dvc before anything is timed."""
        scratch = self.work / "warm-up"
        repo = dvc_repo(scratch / "dvc")
        (repo / "x.bin").write_bytes(b"x")
        self.spawn([sys.executable, "-m", "dvc", "add", "-q", "x.bin"], cwd=repo)
        proj = project(scratch / "proj")
        (proj / "x.bin").write_bytes(b"x")
        self.spawn(
            self.fs(
                "--store",
                str(scratch / "store"),
                "--registry",
                str(proj),
                "add",
                str(proj / "x.bin"),
                "--name",
                "warm/x",
                "--kind",
                "fixture",
            )
        )
        self.spawn([sys.executable, "-c", "import pooch, bench.child"], cwd=REPO)
        _rmtree(scratch)

    # -- running contenders -------------------------------------------------------------------
    def spawn(
        self, cmd: Sequence[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> tuple[float, int, str]:
        """Run ``cmd`` under the launcher; return (wall seconds, peak RSS KiB, stdout).

        ``env`` adds to (or overrides) the bench's environment for this run."""
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            tempfile.NamedTemporaryFile("r") as usage,
        ):
            proc = subprocess.run(
                [sys.executable, "-S", "-c", LAUNCHER, usage.name, *cmd],
                stdout=out,
                stderr=err,
                cwd=cwd,
                env={**self.env, **(env or {})},
                check=False,
            )
            out.seek(0)
            err.seek(0)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read().decode()[-2000:]}"
                )
            wall, rss = usage.read().split()
            return float(wall), int(rss), out.read().decode()

    def child(self, args: Sequence[str]) -> Sample:
        _, rss, stdout = self.spawn([sys.executable, "-m", "bench.child", *args], cwd=REPO)
        doc = json.loads(stdout.strip().splitlines()[-1])
        return Sample(doc["seconds"], rss, doc["bytes"], doc.get("phases", {}))

    def external(
        self, cmd: Sequence[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Sample:
        wall, rss, _ = self.spawn(cmd, cwd, env)
        return Sample(wall, rss)

    def measure_together(
        self,
        case: str,
        nbytes: int,
        entries: Sequence[Entry],
        *,
        prepare: Mapping[str, Callable[[int], None]] | None = None,
        linked: Collection[str] = (),
        note: str = "measured round-robin",
    ) -> list[Row]:
        """Measure several (contender, run, anchor, target) round-robin: each repeat runs every
        contender once, so a machine that drifts during the group drifts for all of them and
        their ratios compare like with like.

        ``prepare[contender](i)`` runs untimed before that contender's run ``i`` (``-1`` for the
        discarded one); the contenders in ``linked`` must leave their sources hard-linked."""
        prepare = prepare or {}
        for name, run, _, _ in entries:
            if name in prepare:
                prepare[name](-1)
            os.sync()
            run(-1)  # one discarded run each: the first after another case pays for the switch
        samples: dict[str, list[Sample]] = {name: [] for name, _, _, _ in entries}
        for i in range(self.repeat):
            for name, run, _, _ in entries:
                if name in prepare:
                    prepare[name](i)
                # Start every run with no dirty pages: dvc and pooch leave their writes in the
                # page cache, and the next contender's fsync would pay for writing them out.
                os.sync()
                samples[name].append(run(i))
        rows = []
        for name, _, anchor, target in entries:
            row = Row(case, name, samples[name], nbytes, anchor, target, note)
            row.expect_linked = name in linked
            self.rows.append(row)
            self._report(row)
            rows.append(row)
        return rows

    def phase(
        self,
        row: Row,
        phase: str,
        contender: str,
        *,
        anchor: str | None = None,
        target: float | None = None,
    ) -> Row:
        """A row for one timed phase of another row's runs (e.g. verify without the registry
        load, as a test session that loaded the registry once sees it)."""
        samples = [Sample(s.phases[phase], s.rss_kib) for s in row.samples]
        new = Row(
            row.case, contender, samples, row.nbytes, anchor, target, f"phase of {row.contender}"
        )
        self.rows.append(new)
        self._report(new)
        return new

    def _report(self, row: Row) -> None:
        case, contender = row.case, row.contender
        links = "" if row.links is None else f"  links {row.links}"
        if row.not_linked:
            links += "  NOT LINKED: the store holds a copy"
        print(
            f"  {case:7s} {contender:46s} {row.median:8.3f} s  "
            f"({row.spread[0]:.3f}-{row.spread[1]:.3f})  "
            f"rss +{self.above(row) / 1024:6.1f} MiB{links}",
            file=sys.stderr,
            flush=True,
        )

    def above(self, row: Row) -> float:
        return max(0.0, row.peak_rss_kib - self.baseline_kib)

    def fs(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "fixture_store.cli", *args]


# -- data -------------------------------------------------------------------------------------
def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


def write_tensor(path: Path, size: int) -> None:
    """A float32 .npy file of ``size`` payload bytes, written in chunks."""
    count = size // 4
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (count,)}
        )
        left = count
        while left:
            n = min(left, 2 << 20)
            f.write(rng.standard_normal(n, dtype=np.float32).tobytes())
            left -= n


def write_small(folder: Path, count: int, size: int = 4096) -> None:
    for i in range(count):
        sub = folder / f"d{i % 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i:05d}.bin").write_bytes(os.urandom(size))


def project(path: Path) -> Path:
    (path / "provenance").mkdir(parents=True, exist_ok=True)
    return path


def dvc_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-m", "dvc", "init", "--no-scm", "-q"],
        cwd=path,
        check=True,
        env={**os.environ, "DVC_NO_ANALYTICS": "1"},
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- cases ------------------------------------------------------------------------------------
def _rmtree(path: Path) -> None:
    def writable(_f: object, p: str, _e: object) -> None:
        os.chmod(os.path.dirname(p), 0o755)
        os.chmod(p, 0o644)
        os.unlink(p)

    shutil.rmtree(path, onerror=writable)


# -- output -----------------------------------------------------------------------------------
def finish(b: Bench) -> list[Row]:
    by_key = {(r.case, r.contender): r for r in b.rows}
    for r in b.rows:
        if r.anchor is not None and (r.case, r.anchor) in by_key:
            r.ratio = by_key[(r.case, r.anchor)].median / r.median
    return b.rows


def table(b: Bench) -> str:
    head = (
        f"{'case':7s} {'contender':46s} {'median s':>9s} {'spread s':>15s} {'MB/s':>8s} "
        f"{'ratio':>7s} {'target':>10s} {'RSS+MiB':>8s}  links"
    )
    lines = [head, "-" * len(head)]
    for r in b.rows:
        lo, hi = r.spread
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        target = f">={r.target:g}x" if r.target is not None else ""
        if r.target is not None and r.ratio is not None:
            target += " ok" if r.ratio >= r.target else " NO"
        links = "" if r.links is None else str(r.links)
        if r.not_linked:
            links += " NOT LINKED: a copy, this row measures nothing it claims"
        lines.append(
            f"{r.case:7s} {r.contender:46s} {r.median:9.3f} {f'{lo:.3f}-{hi:.3f}':>15s} "
            f"{r.nbytes / r.median / 1e6:8.0f} {ratio:>7s} {target:>10s} "
            f"{b.above(r) / 1024:8.1f}  {links}"
        )
    lines.append(
        "ratio = anchor median / this median (higher is faster); "
        f"RSS above a {b.baseline_kib / 1024:.0f} MiB baseline child; "
        f"{b.repeat} runs each; links = the fewest hard links of a source file after a "
        "linking run (2: the file and the store's object)"
    )
    for case, why in b.skipped.items():
        lines.append(f"skipped {case}: {why}")
    return "\n".join(lines)


def make_cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (``cert.pem``, with ``key.pem`` beside it)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
