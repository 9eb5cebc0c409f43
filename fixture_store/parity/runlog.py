"""The run log: which parity assertions ran in which environment, and whether they held.

Every :func:`~fixture_store.parity.assertion.assert_parity` given an environment (the pytest
plugin always gives one) appends one JSON line to ``<store>/state/parity-runs.jsonl``: the
record, the digest of its reference, the environment, the expectation that judged it (``""``:
the record's own rule), the outcome and the time. The file is the user's, outside any git
checkout (the store's ``state`` folder, beside the verified-state cache): it is evidence for
``fixture-store expectations``, never registry data. Deleting it forgets the runs, nothing else.
A line that does not parse is counted, not used (:func:`read`).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from fixture_store.errors import UsageError
from fixture_store.objects import anchored
from fixture_store.objects.store import Store
from fixture_store.registry.environment import Environment

LOG = "parity-runs.jsonl"
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
            state.append(LOG, stamped.to_line())
    except OSError as e:
        warnings.warn(
            f"the parity run log {store.state_dir / LOG} was not written: {e}", stacklevel=3
        )


def read(store: Store) -> tuple[list[Run], int]:
    """The runs the store's log holds, oldest first, and how many lines did not parse."""
    try:
        with anchored.Folder.root(store.root) as root, root.folder("state") as state:
            text = state.read_bytes(LOG).decode("utf-8", "replace")
    except FileNotFoundError:
        return [], 0
    runs: list[Run] = []
    bad = 0
    for line in text.splitlines():
        try:
            run = Run.of(json.loads(line)) if line.strip() else None
        except json.JSONDecodeError:
            run = None
        if run is None:
            bad += bool(line.strip())
            continue
        runs.append(run)
    return runs, bad


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
