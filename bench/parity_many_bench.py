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

Usage: ``uv run python bench/parity_many_bench.py [--arrays N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.parity_bench import alternate
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import assert_parity
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arrays", type=int, default=7500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
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
