"""The verified-state cache: lets a repeat verify skip re-hashing unchanged objects (DESIGN 8).

An entry says "the file at this path, with this inode, size, mtime_ns and ctime_ns, hashed to this
digest". Any write to the file changes mtime or ctime (ctime cannot be set from user space), so a
changed file misses the cache and is hashed again. A read-only bit is never taken as proof. The
cache lives under the store's ``state/`` folder and may be deleted at any time; ``verify --full``
ignores it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

# inode, size, mtime_ns, ctime_ns, then the SHA-256 hex the file was verified to have
Entry = tuple[int, int, int, int, str]


def _entry(st: os.stat_result, hexdigest: str) -> Entry:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, hexdigest)


@dataclass
class VerifiedCache:
    """A small SQLite table loaded once per run; new entries are written in one transaction."""

    path: Path | None
    _entries: dict[str, Entry]
    _pending: dict[str, Entry | None]  # None: forget
    _lock: threading.Lock

    @classmethod
    def open(cls, state_dir: Path | None) -> VerifiedCache:
        """Open the cache in ``state_dir``; ``None`` gives a cache that remembers nothing."""
        entries: dict[str, Entry] = {}
        path = None if state_dir is None else state_dir / "verified.sqlite3"
        if path is not None and path.exists():
            try:
                with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
                    rows = db.execute(
                        "SELECT path, ino, size, mtime_ns, ctime_ns, digest FROM verified"
                    ).fetchall()
                entries = {r[0]: r[1:] for r in rows}
            except sqlite3.DatabaseError:
                entries = {}  # a damaged cache only costs re-hashing
        return cls(path, entries, {}, threading.Lock())

    def lookup_key(self, key: str, st: os.stat_result, hexdigest: str) -> bool:
        """True if the object file ``key`` with this stat was verified to have ``hexdigest``."""
        # One tuple compare: this runs once per object on the warm path.
        return self._entries.get(key) == _entry(st, hexdigest)

    def remember_key(self, key: str, st: os.stat_result, hexdigest: str) -> None:
        entry = _entry(st, hexdigest)
        with self._lock:
            self._entries[key] = entry
            self._pending[key] = entry

    def forget_key(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._pending[key] = None

    def flush(self) -> None:
        if self.path is None or not self._pending:
            return
        with self._lock:
            pending, self._pending = self._pending, {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
                # A lost cache write only costs re-hashing later: no fsync on the hot path.
                db.execute("PRAGMA synchronous = OFF")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS verified (path TEXT PRIMARY KEY, ino INTEGER, "
                    "size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, digest TEXT)"
                )
                with db:
                    db.executemany(
                        "INSERT OR REPLACE INTO verified VALUES (?, ?, ?, ?, ?, ?)",
                        [(p, *e) for p, e in pending.items() if e is not None],
                    )
                    db.executemany(
                        "DELETE FROM verified WHERE path = ?",
                        [(p,) for p, e in pending.items() if e is None],
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
