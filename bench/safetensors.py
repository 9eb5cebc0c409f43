"""safetensors: verified, lazy loading of a ~1 GiB file beside ``safetensors.safe_open``.

    uv run python -m bench.safetensors [--size-mib 1024] [--repeat 3] [--json out.json]
    uv run python -m bench --only safetensors      (the same rows among the others)

A file of 16 float32 tensors (random values, ``--size-mib`` of data in all) is written in a temp
folder, added to a store under the 1GiB profile and verified once, so the fixture-store rows
start from a warm verify, as every test after the first does. Each row is one child process
(time of the operation, peak RSS above a baseline child):

- ``safe_open``: ``safetensors.safe_open(path, framework="numpy")`` and ``get_tensor`` of every
  tensor (the package copies each into a new array);
- ``Fixtures.tensors``: open the registry, verify the record (warm), check the header against
  the manifest and take every tensor (each read with pread into a read-only array of its own);
- both again with every tensor summed, so each byte is touched once more;
- ``verify --full``: hashing the whole object, the price of a cold check, for scale.

Targets: >= 0.9x ``safe_open`` for loading after a warm verify. The temp folder is removed.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness
from bench.harness import Bench, Entry, Sample

NAME = "ckpt/big"
TENSORS = 16
CASE = "st"  # the table's case column is 7 wide


def write_file(path: Path, size: int) -> int:
    """A safetensors file of ``TENSORS`` float32 tensors of ``size`` data bytes in all, written
    tensor by tensor (never the whole file in memory); returns the data bytes."""
    rows = max(1, size // TENSORS // (4 * 4096))
    each = rows * 4096 * 4
    header = {
        f"layer.{i:02d}.weight": {
            "dtype": "F32",
            "shape": [rows, 4096],
            "data_offsets": [i * each, (i + 1) * each],
        }
        for i in range(TENSORS)
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for _ in range(TENSORS):
            f.write(rng.random((rows, 4096), dtype=np.float32).tobytes())
    return each * TENSORS


def case_safetensors(b: Bench, size: int) -> None:
    from fixture_store import ingest
    from fixture_store import registry as registry_mod
    from fixture_store.access import Fixtures
    from fixture_store.objects.store import Store

    root = b.work / CASE
    proj = harness.project(root / "proj")
    path = proj / "model.safetensors"
    nbytes = write_file(path, size)
    store = Store.at(root / "store")
    ingest.add(
        store,
        registry_mod.load(proj),
        path,
        name=NAME,
        kind="checkpoint",
        extra={"profile": "1GiB"},
        link=True,
    )
    Fixtures(store, registry_mod.load(proj)).check(NAME).raise_for_status()  # the warm verify
    obj = str(Fixtures(store, registry_mod.load(proj)).path(NAME))
    fs_args = [str(store.root), str(proj), NAME]

    def child(*args: str) -> Sample:
        cmd = [sys.executable, "-m", "bench.safetensors", "child", *args]
        _, rss, stdout = b.spawn(cmd, cwd=harness.REPO)
        doc = json.loads(stdout.strip().splitlines()[-1])
        return Sample(doc["seconds"], rss, doc["bytes"], doc.get("phases", {}))

    anchor = "safe_open + get_tensor (all)"
    touched = "safe_open + get_tensor (all), summed"
    entries: list[Entry] = [
        (anchor, lambda _i: child("safe_open", obj, "0"), None, None),
        (
            "Fixtures.tensors, warm verify (all)",
            lambda _i: child("fixtures", *fs_args, "0"),
            anchor,
            0.9,
        ),
        (touched, lambda _i: child("safe_open", obj, "1"), None, None),
        (
            "Fixtures.tensors, warm verify (all), summed",
            lambda _i: child("fixtures", *fs_args, "1"),
            touched,
            0.9,
        ),
        ("verify --full (hash, for scale)", lambda _i: child("full", *fs_args), anchor, None),
    ]
    b.measure_together(CASE, nbytes, entries, note="measured round-robin, page cache warm")


# -- the children: one measured operation each, one JSON line out ------------------------------
def _sum_all(arrays: dict[str, np.ndarray[Any, Any]]) -> float:
    return float(sum(float(a.sum(dtype=np.float64)) for a in arrays.values()))


def child_safe_open(path: str, touch: str) -> tuple[float, int]:
    import safetensors

    start = time.perf_counter()
    with safetensors.safe_open(path, framework="numpy") as f:
        arrays = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - not a dict
    if touch == "1":
        _sum_all(arrays)
    return time.perf_counter() - start, sum(a.nbytes for a in arrays.values())


def child_fixtures(store: str, project: str, name: str, touch: str) -> tuple[float, int]:
    from fixture_store.access import Fixtures

    start = time.perf_counter()
    fixtures = Fixtures.open(store, project)
    arrays = dict(fixtures.tensors(name).items())
    if touch == "1":
        _sum_all(arrays)
    return time.perf_counter() - start, sum(a.nbytes for a in arrays.values())


def child_full(store: str, project: str, name: str) -> tuple[float, int]:
    from fixture_store.access import Fixtures

    start = time.perf_counter()
    result = Fixtures.open(store, project, full=True).check(name)
    result.raise_for_status()
    return time.perf_counter() - start, result.hashed_bytes


CHILDREN: dict[str, Callable[..., tuple[float, int]]] = {
    "safe_open": child_safe_open,
    "fixtures": child_fixtures,
    "full": child_full,
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        seconds, nbytes = CHILDREN[argv[1]](*argv[2:])
        print(json.dumps({"seconds": seconds, "bytes": nbytes}))
        return
    ap = argparse.ArgumentParser(
        prog="python -m bench.safetensors", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--size-mib", type=int, default=1024, help="data bytes of the file (1024)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (3)")
    ap.add_argument("--json", type=Path, help="also write the rows here as JSON")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fixture-store-bench-safetensors-"))
    try:
        b = Bench(work, args.repeat)
        case_safetensors(b, args.size_mib << 20)
        harness.finish(b)
        print(harness.table(b))
        if args.json:
            rows = [
                {
                    "contender": r.contender,
                    "median": r.median,
                    "ratio": r.ratio,
                    "rss_above_baseline_kib": b.above(r),
                }
                for r in b.rows
            ]
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
    finally:
        harness._rmtree(work)


if __name__ == "__main__":
    main()
