"""Benchmark: ``assert_parity`` over a record of 7,500 small arrays vs the hand-rolled loop.

The reference is one NPZ of 7,500 float32 arrays of 16 elements each (``coeffs_0000`` ...),
registered in a temporary project with one pattern rule (``"coeffs_*"``) instead of 7,500
per-array entries; the candidate differs from it by one ULP in every element, so every array is
compared element by element.

- fixture-store: ``assert_parity(name, outputs, fixtures=view)`` under ``allclose`` (the
  pattern's rule): verification (warm), the safe NPZ reader against the arrays manifest, and per
  array every metric's error (max/mean abs, rms, max/mean rel, ULPs, cosine);
- by hand: ``np.load`` of the same file and ``np.testing.assert_allclose`` per array.

It prints both medians in wall time and in CPU time (this process's only: what other work on a
shared machine does not inflate), their ratios (the hand-rolled time over ``assert_parity``'s:
1.0x or more means ``assert_parity`` is at least as fast), and the registry's size per array:
the family file as written (the record with its arrays manifest and its one pattern rule).

A second row is a port's case (issue 36): 7,488 float64 arrays named as a wavelet library's
MATLAB results are (``zpd_db4_37_ma``), each ``(1, n)`` in the reference where the library
returns ``(n,)``, so every array needs ``shape: squeeze`` (one pattern rule); against a hand
loop that reshapes inline (``assert_allclose(candidate[k].reshape(ref.shape), ref)``); target
1.0x or more. Then the family file's size: bytes per array for that case (target 60 or fewer),
and for a port of 8 reference files of which 3 are over 1 MiB (target: the whole family file
under 300 KB), each beside the form fixture-store wrote before (every entry an object, ranges
for every file of 1 MiB or more).

Usage: ``uv run python bench/parity_many_bench.py [--arrays N] [--port N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.parity_bench import alternate
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import assert_parity
from fixture_store.readers import tensor_ranges
from fixture_store.registry.files import write_family

NAME = "bench/many_arrays.npz"
SIZE = 16
TOLERANCE = {
    "metric": "mean_abs",
    "max": 1e-3,
    "per_array": {"coeffs_*": {"metric": "allclose", "atol": 1e-7, "rtol": 1e-3}},
}


def build(root: Path, count: int) -> tuple[Fixtures, Path, dict[str, Any], int]:
    """A project holding the reference, its verified view, a candidate one ULP away, and the
    size in bytes of the record's registry entry."""
    (root / "provenance").mkdir(parents=True)
    rng = np.random.default_rng(0)
    reference = {
        f"coeffs_{i:04d}": rng.standard_normal(SIZE).astype(np.float32) for i in range(count)
    }
    path = root / "many_arrays.npz"
    save: Any = np.savez  # its keyword options would take an array named like them
    save(path, **reference)
    store = Store.at(root / "store").ensure()
    ingest.add(store, registry_mod.load(root), path, name=NAME, kind="array")
    registry = registry_mod.load(root)
    records = dict(registry.families["bench"].records)
    raw = {**records[NAME].to_json(), "tolerance": TOLERANCE}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="bench")
    write_family(registry, "bench", records.values())
    entry = sum(f.stat().st_size for f in (root / "provenance").rglob("*") if f.is_file())
    candidate = {k: np.nextafter(v, np.float32(np.inf)) for k, v in reference.items()}
    return Fixtures(store, registry_mod.load(root)), path, candidate, entry


def by_hand(path: Path, candidate: dict[str, Any]) -> None:
    with np.load(path) as npz:
        for key in npz.files:
            np.testing.assert_allclose(candidate[key], npz[key], rtol=1e-3, atol=1e-7)


# -- a port's case: every array under ``shape: squeeze`` ------------------------------------
PORT = "port/dwt_matlab.npz"
PORT_TOLERANCE = {
    "metric": "mean_abs",
    "max": 1e-3,
    "per_array": {
        "*_m[ad]": {"metric": "allclose", "atol": 1e-12, "rtol": 1e-7, "shape": "squeeze"}
    },
}
_MODES = ("zpd", "cpd", "sym", "ppd", "sp1", "per")
_WAVELETS = tuple(
    [f"db{i}" for i in range(1, 21)]
    + [f"sym{i}" for i in range(2, 21)]
    + [f"coif{i}" for i in range(1, 6)]
    + ["bior1.3", "bior2.2", "bior3.5", "bior4.4", "bior6.8", "rbio2.4", "dmey", "haar"]
)
_SIZES = (1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 64, 100, 128)
# The targets: family-file bytes per array of the port's case, and the whole family
# file of a port of 8 files.
PER_ARRAY_TARGET = 60
FAMILY_TARGET = 300_000


def port_names(count: int) -> list[str]:
    """Array names as a wavelet library's MATLAB results name them: mode, wavelet, length,
    approximation or detail."""
    combos = itertools.product(_MODES, _WAVELETS, _SIZES, ("ma", "md"))
    return ["_".join((m, w, str(n), part)) for m, w, n, part in itertools.islice(combos, count)]


def port_arrays(names: list[str], rng: np.random.Generator) -> dict[str, Any]:
    """Each array ``(1, n)``, ``n`` the coefficients a signal of that length gives."""
    return {k: rng.standard_normal((1, (int(k.split("_")[2]) + 9) // 2)) for k in names}


def register(root: Path, files: dict[str, dict[str, Any]], tolerance: Any) -> Fixtures:
    """A project whose family ``port`` holds one record per file (name -> arrays), each under
    ``tolerance``."""
    (root / "provenance").mkdir(parents=True, exist_ok=True)
    store = Store.at(root / "store").ensure()
    save: Any = np.savez
    for name, arrays in files.items():
        path = root / name.split("/")[-1]
        save(path, **arrays)
        ingest.add(store, registry_mod.load(root), path, name=name, kind="array")
    registry = registry_mod.load(root)
    records = dict(registry.families["port"].records)
    for name in files:
        raw = {**records[name].to_json(), "tolerance": tolerance}
        records[name] = registry_mod.parse_record(name, raw, file="port")
    write_family(registry, "port", records.values())
    return Fixtures(store, registry_mod.load(root))


def family_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in (root / "provenance").rglob("*.json") if f.is_file())


def as_before(root: Path, files: dict[str, dict[str, Any]], tolerance: Any) -> int:
    """The family file's bytes as fixture-store wrote it before the compact manifest: every
    entry an object, ranges for every file of 1 MiB or more."""
    with mock.patch.object(tensor_ranges, "MIN_MEAN_BYTES", 0):
        view = register(root, files, tolerance)
    registry = view.registry
    old = [dataclasses.replace(r, arrays_as_objects=True) for r in registry.records()]
    write_family(registry, "port", old)
    return family_bytes(root)


def by_hand_reshaping(path: Path, candidate: dict[str, Any]) -> None:
    with np.load(path) as npz:
        for key in npz.files:
            ref = npz[key]
            np.testing.assert_allclose(
                candidate[key].reshape(ref.shape), ref, rtol=1e-7, atol=1e-12
            )


def port_row(count: int, repeat: int) -> tuple[int, int]:
    """Time the port's case; return the family file's bytes now and before."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as old:
        reference = port_arrays(port_names(count), np.random.default_rng(0))
        view = register(Path(tmp), {PORT: reference}, PORT_TOLERANCE)
        path = Path(tmp) / PORT.rsplit("/", maxsplit=1)[-1]
        candidate = {k: np.nextafter(v, np.inf).reshape(-1) for k, v in reference.items()}
        parity = "assert_parity (shape: squeeze, verified)"
        hand = "np.load + reshape + assert_allclose"
        contenders: dict[str, Callable[[], Any]] = {
            parity: lambda: assert_parity(PORT, candidate, fixtures=view),
            hand: lambda: by_hand_reshaping(path, candidate),
        }
        best = {label: min(runs) for label, runs in alternate(contenders, repeat).items()}
        now = family_bytes(Path(tmp))
        before = as_before(Path(old), {PORT: reference}, PORT_TOLERANCE)
    print(
        f"port: {count:,} float64 arrays (1, n) against candidates (n,), `shape: squeeze` on each"
    )
    for label, t in best.items():
        print(f"  wall {label:42s} {t * 1e3:8.1f} ms (best of {repeat})")
    ratio = best[hand] / best[parity]
    print(
        f"  wall ratio (hand loop / assert_parity): {ratio:.2f}x, target >= 1.0x: "
        + _met(ratio >= 1.0)
    )
    per = now / count
    print(
        f"  registry: {now:,} bytes, {per:.1f} bytes per array (before: {before / count:.1f}); "
        f"target <= {PER_ARRAY_TARGET}: " + _met(per <= PER_ARRAY_TARGET)
    )
    return now, before


def eight_files_row(count: int) -> None:
    """A port of 8 reference files, 3 of them over 1 MiB, ``count`` arrays in all."""
    rng = np.random.default_rng(1)
    names = port_names(count)
    small = names[: count * 2 // 5]
    files: dict[str, dict[str, Any]] = {}
    for i in range(5):
        files[f"port/small_{i}.npz"] = port_arrays(small[i::5], rng)
    for i, part in enumerate(np.array_split(np.array(names[len(small) :]), 3)):
        # 128 to 200 float64 values each: files of 1.5-2.5 MB
        files[f"port/large_{i}.npz"] = {
            str(k): rng.standard_normal(128 + (j % 73)) for j, k in enumerate(part)
        }
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as old:
        register(Path(tmp), files, PORT_TOLERANCE)
        sizes = sorted((Path(tmp) / f.split("/")[-1]).stat().st_size for f in files)
        now = family_bytes(Path(tmp))
        before = as_before(Path(old), files, PORT_TOLERANCE)
    over = sum(s >= tensor_ranges.MIN_BYTES for s in sizes)
    largest = sizes[-1] / 1e6
    print(
        f"port of {len(files)} files ({over} of 1 MiB or more, the largest {largest:.1f} MB), "
        f"{count:,} arrays: family file {now:,} bytes ({now / count:.1f} per array), "
        f"before {before:,} ({before / count:.1f}); target < 300 KB: " + _met(now < FAMILY_TARGET)
    )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arrays", type=int, default=7500)
    ap.add_argument("--port", type=int, default=7488, help="arrays of the port's rows")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", choices=("uniform", "port"), help="one case only")
    args = ap.parse_args()
    if args.only != "uniform":
        port_row(args.port, args.repeat)
        eight_files_row(args.port)
    if args.only == "port":
        return
    with tempfile.TemporaryDirectory() as tmp:
        view, path, candidate, entry = build(Path(tmp), args.arrays)
        parity = "assert_parity (verified, every metric)"
        hand = "np.load + assert_allclose per array"
        contenders: dict[str, Callable[[], Any]] = {
            parity: lambda: assert_parity(NAME, candidate, fixtures=view),
            hand: lambda: by_hand(path, candidate),
        }
        clocks = {"wall": time.perf_counter, "cpu": time.process_time}
        times = {c: alternate(contenders, args.repeat, clock) for c, clock in clocks.items()}
        # A test session's one call: the registry loaded afresh, every rule resolved anew.
        start = time.process_time()
        fresh = Fixtures(view.store, registry_mod.load(Path(tmp)))
        assert_parity(NAME, candidate, fixtures=fresh)
        first = time.process_time() - start
    print(f"reference: {args.arrays:,} float32 arrays of {SIZE} elements, one pattern rule")
    for clock, runs in times.items():
        medians = {k: statistics.median(v) for k, v in runs.items()}
        for label, t in medians.items():
            spread = max(runs[label]) - min(runs[label])
            print(f"  {clock:4s} {label:42s} {t * 1e3:8.1f} ms (±{spread * 1e3:.1f})")
        ratio = medians[hand] / medians[parity]
        print(f"  {clock:4s} ratio (hand-rolled / assert_parity): {ratio:.2f}x")
    print(f"  cpu  first call on a freshly loaded registry: {first * 1e3:.1f} ms")
    print(f"  registry: {entry:,} bytes, {entry / args.arrays:.1f} bytes per array")


if __name__ == "__main__":
    main()
