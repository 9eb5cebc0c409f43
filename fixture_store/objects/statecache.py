"""The verified-state cache: lets a repeat verify skip re-hashing unchanged objects (DESIGN 8).

An entry says "the object file named by this digest, with this inode, size, mtime_ns and
ctime_ns, hashed to that digest". Any write to the file changes mtime or ctime (ctime cannot be
set from user space), so a changed file misses the cache and is hashed again. A read-only bit
is never taken as proof. The cache lives under the store's ``state/`` folder and may be deleted
at any time; ``verify --full`` ignores it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

Entry = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns of the verified object file
# One row per object, keyed by its SHA-256 hex (the object's path is a function of it): a compact
# table without rowids loads in a third of the time of the earlier one keyed by full path.
_TABLE = "objects"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} (hex TEXT PRIMARY KEY, ino INTEGER, "
    "size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER) WITHOUT ROWID"
)


FLUSH_BATCH = 512  # entries
FLUSH_SECONDS = 2.0


def _entry(st: os.stat_result) -> Entry:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class VerifiedCache:
    """A small SQLite table loaded once per run; new entries are written in one transaction."""

    path: Path | None
    _entries: dict[str, Entry]
    _pending: dict[str, Entry | None]  # None: forget
    _lock: threading.Lock
    _saved_at: float = field(default_factory=time.monotonic)

    @classmethod
    def open(cls, state_dir: Path | None) -> VerifiedCache:
        """Open the cache in ``state_dir``; ``None`` gives a cache that remembers nothing."""
        entries: dict[str, Entry] = {}
        path = None if state_dir is None else state_dir / "verified.sqlite3"
        if path is not None and path.exists():
            try:
                with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
                    rows = db.execute(
                        f"SELECT hex, ino, size, mtime_ns, ctime_ns FROM {_TABLE}"
                    ).fetchall()
                entries = {r[0]: r[1:] for r in rows}
            except sqlite3.DatabaseError:
                entries = {}  # a damaged or older cache only costs re-hashing
        return cls(path, entries, {}, threading.Lock())

    def vouches(self, hexdigest: str, st: os.stat_result) -> bool:
        """True if the object file ``hexdigest``, with this stat, was verified to have it."""
        # One tuple compare: this runs once per object on the warm path.
        return self._entries.get(hexdigest) == _entry(st)

    def remember(self, hexdigest: str, st: os.stat_result) -> None:
        """The object file with this stat was just hashed and has its name's digest."""
        entry = _entry(st)
        with self._lock:
            self._entries[hexdigest] = entry
            self._pending[hexdigest] = entry

    def forget(self, hexdigest: str) -> None:
        with self._lock:
            self._entries.pop(hexdigest, None)
            self._pending[hexdigest] = None

    def flush_due(self) -> None:
        """:meth:`flush` once enough entries wait or enough time passed since the last save: one
        SQLite transaction per artifact cost 0.3 ms each when a test session verified the node
        corpus one case at a time (0.80 s cold for 1,765 cases, 0.19 s batched)."""
        if len(self._pending) >= FLUSH_BATCH or (
            self._pending and time.monotonic() - self._saved_at >= FLUSH_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        self._saved_at = time.monotonic()
        if self.path is None or not self._pending:
            return
        with self._lock:
            pending, self._pending = self._pending, {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
                # A lost cache write only costs re-hashing later: no fsync on the hot path.
                db.execute("PRAGMA synchronous = OFF")
                db.execute(_SCHEMA)
                db.execute("DROP TABLE IF EXISTS verified")  # the earlier, path-keyed layout
                with db:
                    db.executemany(
                        f"INSERT OR REPLACE INTO {_TABLE} VALUES (?, ?, ?, ?, ?)",
                        [(h, *e) for h, e in pending.items() if e is not None],
                    )
                    db.executemany(
                        f"DELETE FROM {_TABLE} WHERE hex = ?",
                        [(h,) for h, e in pending.items() if e is None],
                    )
        except (sqlite3.DatabaseError, OSError):
            pass  # the cache is an optimisation; failing to save it loses nothing


def mark_passed(marker: Path, store_root: Path) -> None:
    """Touch a pass marker: a file under the store's ``state/`` whose name is a digest of
    everything a check depended on, so the same input skips the check next time.

    Never creates the store, and a store that cannot be written only loses the shortcut.
    """
    if marker.exists() or not store_root.is_dir():
        return
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
