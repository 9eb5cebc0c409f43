"""``fixture-store fetch NAME --tensor KEY [--rows START:STOP]``: one tensor of a safetensors,
NPY or NPZ reference (or rows of it), verified.

The object in the store if it is there (verified by its digest); otherwise, for a record that
carries the tensor's byte range and digests, only that range (for rows of an NPY, the chunks
that cover them) from the record's source, verified against the recorded digests
(:mod:`fixture_store.sources.ranges`). Nothing partial is stored;
``--output`` writes the verified tensor to an ``.npy`` file.
"""

from __future__ import annotations

import time
from pathlib import Path

from fixture_store.access import Fixtures
from fixture_store.cli._common import Context, out, print_json
from fixture_store.errors import UsageError
from fixture_store.registry import Registry


def fetch_tensor(
    obj: Context,
    registry: Registry,
    chosen: list[str],
    key: str,
    output: Path | None,
    *,
    as_json: bool,
    rows: tuple[int, int] | None = None,
) -> None:
    """Read and verify tensor ``key`` of the one selected record; print what was read."""
    if len(chosen) != 1:
        raise UsageError(
            f"--tensor reads one tensor of one artifact; the selection names {len(chosen)}",
            fix="fixture-store fetch NAME --tensor KEY",
        )
    name = chosen[0]
    record = registry.get(name)
    in_store = obj.store.has(record.object) if record.digest is not None else False
    started = time.perf_counter()
    fixtures = Fixtures(obj.store, registry)
    try:
        array = fixtures.tensor(name, key, rows=rows)
    finally:
        fixtures.close()
    elapsed = time.perf_counter() - started
    if output is not None:
        import numpy as np

        with output.open("wb") as f:
            np.save(f, array, allow_pickle=False)
    how = "from the store" if in_store else f"by its range from {record.source.describe()}"
    if as_json:
        doc = {
            "name": name,
            "tensor": key,
            "rows": list(rows) if rows is not None else None,
            "dtype": str(array.dtype),
            "shape": list(array.shape),
            "bytes": int(array.nbytes),
            "from": "store" if in_store else "source-range",
            "seconds": round(elapsed, 3),
            "output": str(output) if output is not None else None,
        }
        print_json(doc)
        return
    out.print(
        f"{name}: tensor {key!r}{_rows_text(rows)} ({array.dtype}, shape {list(array.shape)}, "
        f"{array.nbytes:,} bytes) read {how} and verified in {elapsed:.2f}s"
        + ("; nothing stored" if not in_store else "")
        + (f"; written to {output}" if output is not None else ""),
        markup=False,
    )


def _rows_text(rows: tuple[int, int] | None) -> str:
    return "" if rows is None else f" rows [{rows[0]}, {rows[1]})"


def parse_rows(text: str) -> tuple[int, int]:
    """``START:STOP`` as two non-negative integers, START <= STOP."""
    start, sep, stop = text.partition(":")
    if sep and start.strip().isdigit() and stop.strip().isdigit() and int(start) <= int(stop):
        return int(start), int(stop)
    raise UsageError(
        f"--rows {text!r} is not START:STOP (two non-negative integers, START <= STOP)",
        fix="fixture-store fetch NAME --tensor KEY --rows 0:128",
    )
