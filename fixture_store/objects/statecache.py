"""The verified-state cache: lets a repeat verify skip re-hashing unchanged objects (DESIGN 8).

A row says "the object file named by this digest, with this inode, size, mtime_ns and
ctime_ns, was hashed and matched, by this proof": SHA-256, or the BLAKE3 a record carried. It
vouches only for what was seen: verify takes a hit only for a row of the proof its check would
use and of the record's size, so a record whose size or BLAKE3 was edited since, or a check by
SHA-256 after one by BLAKE3, hashes again. Any write to the file changes mtime or ctime (ctime
cannot be set from user space), so a changed file misses the cache and is hashed again. A
read-only bit is never taken as proof. The cache lives under the store's ``state/`` folder (a
plain folder: a link there is refused), may be deleted at any time, and proves nothing against
someone who can write the store: ``verify --full`` ignores it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fixture_store.errors import StoreError
from fixture_store.objects import fsutil

Entry = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns of the verified object file
Blake3Entry = tuple[str, int, int, int, int]  # the BLAKE3 hex that matched, then an Entry
# One row per object and proof, keyed by its SHA-256 hex (the object's path is a function of it):
# compact tables without rowids load in a third of the time of one keyed by full path, and a
# table per proof keeps the warm lookup one dictionary get and one tuple compare.
_SHA256_TABLE = "sha256_proofs"
_BLAKE3_TABLE = "blake3_proofs"
_SCHEMAS = (
    f"CREATE TABLE IF NOT EXISTS {_SHA256_TABLE} (hex TEXT PRIMARY KEY, ino INTEGER, "
    "size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {_BLAKE3_TABLE} (hex TEXT PRIMARY KEY, blake3 TEXT, "
    "ino INTEGER, size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER) WITHOUT ROWID",
)
_EARLIER = ("verified", "objects")  # earlier layouts: path-keyed, then one row without a proof


CACHE_FILE = "verified.sqlite3"
FLUSH_BATCH = 512  # entries
FLUSH_SECONDS = 2.0


def _entry(st: os.stat_result) -> Entry:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class VerifiedCache:
    """Small SQLite tables loaded once per run; new entries are written in one transaction.

    A row proves an object by SHA-256 (``blake3`` is ``None`` in the methods below) or by the
    BLAKE3 a record carried (``blake3`` is that hex); each vouches only for a check by the same
    proof.
    """

    path: Path | None
    _sha256: dict[str, Entry]
    _blake3: dict[str, Blake3Entry]
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # What to save: an entry, or None to delete the row.
    _pending_sha256: dict[str, Entry | None] = field(default_factory=dict)
    _pending_blake3: dict[str, Blake3Entry | None] = field(default_factory=dict)
    _saved_at: float = field(default_factory=time.monotonic)

    @classmethod
    def open(cls, state_dir: Path | None) -> VerifiedCache:
        """Open the cache in ``state_dir``; ``None`` gives a cache that remembers nothing.

        ``state_dir`` and the cache file must not be links (:class:`StoreError`): a cache
        reached through a link would be read from, and written to, outside the store.
        """
        sha256: dict[str, Entry] = {}
        blake3: dict[str, Blake3Entry] = {}
        path = None if state_dir is None else state_dir / CACHE_FILE
        if path is not None and _plain_file(path):
            try:
                with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
                    sha_rows = db.execute(
                        f"SELECT hex, ino, size, mtime_ns, ctime_ns FROM {_SHA256_TABLE}"
                    ).fetchall()
                    b3_rows = db.execute(
                        f"SELECT hex, blake3, ino, size, mtime_ns, ctime_ns FROM {_BLAKE3_TABLE}"
                    ).fetchall()
                sha256 = {r[0]: r[1:] for r in sha_rows}
                blake3 = {r[0]: r[1:] for r in b3_rows}
            except sqlite3.DatabaseError:
                sha256, blake3 = {}, {}  # a damaged or older cache only costs re-hashing
        return cls(path, sha256, blake3)

    def vouches(self, hexdigest: str, st: os.stat_result, blake3: str | None = None) -> bool:
        """True if the object file ``hexdigest``, with this stat, was verified by SHA-256, or
        with ``blake3``, by that BLAKE3."""
        # One get and one tuple compare: this runs once per object on the warm path.
        if blake3 is None:
            return self._sha256.get(hexdigest) == _entry(st)
        return self._blake3.get(hexdigest) == (
            blake3,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )

    def proof(self, hexdigest: str, size: int, blake3: str | None = None) -> Entry | None:
        """The stat this cache holds as proof that the object ``hexdigest`` of ``size`` bytes
        matched, by SHA-256 or, with ``blake3``, by that BLAKE3; ``None`` if it holds none: the
        entry a later :meth:`vouches` for the same check compares a stat with."""
        if blake3 is None:
            entry = self._sha256.get(hexdigest)
            return entry if entry is not None and entry[1] == size else None
        row = self._blake3.get(hexdigest)
        if row is None or row[0] != blake3 or row[2] != size:
            return None
        return row[1:]

    def rows(self) -> tuple[Mapping[str, Entry], Mapping[str, Blake3Entry]]:
        """The rows proved by SHA-256 and by BLAKE3, hex -> entry, for a loop that compares them
        itself (the warm verify sweep, where a method call per object shows); read-only."""
        return self._sha256, self._blake3

    def remember(self, hexdigest: str, st: os.stat_result, blake3: str | None = None) -> None:
        """The object file with this stat was just hashed and matched: by SHA-256, or with
        ``blake3``, by that BLAKE3."""
        entry = _entry(st)
        with self._lock:
            if blake3 is None:
                self._sha256[hexdigest] = self._pending_sha256[hexdigest] = entry
            else:
                b3 = (blake3, *entry)
                self._blake3[hexdigest] = self._pending_blake3[hexdigest] = b3

    def forget(self, hexdigest: str) -> None:
        with self._lock:
            self._sha256.pop(hexdigest, None)
            self._blake3.pop(hexdigest, None)
            self._pending_sha256[hexdigest] = self._pending_blake3[hexdigest] = None

    def flush_due(self) -> None:
        """:meth:`flush` once enough entries wait or enough time passed since the last save: one
        SQLite transaction per artifact cost 0.3 ms each when a test session verified the node
        corpus one case at a time (0.80 s cold for 1,765 cases, 0.19 s batched)."""
        waiting = len(self._pending_sha256) + len(self._pending_blake3)
        if waiting >= FLUSH_BATCH or (
            waiting and time.monotonic() - self._saved_at >= FLUSH_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        self._saved_at = time.monotonic()
        if self.path is None or not (self._pending_sha256 or self._pending_blake3):
            return
        with self._lock:
            sha256, self._pending_sha256 = self._pending_sha256, {}
            blake3, self._pending_blake3 = self._pending_blake3, {}
        try:
            fsutil.plain_folder(self.path.parent.parent, self.path.parent.name, create=True)
            if not _plain_file(self.path) and os.path.lexists(self.path):
                return
            with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
                # A lost cache write only costs re-hashing later: no fsync on the hot path.
                db.execute("PRAGMA synchronous = OFF")
                for schema in _SCHEMAS:
                    db.execute(schema)
                for table in _EARLIER:
                    db.execute(f"DROP TABLE IF EXISTS {table}")
                with db:
                    _save(db, _SHA256_TABLE, 5, sha256)
                    _save(db, _BLAKE3_TABLE, 6, blake3)
        except (sqlite3.DatabaseError, OSError, StoreError):
            pass  # the cache is an optimisation; failing to save it loses nothing


def _save(
    db: sqlite3.Connection,
    table: str,
    columns: int,
    pending: dict[str, Entry | None] | dict[str, Blake3Entry | None],
) -> None:
    marks = ", ".join("?" * columns)
    db.executemany(
        f"INSERT OR REPLACE INTO {table} VALUES ({marks})",
        [(h, *e) for h, e in pending.items() if e is not None],
    )
    db.executemany(
        f"DELETE FROM {table} WHERE hex = ?", [(h,) for h, e in pending.items() if e is None]
    )


def rows_of(state_dir: Path, hexdigest: str) -> tuple[Entry | None, Blake3Entry | None]:
    """The object's two rows (its SHA-256 proof, its BLAKE3 proof) read by their key, as the
    cache file holds them now; none from a cache that is missing, damaged or behind a link."""
    path = state_dir / CACHE_FILE
    try:
        if not _plain_file(path):
            return None, None
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
            sha = db.execute(
                f"SELECT ino, size, mtime_ns, ctime_ns FROM {_SHA256_TABLE} WHERE hex = ?",
                (hexdigest,),
            ).fetchone()
            b3 = db.execute(
                f"SELECT blake3, ino, size, mtime_ns, ctime_ns FROM {_BLAKE3_TABLE} WHERE hex = ?",
                (hexdigest,),
            ).fetchone()
    except (sqlite3.DatabaseError, OSError, StoreError):
        return None, None
    return (tuple(sha) if sha else None), (tuple(b3) if b3 else None)


def proves(state_dir: Path, hexdigest: str, st: os.stat_result, blake3: str | None) -> bool:
    """Whether the cache in ``state_dir`` holds a proof that the object file ``hexdigest``
    with this stat matched, by SHA-256 or by ``blake3`` (the BLAKE3 of the bytes it must hold).

    Reads the object's two rows by their key, not the tables: a writer that finds an object
    already present asks about that one object (loading every row costs milliseconds per
    thousand objects, hashing a small object microseconds)."""
    path = state_dir / CACHE_FILE
    try:
        if not _plain_file(path):
            return False
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
            row = db.execute(
                f"SELECT ino, size, mtime_ns, ctime_ns FROM {_SHA256_TABLE} WHERE hex = ?",
                (hexdigest,),
            ).fetchone()
            if row is not None and tuple(row) == _entry(st):
                return True
            if blake3 is None:
                return False
            row = db.execute(
                f"SELECT blake3, ino, size, mtime_ns, ctime_ns FROM {_BLAKE3_TABLE} WHERE hex = ?",
                (hexdigest,),
            ).fetchone()
    except (sqlite3.DatabaseError, OSError, StoreError):
        return False  # no cache, or a damaged one: the caller hashes
    return row is not None and tuple(row) == (blake3, *_entry(st))


def remember_one(state_dir: Path, hexdigest: str, st: os.stat_result) -> None:
    """Save one SHA-256 proof at once (see :meth:`VerifiedCache.remember`): the object file
    with this stat was just hashed and matched."""
    remember_published(state_dir, [(hexdigest, st, None)])


def remember_published(
    state_dir: Path, proofs: Iterable[tuple[str, os.stat_result, str | None]]
) -> None:
    """Save proofs at once, in one transaction: each object file, with this stat, holds the
    bytes whose SHA-256 is its name (and, when given, whose BLAKE3 is that), as the writer that
    hashed them and renamed them into place knows. The next verify of such an object costs one
    lstat, not a read of its bytes."""
    cache = VerifiedCache(state_dir / CACHE_FILE, {}, {})
    for hexdigest, st, blake3 in proofs:
        cache.remember(hexdigest, st)
        if blake3 is not None:
            cache.remember(hexdigest, st, blake3)
    cache.flush()


def _plain_file(path: Path) -> bool:
    """Whether ``path`` is a regular file in a plain folder (both checked with lstat);
    :class:`StoreError` if the folder or the file is a link."""
    if not fsutil.plain_folder(path.parent.parent, path.parent.name):
        return False
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise fsutil.link_refused(path)
    return stat.S_ISREG(st.st_mode)


def has_marker(marker: Path, store_root: Path) -> bool:
    """Whether a pass marker (see :func:`mark_passed`) is there: a regular file, reached
    through plain folders of the store only. A marker behind a link is never trusted (the
    check it stands for runs again); verify refuses the link itself."""
    try:
        parts = marker.parent.relative_to(store_root).parts
        if not fsutil.plain_folder(store_root, *parts):
            return False
        return stat.S_ISREG(os.lstat(marker).st_mode)
    except (ValueError, OSError, StoreError):
        return False


def mark_passed(marker: Path, store_root: Path) -> None:
    """Touch a pass marker: a file under the store's ``state/`` whose name is a digest of
    everything a check depended on, so the same input skips the check next time.

    Never creates the store, never writes through a link, and a store that cannot be written
    only loses the shortcut.
    """
    if not store_root.is_dir() or has_marker(marker, store_root):
        return
    with contextlib.suppress(ValueError, OSError, StoreError):
        parts = marker.parent.relative_to(store_root).parts
        fsutil.plain_folder(store_root, *parts, create=True)
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        os.close(fd)
