"""The run log: which parity assertions ran in which environment, and whether they held.

Every :func:`~fixture_store.parity.assertion.assert_parity` given an environment (the pytest
plugin always gives one) appends one JSON line to ``<store>/state/parity-runs.jsonl``: the
record, the digest of its reference, the environment, the expectation that judged it (``""``:
the record's own rule), the outcome and the time. The file is the user's, outside any git
checkout (the store's ``state`` folder, beside the verified-state cache): it is evidence for
``fixture-store expectations``, never registry data. Deleting it forgets the runs, nothing else.
A line that does not parse is counted, not used (:func:`read`).

The log is bounded: an append that finds it at :data:`LOG_CAP` bytes first renames it to
``parity-runs.1.jsonl`` (replacing the generation before), so the two files hold at most about
twice that (~130,000 runs). :func:`read` streams both, oldest first, one line at a time through
the bounded JSON reader: a line longer than :data:`LINE_CAP` or nested past its bound is
counted as unparsable, never held whole; of a file larger than the cap (written before the
cap), only its last :data:`LOG_CAP` bytes are read.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

from fixture_store import bounded_json
from fixture_store.errors import UsageError
from fixture_store.objects import anchored
from fixture_store.objects.store import Store
from fixture_store.registry.environment import Environment

LOG = "parity-runs.jsonl"
OLDER = "parity-runs.1.jsonl"  # the generation before, kept by one rotation
LOG_CAP = 16 * bounded_json.MiB  # the size at which an append rotates the log
LINE_CAP = 64 * bounded_json.KiB  # a run is a few hundred bytes; a longer line is not one
_FIELDS = ("record", "digest", "environment", "rule", "ok", "arrays", "at")


@dataclass(frozen=True)
class Run:
    """One parity assertion as the log keeps it."""

    record: str
    digest: str
    environment: str
    rule: str
    ok: bool
    arrays: int
    at: str = ""

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()

    @classmethod
    def of(cls, raw: Any) -> Run | None:
        if not isinstance(raw, dict) or set(raw) != set(_FIELDS):
            return None
        run = cls(**raw)
        text = (run.record, run.digest, run.environment, run.rule, run.at)
        if not all(isinstance(v, str) for v in text) or not isinstance(run.ok, bool):
            return None
        if not isinstance(run.arrays, int):
            return None
        try:  # a hand-edited environment that does not parse is not evidence
            Environment.parse(run.environment)
        except UsageError:
            return None
        return run


def append(store: Store, run: Run) -> None:
    """Append ``run`` to the store's log (through the path primitive: a link planted at the
    state folder or the log is refused). A store that cannot be written (read-only in CI) is a
    warning: the assertion's outcome does not depend on its evidence being kept."""
    stamped = run if run.at else Run(**{**asdict(run), "at": _now()})
    try:
        with (
            anchored.Folder.root(store.root, create=True) as root,
            root.folder("state", create=True) as state,
        ):
            size = state.regular_size(LOG)
            if size is not None and size >= LOG_CAP:
                _rotate(state)
            state.append(LOG, stamped.to_line())
    except OSError as e:
        warnings.warn(
            f"the parity run log {store.state_dir / LOG} was not written: {e}", stacklevel=3
        )


def _rotate(state: anchored.Folder) -> None:
    """Rename the full log over the generation before (another appender may have done it a
    moment ago: then there is nothing to rename)."""
    with contextlib.suppress(FileNotFoundError):
        state.replace(LOG, state, OLDER)


def read(store: Store) -> tuple[list[Run], int]:
    """The runs the store's logs hold, oldest first, and how many lines did not parse."""
    runs: list[Run] = []
    bad = 0
    for got in _documents(store):
        run = None if isinstance(got, ValueError) else Run.of(got)
        if run is None:
            bad += 1
            continue
        runs.append(run)
    return runs, bad


def _documents(store: Store) -> Iterator[object]:
    """Each non-blank line of the older log, then of the current one: its JSON, or the error
    that refused it."""
    try:
        root = anchored.Folder.root(store.root)
    except FileNotFoundError:
        return
    with root:
        try:
            state = root.folder("state")
        except FileNotFoundError:
            return
        with state:
            for name in (OLDER, LOG):
                try:
                    raw = state.open(name)
                except FileNotFoundError:
                    continue
                with io.BufferedReader(raw) as f:  # type: ignore[type-var]
                    _last(f, LOG_CAP)
                    for got in bounded_json.lines(f, line_cap=LINE_CAP):
                        if got is not None:
                            yield got


def _last(f: BinaryIO, cap: int) -> None:
    """Position ``f`` at the first whole line of its last ``cap`` bytes: a log larger than the
    cap (one an older version appended to without bound) is read from its newest runs only."""
    size = os.fstat(f.fileno()).st_size
    if size > cap:
        f.seek(size - cap)
        f.readline(LINE_CAP + 1)  # the line cut by the seek (or a part of a long one)


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
