"""Benchmark: ``assert_parity`` vs the hand-rolled check a maintainer writes without it.

The reference is a DINOv2-shaped NPZ (``cls_token`` 1x384, ``patch_tokens`` 1x256x384 and
``hidden`` 1x1370x1024 in float32, about 6 MiB) registered in a temporary project; the candidate
differs from it by one ULP in every element, so every array is compared element by element.

- fixture-store: ``assert_parity(name, outputs, fixtures=view)`` under ``mean_abs <= 5e-4``:
  verification (warm: the verified-state cache answers), the safe NPZ reader against the arrays
  manifest, and per array max/mean abs/rel error and max ULPs;
- by hand: ``np.load`` of the same file (no digest, no manifest) and, per array,
  ``np.testing.assert_allclose`` (which reports max abs/rel error) and
  ``np.testing.assert_array_max_ulp``, numpy's own ULP check.

Each contender runs once untimed, then ``--repeat`` times round-robin; medians are reported.

Usage: ``uv run python bench/parity_bench.py [--repeat R]``
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

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import assert_parity
from fixture_store.registry.files import write_family

NAME = "bench/dinov2_reference.npz"
SHAPES = {"cls_token": (1, 384), "patch_tokens": (1, 256, 384), "hidden": (1, 1370, 1024)}


def build(root: Path) -> tuple[Fixtures, Path, dict[str, Any]]:
    """A project holding the reference, its verified view, and a candidate one ULP away."""
    (root / "provenance").mkdir(parents=True)
    rng = np.random.default_rng(0)
    reference = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    path = root / "dinov2_reference.npz"
    np.savez(
        path,
        cls_token=reference["cls_token"],
        patch_tokens=reference["patch_tokens"],
        hidden=reference["hidden"],
    )
    store = Store.at(root / "store").ensure()
    ingest.add(store, registry_mod.load(root), path, name=NAME, kind="array")
    registry = registry_mod.load(root)
    records = dict(registry.families["bench"].records)
    raw = {**records[NAME].to_json(), "tolerance": {"metric": "mean_abs", "max": 5e-4}}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="bench")
    write_family(registry, "bench", records.values())
    candidate = {k: np.nextafter(v, np.float32(np.inf)) for k, v in reference.items()}
    return Fixtures(store, registry_mod.load(root)), path, candidate


def by_hand(path: Path, candidate: dict[str, Any]) -> None:
    with np.load(path) as npz:
        for key in npz.files:
            np.testing.assert_allclose(candidate[key], npz[key], rtol=1e-3, atol=1e-7)
            np.testing.assert_array_max_ulp(candidate[key], npz[key], maxulp=1)


def alternate(
    contenders: dict[str, Callable[[], Any]],
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds of each contender's runs: one untimed run each (imports, page cache), then
    ``repeat`` timed rounds taking them in turn, so a noisy moment touches every one alike.
    ``clock`` is wall time by default; ``time.process_time`` counts this process's CPU time
    only, which other work on a shared machine does not inflate."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for run in contenders.values():
        run()
    for _ in range(repeat):
        for label, run in contenders.items():
            start = clock()
            run()
            times[label].append(clock() - start)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        view, path, candidate = build(Path(tmp))
        contenders: dict[str, Callable[[], Any]] = {
            "assert_parity (verified, all errors + ULPs)": lambda: assert_parity(
                NAME, candidate, fixtures=view
            ),
            "np.load + assert_allclose + assert_array_max_ulp": lambda: by_hand(path, candidate),
        }
        times = alternate(contenders, args.repeat)
    medians = {k: statistics.median(v) for k, v in times.items()}
    base = medians["np.load + assert_allclose + assert_array_max_ulp"]
    elements = sum(int(np.prod(s)) for s in SHAPES.values())
    print(f"reference: {len(SHAPES)} float32 arrays, {elements:,} elements")
    for label, t in medians.items():
        spread = max(times[label]) - min(times[label])
        print(f"  {label:50s} {t * 1e3:8.1f} ms (±{spread * 1e3:.1f})  x{t / base:.2f}")


if __name__ == "__main__":
    main()
