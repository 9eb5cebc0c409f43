"""``fixture-store fetch NAME --tensor KEY [--rows START:STOP]``: one tensor of a safetensors,
NPY or NPZ reference (or rows of it), verified.

The object in the store if it is there (verified by its digest); otherwise, for a record that
carries the tensor's byte range and digests, only that range (for rows of an NPY, the chunks
that cover them), from the remotes then the record's source as a fetch tries them, verified
against the recorded digests (:mod:`fixture_store.remotes.ranges`). Nothing partial is stored;
``--output`` writes the verified tensor to an ``.npy`` file. A remote that failed before the
place that served the tensor is a warning on stderr, as in a whole fetch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fixture_store.access import Fixtures
from fixture_store.cli._common import Context, err, out, print_json
from fixture_store.errors import UsageError
from fixture_store.objects.outputs import Target
from fixture_store.registry import Registry
from fixture_store.remotes.base import Remote
from fixture_store.remotes.ranges import SpanRead


def fetch_tensor(
    obj: Context,
    registry: Registry,
    chosen: list[str],
    key: str,
    output: Target | None,
    where: tuple[Sequence[Remote], bool],
    *,
    as_json: bool,
    rows: tuple[int, int] | None = None,
) -> None:
    """Read and verify tensor ``key`` of the one selected record from the store, else from
    ``where`` (the remotes to try before the source, and whether offline); print what was read."""
    if len(chosen) != 1:
        raise UsageError(
            f"--tensor reads one tensor of one artifact; the selection names {len(chosen)}",
            fix="fixture-store fetch NAME --tensor KEY",
        )
    name = chosen[0]
    remotes, offline = where
    started = time.perf_counter()
    fixtures = Fixtures(obj.store, registry, remotes=remotes, offline=offline)
    try:
        got = fixtures.tensor_read(name, key, rows=rows)
    finally:
        fixtures.close()
    elapsed = time.perf_counter() - started
    array = got.array
    if output is not None:
        import numpy as np

        with output.writing() as f:  # the output primitive: never into the store or a link
            np.save(f, array, allow_pickle=False)
    read = got.read
    for line in read.tried if read is not None else ():
        err.print(f"warning: {name}: tried first: {line}", markup=False)
    if as_json:
        doc = {
            "name": name,
            "tensor": key,
            "rows": list(rows) if rows is not None else None,
            "dtype": str(array.dtype),
            "shape": list(array.shape),
            "bytes": int(array.nbytes),
            "from": _from(read),
            "where": read.where if read is not None else None,
            "tried": list(read.tried) if read is not None else [],
            "seconds": round(elapsed, 3),
            "output": str(output) if output is not None else None,
        }
        print_json(doc)
        return
    how = "from the store" if read is None else f"by its range from {read.where}"
    out.print(
        f"{name}: tensor {key!r}{_rows_text(rows)} ({array.dtype}, shape {list(array.shape)}, "
        f"{array.nbytes:,} bytes) read {how} and verified in {elapsed:.2f}s"
        + ("; nothing stored" if read is not None else "")
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


def _from(read: SpanRead | None) -> str:
    if read is None:
        return "store"
    return "remote-range" if read.remote else "source-range"
