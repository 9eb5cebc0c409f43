"""Faults: writers killed with SIGKILL at random points (fetching, putting, extracting, pulling),
a full disk, eight concurrent writers.

After every fault the store must show no partial object, hold no lock that blocks the next writer,
and verify clean with ``full`` hashing once the interrupted work is redone.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from fixture_store import registry as registry_mod
from fixture_store.errors import StoreError
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from fixture_store.remotes.folder import FolderRemote
from fixture_store.sources import FetchContext, fetch_record
from fixture_store.verify import Status, verify_names
from tests.support import crash_child

ROOT = Path(__file__).resolve().parent.parent
FAST_TRIALS = int(os.environ.get("FIXTURE_STORE_CRASH_TRIALS", "10"))
SLOW_TRIALS = int(os.environ.get("FIXTURE_STORE_CRASH_TRIALS_SLOW", "100"))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Blobs of several sizes, an archive of some of them, and its manifest."""
    folder = tmp_path_factory.mktemp("crash-work")
    rng = random.Random(6)
    members: dict[str, bytes] = {}
    for i, size in enumerate([0, 1, 4096, 300_000, 1_500_000, 3_000_000]):
        data = rng.randbytes(size)
        (folder / f"blob-{i}").write_bytes(data)
        if size < 2_000_000:
            members[f"m/{i}.bin"] = data
    archives.write_tar(members, folder / "archive.tar.zst", "zstd")
    (folder / "manifest.json").write_text(
        json.dumps(
            {k: {"digest": digests.of_bytes(v).text, "size": len(v)} for k, v in members.items()}
        )
    )
    # What the fetch phase brings in through the local source: two files and a tree.
    fetched: dict[str, dict[str, object]] = {}
    for i, size in enumerate([200_000, 2_000_000]):
        data = rng.randbytes(size)
        (folder / f"fetch-{i}").write_bytes(data)
        d = digests.of_bytes(data)
        fetched[f"fetched/file-{i}"] = {
            "kind": "fixture",
            "digest": d.text,
            "size": d.size,
            "source": {"type": "local", "path": f"fetch-{i}"},
        }
    tree_dir = folder / "tree-src"
    tree_dir.mkdir()
    for i in range(3):
        (tree_dir / f"t{i}.bin").write_bytes(rng.randbytes(100_000 * (i + 1)))
    tree, _ = trees.hash_folder(tree_dir)
    fetched["fetched/tree"] = {
        "kind": "tree",
        "digest": tree.digest.text,
        "size": tree.digest.size,
        "members": trees.to_json(tree),
        "source": {"type": "local", "path": "tree-src"},
    }
    (folder / "provenance").mkdir()
    (folder / "provenance" / "fetched.json").write_text(
        registry_mod.dumps({"format_version": 1, "records": fetched})
    )
    _pull_remote(folder / "pull", rng)
    return folder


def _pull_remote(folder: Path, rng: random.Random) -> None:
    """What the pull phase brings in: records of many small objects and a large one, all held
    by the folder remote ``remote`` (written there as any push would leave them)."""
    remote = FolderRemote("crash", folder / "remote")
    pulled: dict[str, dict[str, object]] = {}
    for i, size in enumerate([*(rng.randrange(1000, 8000) for _ in range(200)), 1_000_000]):
        data = rng.randbytes(size)
        d = digests.of_bytes(data)
        remote.path(d).parent.mkdir(parents=True, exist_ok=True)
        remote.path(d).write_bytes(data)
        pulled[f"pulled/p{i:03d}"] = {
            "kind": "fixture",
            "digest": d.text,
            "size": d.size,
            "source": {"type": "local", "path": f"data/p{i:03d}"},
        }
    (folder / "provenance").mkdir(parents=True)
    (folder / "provenance" / "pulled.json").write_text(
        registry_mod.dumps({"format_version": 1, "records": pulled})
    )


def _child(store: Path, work: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.support.crash_child", str(store), str(work), *extra]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[str, str]:
    """Wait for the child; its output after 'ready' (read through the same buffered pipe)."""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait(timeout=timeout)
    return out, err


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line


def _registry(root: Path, work: Path) -> registry_mod.Registry:
    records = {}
    for blob in [*sorted(work.glob("blob-*")), work / "archive.tar.zst"]:
        d = digests.of_file(blob)
        records[f"crash/{blob.name}"] = {
            "kind": "fixture",
            "digest": d.text,
            "size": d.size,
            "source": {"type": "local", "path": blob.name},
        }
    # An archive's record carries the manifest its content is verified against.
    records["crash/archive.tar.zst"].update(
        media_type="application/zstd",
        members=json.loads((work / "manifest.json").read_text()),
    )
    (root / "provenance").mkdir(parents=True, exist_ok=True)
    (root / "provenance" / "crash.json").write_text(
        registry_mod.dumps({"format_version": 1, "records": records})
    )
    shutil.copyfile(work / "provenance" / "fetched.json", root / "provenance" / "fetched.json")
    pulled = work / "pull" / "provenance" / "pulled.json"
    shutil.copyfile(pulled, root / "provenance" / "pulled.json")
    return registry_mod.load(root)


def _expected_objects(work: Path) -> set[str]:
    files = [
        *work.glob("blob-*"),
        *work.glob("fetch-*"),
        *(work / "tree-src").iterdir(),
        work / "archive.tar.zst",
    ]
    tree, _ = trees.hash_folder(work / "tree-src")
    pulled = {d.hex for r in registry_mod.load(work / "pull").records() if (d := r.digest)}
    return {digests.of_file(p).hex for p in files} | {tree.digest.hex} | pulled


def _manifest(work: Path) -> dict[str, digests.Digest]:
    return {
        k: digests.parse(v["digest"], v["size"])
        for k, v in json.loads((work / "manifest.json").read_text()).items()
    }


def check_store_clean(store: Store, work: Path, project: Path) -> None:
    """No partial object, no blocking lock, full verification clean after redoing the work."""
    for hexpart, path in store.iter_objects():
        assert digests.of_file(path).hex == hexpart, f"partial object visible: {path}"
    archive_digest = digests.of_file(work / "archive.tar.zst")
    folder = archives.extraction_path(store, archive_digest)
    if folder.exists():
        # An extraction is renamed into place only when complete: a visible one passes.
        members = archives.check_extraction(
            store, work / "archive.tar.zst", _manifest(work), archive_digest=archive_digest
        )
        assert members == folder / archives.MEMBERS
    # No lock the dead writer held blocks anyone (flock dies with its holder).
    for lock_path in (store.root / "locks").glob("*.lock"):
        lock = FileLock(str(lock_path), timeout=5)
        lock.acquire()
        lock.release()
    # The next writer completes the interrupted work (pytest-timeout bounds it).
    crash_child.run(store, work)
    archives.check_extraction(
        store, work / "archive.tar.zst", _manifest(work), archive_digest=archive_digest
    )
    registry = _registry(project, work)
    results = verify_names(store, registry, registry.names(), full=True, workers=2)
    assert [r.status for r in results] == [Status.VERIFIED] * len(results), results
    assert {h for h, _ in store.iter_objects()} == _expected_objects(work)


PHASES = ("fetch", "put", "extract", "pull")


def _read_until_phase(proc: subprocess.Popen[str], phase: str) -> bool:
    """Read the child's announcements until it starts ``phase``; False if it ended first."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line or line.strip() == "done":
            return False
        if line.split() == ["phase", phase]:
            return True


def _phase_spans(tmp_path: Path, work: Path) -> dict[str, float]:
    """How long each phase takes here (the shortest of two uninterrupted runs)."""
    runs = []
    for i in range(2):
        proc = _child(tmp_path / f"phase-calibration-{i}", work)
        _wait_ready(proc)
        assert proc.stdout is not None
        marks: dict[str, float] = {}
        for line in proc.stdout:
            words = line.split()
            if words[:1] == ["phase"] or words == ["done"]:
                marks[words[-1]] = time.monotonic()
        proc.wait(timeout=120)
        assert proc.returncode == 0
        ends = [*PHASES[1:], "done"]
        runs.append({p: marks[end] - marks[p] for p, end in zip(PHASES, ends, strict=True)})
    return {p: min(r[p] for r in runs) for p in PHASES}


def _aimed_kill_trials(
    tmp_path: Path,
    work: Path,
    trials: int,
    seed: int,
    *,
    within: tuple[float, float] = (0.05, 0.6),
    any_phase: bool = False,
) -> Counter[str]:
    """Kill a writer ``trials`` times, each aimed at one phase (in turn, or with ``any_phase``
    one drawn at random): the kill lands at a random instant of ``within`` (fractions) of that
    phase's calibrated span, once the child has announced it. Aiming per phase gives a short
    phase (put: a few objects) its share of kills, which one instant drawn over the whole run
    (mostly pull) does not."""
    spans = _phase_spans(tmp_path, work)
    rng = random.Random(seed)
    phases: Counter[str] = Counter()
    for trial in range(trials):
        target = rng.choice(PHASES) if any_phase else PHASES[trial % len(PHASES)]
        store_root = tmp_path / f"store-{trial}"
        proc = _child(store_root, work)
        _wait_ready(proc)
        if _read_until_phase(proc, target):
            time.sleep(rng.uniform(*within) * spans[target])
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        out, _ = _finish(proc)
        said = [line.split()[1] for line in out.splitlines() if line.startswith("phase ")]
        phases[(said[-1] if said else target) if killed else "finished"] += 1
        check_store_clean(Store.at(store_root), work, tmp_path / f"project-{trial}")
    return phases


@pytest.mark.timeout(600)
def test_sigkill_during_put_and_extract_leaves_the_store_clean(
    tmp_path: Path, work: Path, campaign_summary: list[str]
) -> None:
    phases = _aimed_kill_trials(tmp_path, work, FAST_TRIALS, seed=1)
    campaign_summary.append(f"crash trials: {FAST_TRIALS}, kills by phase: {dict(phases)}")
    assert FAST_TRIALS - phases["finished"] >= FAST_TRIALS // 3
    aimed = {PHASES[trial % len(PHASES)] for trial in range(FAST_TRIALS)}
    assert all(phases[p] > 0 for p in aimed), phases


# The slow campaign's trials in parts of their own seeds, so that the parts run beside each other
# under xdist: the same number of kills in all, a quarter of the wall time on each worker.
SLOW_PARTS = 4


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("part", range(SLOW_PARTS))
def test_sigkill_trials_slow(
    tmp_path: Path, work: Path, part: int, campaign_summary: list[str]
) -> None:
    trials = SLOW_TRIALS // SLOW_PARTS + (part < SLOW_TRIALS % SLOW_PARTS)
    phases = _aimed_kill_trials(
        tmp_path, work, trials, seed=2 + part, within=(0.0, 1.0), any_phase=True
    )
    campaign_summary.append(f"crash trials: {trials}, kills by phase: {dict(phases)}")
    assert trials - phases["finished"] >= trials // 2, phases
    assert all(phases[p] > 0 for p in ("fetch", "put", "extract")), phases


def test_eight_concurrent_writers_all_succeed_with_one_copy_each(
    tmp_path: Path, work: Path
) -> None:
    _eight_writers(tmp_path, work)


@pytest.mark.slow
def test_eight_concurrent_writers_repeated(
    tmp_path: Path, work: Path, campaign_summary: list[str]
) -> None:
    runs = int(os.environ.get("FIXTURE_STORE_CONCURRENCY_RUNS", "5"))
    for run in range(runs):
        _eight_writers(tmp_path / f"run-{run}", work)
    campaign_summary.append(f"concurrency runs: {runs} x 8 writers")


def _eight_writers(tmp_path: Path, work: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store_root = tmp_path / "shared-store"
    go = tmp_path / "go"
    procs = [_child(store_root, work, str(go)) for _ in range(8)]
    for p in procs:
        _wait_ready(p)
    go.touch()
    outcomes = [_finish(p) for p in procs]
    for p, (out, err) in zip(procs, outcomes, strict=True):
        assert p.returncode == 0, err
        assert out.split() == [*(w for p in PHASES for w in ("phase", p)), "done"]
        assert err == ""
    store = Store.at(store_root)
    assert list(store.tmp_dir.iterdir()) == []
    check_store_clean(store, work, tmp_path / "project")


# -- disk full ---------------------------------------------------------------------------------
@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"disk-full test needs a small tmpfs and mounting one failed "
            f"(needs root or CAP_SYS_ADMIN): {done.stderr.strip()}"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.smoke
def test_disk_full_gives_a_clear_error_and_no_corrupt_object(tmp_path: Path, work: Path) -> None:
    with small_tmpfs(tmp_path / "small") as small:
        store = Store.at(small / "store").ensure()
        small_blob = store.write_file(work / "blob-2").digest
        with pytest.raises(StoreError) as info:
            store.write_file(work / "blob-4")  # 1.5 MB into a 1 MiB filesystem
        assert "no space left" in str(info.value)
        assert "nothing was stored" in str(info.value)
        assert not store.has(digests.of_file(work / "blob-4"))
        assert [h for h, _ in store.iter_objects()] == [small_blob.hex]
        assert list(store.tmp_dir.iterdir()) == []

        # fetch goes through the same door: a clear error, nothing half-stored.
        big = registry_mod.load(work).get("fetched/file-1")
        with pytest.raises(StoreError) as info:
            fetch_record(FetchContext(store, work), big)
        assert "no space left" in str(info.value)
        assert big.digest is not None and not store.has(big.digest)
        assert list(store.tmp_dir.iterdir()) == []

        archive = work / "archive.tar.zst"
        with pytest.raises(StoreError) as info:
            archives.extract(store, archive, _manifest(work))
        assert "no space left" in str(info.value)
        assert not archives.extraction_path(store, digests.of_file(archive)).exists()
        assert list(store.tmp_dir.iterdir()) == []
        for hexpart, path in store.iter_objects():
            assert digests.of_file(path).hex == hexpart


def test_clean_tmp_removes_orphans_but_not_a_live_writers_files(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    live_file = store.tmp_dir / "put-live"
    live_file.write_bytes(b"being written")
    live_dir = store.tmp_dir / "extract-live"
    (live_dir / "members").mkdir(parents=True)
    (live_dir / "members" / "a.bin").write_bytes(b"x")
    assert store.clean_tmp() == 0
    assert live_file.exists() and live_dir.exists()
    old = time.time() - 2 * 3600
    for p in (live_file, live_dir, live_dir / "members", live_dir / "members" / "a.bin"):
        os.utime(p, (old, old))
    assert store.clean_tmp() == 2
    assert list(store.tmp_dir.iterdir()) == []


def test_orphans_of_killed_writers_are_invisible_and_collectable(
    tmp_path: Path, work: Path
) -> None:
    store_root = tmp_path / "store"
    # The store exists before the writers start: a kill that lands before a child has created
    # it would otherwise leave no tmp/ folder to inspect.
    Store.at(store_root).ensure()
    for delay in (0.05, 0.1, 0.2):
        proc = _child(store_root, work)
        _wait_ready(proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    store = Store.at(store_root)
    for hexpart, path in store.iter_objects():
        assert digests.of_file(path).hex == hexpart
    store.clean_tmp(older_than=0)
    assert list(store.tmp_dir.iterdir()) == []
    check_store_clean(store, work, tmp_path / "project")
