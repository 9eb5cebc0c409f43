"""Verify snapshots: a whole verify that passed, remembered, so that verifying an unchanged
project again costs one ``lstat`` per object and no registry parse.

A warm ``verify`` of a large project spends most of its time parsing and validating the
registry, then comparing each object's ``lstat`` with the verified-state cache. A snapshot
keeps the outcome of the last verify of *every* record of a project against one store, when
every record verified (or is a declared gap), together with the stat of each object that the
verified-state cache held as proof. It is used only when all of these hold:

- its key matches: the exact bytes of every registry file, ``provenance/*.json`` and the shards
  of sharded families (their SHA-256), the
  project and store folders, the hash asked for (``--digest``), the fixture-store version and
  the size and mtime of each of its modules (an upgrade or an edited checkout invalidates it);
- every object's ``lstat`` (inode, size, mtime_ns, ctime_ns) is the one that was proved: a
  file that was written since, replaced or removed misses, and the full verify runs.

So it vouches for nothing the verified-state cache would not: same proof, same stat rule
(DESIGN 8), plus "these registry bytes parsed and validated", which their digest pins. It lives
in the user's state folder (``platformdirs.user_state_dir``), never in the store, which other
users may share and write: a snapshot there could vouch for a record that does not parse. The
file must be a regular file owned by the user and writable by nobody else, in a folder of the
same kind; otherwise it is ignored. It is never pickle: a line of text naming the format, a
JSON header (bounded, like every JSON read), then columns of fixed-width values whose lengths
the header states and the file must have exactly (see :meth:`Snapshot.to_bytes`). It may be
deleted at any time (a lost or damaged snapshot costs one full verify), and ``verify --full``
never reads it.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import platformdirs

from fixture_store import bounded_json
from fixture_store._version import __version__, files_state
from fixture_store.errors import RegistryError
from fixture_store.objects import statcheck
from fixture_store.objects.digests import Algorithm
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.objects.store import Store
from fixture_store.registry.raw_files import DIRNAME, family_digests, family_of
from fixture_store.verifying.results import Result, ResultColumns, Status

# What only a full verify needs (parsing the registry, hashing, the verified-state cache) is
# imported when one runs: a warm verify answered by its snapshot reads no record.
if TYPE_CHECKING:
    from fixture_store.objects.statecache import Entry
    from fixture_store.registry import Registry
    from fixture_store.verify import Verifier, VerifyPlan

# 2: objects and stats packed (one string of digests, base64 of native int64s): at 3 x 10^5
# objects, format 1's lists of strings and integers took 0.28 s to parse against 0.18 s.
# 3: the columns in binary after a JSON header (raw digests, native int64s, names one per
# line): at 3 x 10^5 objects the file is 22 MB instead of 42, read and parsed in a tenth of
# the time format 2's JSON took (0.19 s).
FORMAT = 3
_MAGIC = b"fixture-store verify snapshot 3\n"
_HEX = 64
_RAW = 32  # bytes of one SHA-256
_NO_KIND = 255  # the kind column's "no kind"; at most 255 kinds in a snapshot
_FOLDER = "verify-snapshots"
# A snapshot is about 220 bytes per record of three objects: this holds 4 x 10^6 of them. A
# longer file is not read (its project pays a full verify, as without a snapshot).
_CAP = 1 << 30
_OK = frozenset({Status.VERIFIED, Status.GAP})
_PACKAGE = Path(__file__).resolve().parent


def folder() -> Path:
    """Where this user's snapshots live (``$XDG_STATE_HOME`` on Linux)."""
    return Path(platformdirs.user_state_dir("fixture-store", appauthor=False)) / _FOLDER


@dataclass(frozen=True)
class Snapshot:
    """The results of a verify of every record, and the proved stat of each object it read.

    Kept in columns, as the file holds them: a verified result is a name, a kind and its
    object's digest and size; any other result (a declared gap) keeps its JSON in ``others``
    (its size column holds -1). The objects are their raw SHA-256s one after another, their
    stats four signed 64-bit integers each, in the machine's byte order (the file never leaves
    the user's state folder; a file from another machine fails :meth:`holds`, which costs one
    full verify).
    """

    key: str
    names: Sequence[str]
    kinds: tuple[str | None, ...]  # the distinct kinds; ``kind_rows`` indexes them
    kind_rows: bytes  # one byte per result: its kind's index, or _NO_KIND
    hexes: bytes  # 32 bytes per result: the record's object (a tree's manifest); see sizes
    sizes: Sequence[int]  # per result: its object's size; -1: the result is in ``others``
    others: Mapping[int, Mapping[str, Any]]  # position -> Result.to_json()
    objects: bytes  # the raw SHA-256 of each object read, one after another
    stats: Sequence[int]  # four per object: inode, size, mtime_ns, ctime_ns

    @classmethod
    def of(
        cls, key: str, results: Sequence[Result], objects: Sequence[tuple[str, Entry]]
    ) -> Snapshot:
        """``ValueError`` when the results cannot be kept so (a name holding a line break, more
        kinds than the column indexes): that project gets no shortcut."""
        compact = [_compact(r) for r in results]
        kinds = tuple(dict.fromkeys(c[0] for c in compact if c))
        if len(kinds) >= _NO_KIND or any("\n" in r.name for r in results):
            raise ValueError("these results do not fit the snapshot's columns")
        index = {kind: i for i, kind in enumerate(kinds)}
        objects = sorted(objects)  # by digest, so that objects of one shard folder come together
        return cls(
            key,
            [r.name for r in results],
            kinds,
            bytes(index[c[0]] if c else _NO_KIND for c in compact),
            b"".join(bytes.fromhex(c[1]) if c else bytes(_RAW) for c in compact),
            array.array("q", [c[2] if c else -1 for c in compact]),
            {
                i: r.to_json()
                for i, (r, c) in enumerate(zip(results, compact, strict=True))
                if not c
            },
            bytes.fromhex("".join(h for h, _ in objects)),
            array.array("q", [n for _, entry in objects for n in entry]),
        )

    def to_bytes(self) -> bytes:
        """The file: the format line, a JSON header (the key, the counts, the kinds, the
        results that are not plain verified, the names' length), a line break, then the
        columns in this order: names (UTF-8, one per line), kinds (a byte each), the records'
        digests (32 bytes each), sizes (int64 each), the objects' digests (32 bytes each),
        their stats (4 int64 each)."""
        names = "\n".join(self.names).encode("utf-8", "surrogateescape")
        header = {
            "format": FORMAT,
            "key": self.key,
            "records": len(self.names),
            "objects": len(self.objects) // _RAW,
            "kinds": list(self.kinds),
            "names_bytes": len(names),
            "others": {str(i): dict(r) for i, r in self.others.items()},
        }
        return b"".join(
            (
                _MAGIC,
                json.dumps(header, separators=(",", ":")).encode("ascii"),
                b"\n",
                names,
                self.kind_rows,
                self.hexes,
                array.array("q", self.sizes).tobytes(),
                self.objects,
                array.array("q", self.stats).tobytes(),
            )
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Snapshot:
        """Parse a snapshot; ``ValueError`` (or ``KeyError``/``TypeError``) if it is not one:
        every column must have the length its header gives and the file must end where they
        do. The values are taken as they are: a wrong one makes :meth:`holds` fail or a result
        differ from none the registry's verify would give, since the key pins the registry."""
        if not data.startswith(_MAGIC):
            raise ValueError("not a verify snapshot of this format")
        end = data.find(b"\n", len(_MAGIC))
        if end < 0:
            raise ValueError("no header")
        header = bounded_json.loads(data[len(_MAGIC) : end])
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError("not a verify snapshot of this format")
        n, m, names_bytes = header["records"], header["objects"], header["names_bytes"]
        kinds = header["kinds"]
        if not all(type(v) is int and v >= 0 for v in (n, m, names_bytes)):
            raise ValueError("a count is not one")
        if not isinstance(kinds, list) or not all(k is None or isinstance(k, str) for k in kinds):
            raise ValueError("a kind is not text")
        view = memoryview(data)[end + 1 :]
        widths = (names_bytes, n, n * _RAW, n * 8, m * _RAW, m * 32)
        if len(view) != sum(widths):
            raise ValueError("the columns are not the length the header gives")
        at, parts = 0, []
        for width in widths:
            parts.append(view[at : at + width])
            at += width
        names_col, kind_rows, hexes, sizes_col, objects, stats_col = parts
        text = str(names_col, "utf-8", "surrogateescape")
        names = text.split("\n") if n else []
        if len(names) != n:
            raise ValueError("the names are not as many as the records")
        sizes, stats = array.array("q"), array.array("q")
        sizes.frombytes(sizes_col)
        stats.frombytes(stats_col)
        rows = bytes(kind_rows)
        if any(k >= len(kinds) and k != _NO_KIND for k in set(rows)):
            raise ValueError("a kind is not one of the header's")
        others = {int(i): r for i, r in header["others"].items()}
        # Results are built when asked for, after this returns: what could fail then fails now.
        missing = {i for i, size in enumerate(sizes) if size < 0}
        if missing != set(others) or any(
            Result.from_json(r).name != names[i] for i, r in others.items()
        ):
            raise ValueError("the results that are not plain verified do not match the names")
        return cls(
            str(header["key"]),
            names,
            tuple(kinds),
            rows,
            bytes(hexes),
            sizes,
            others,
            bytes(objects),
            stats,
        )

    def results(self, rows: Sequence[int] | None = None) -> ResultColumns:
        """Every result (or those at ``rows``), in the order of the names, each built when it is
        asked for, without validating its digest again: they are the registry's, pinned by the
        key."""
        return _Results(self, range(len(self.names)) if rows is None else rows)

    def result(self, i: int) -> Result:
        size = self.sizes[i]
        if size < 0:
            return Result.from_json(self.others[i])
        kind = self.kind_rows[i]
        return Result.cached_verified(
            self.names[i],
            None if kind == _NO_KIND else self.kinds[kind],
            self.hexes[i * _RAW : (i + 1) * _RAW].hex(),
            size,
        )

    def holds(self, store: Store) -> bool:
        """Whether every object file is still the one that was proved: one lstat each
        (:mod:`~fixture_store.objects.statcheck`: a large list is checked in two processes)."""
        store.shards()  # a link among the store's folders is refused, as verify refuses it
        return statcheck.holds(str(store.objects_dir), self.objects.hex(), self.stats)


class _Results(ResultColumns):
    """A snapshot's results at ``rows``: names and statuses straight from its columns."""

    def __init__(self, snap: Snapshot, rows: Sequence[int]) -> None:
        self.snap, self.rows = snap, rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> Result: ...
    @overload
    def __getitem__(self, i: slice) -> list[Result]: ...
    def __getitem__(self, i: int | slice) -> Result | list[Result]:
        if isinstance(i, slice):
            return [self.snap.result(row) for row in self.rows[i]]
        return self.snap.result(self.rows[i])

    def outcomes(self) -> tuple[Sequence[str], Sequence[Status]]:
        names, others = self.snap.names, self.snap.others
        if isinstance(self.rows, range) and self.rows == range(len(names)):
            chosen = names
        else:
            chosen = [names[row] for row in self.rows]
        statuses = [Status.VERIFIED] * len(self.rows)
        if others:
            for at, row in enumerate(self.rows):
                if row in others:
                    statuses[at] = Status(others[row]["status"])
        return chosen, statuses


def _compact(r: Result) -> tuple[str | None, str, int] | None:
    """A result verified with nothing else to say, as (kind, hex, size); ``None`` otherwise."""
    if (
        r.status is Status.VERIFIED
        and r.expected is not None
        and r.actual == r.expected
        and not r.message
        and r.member is None
        and r.fix is None
    ):
        return (r.kind, r.expected.hex, r.expected.size)
    return None


def key(store: Store, project: Path, algorithm: Algorithm, files: Iterable[tuple[str, str]]) -> str:
    """The key of a snapshot: ``files`` are (family, SHA-256 of its file's bytes) pairs."""
    h = hashlib.sha256()
    for part in (
        f"format {FORMAT}",
        f"fixture-store {__version__}",
        *_package_state(),
        f"project {project}",
        f"store {_identity(store.root)}",
        f"digest {algorithm.value}",
        *(f"family {family} {digest}" for family, digest in sorted(files)),
    ):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def _package_state() -> list[str]:
    """Size and mtime of each of fixture-store's modules: a changed checkout changes the key."""
    return [f"module {line}" for line in files_state(str(_PACKAGE), (".py",))]


def _identity(root: Path) -> str:
    try:
        st = os.stat(root)
    except OSError:
        return f"{root.absolute()} absent"
    return f"{root.absolute()} {st.st_dev} {st.st_ino}"


def current_key(store: Store, project: Path, algorithm: Algorithm) -> str | None:
    """The key the project's registry has now, from the bytes of its files (no parse);
    ``None`` if a file cannot be read (the full verify then says why)."""
    try:
        files = family_digests(project / DIRNAME)
    except (RegistryError, OSError):  # the full verify reports it
        return None
    return key(store, project, algorithm, files)


def _slot(store: Store, project: Path, algorithm: Algorithm) -> Path:
    """One file per project, store and hash: a new snapshot replaces the last."""
    name = f"{project}\0{store.root.absolute()}\0{algorithm.value}"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return folder() / f"{digest}.snapshot"


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(path: Path) -> bytes | None:
    """The bytes of a snapshot file that only this user can have written, else ``None``."""
    try:
        for dirpath in (path.parent.parent, path.parent):
            st = os.lstat(dirpath)
            if not stat.S_ISDIR(st.st_mode) or not _private(st):
                return None
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or not _private(st):
            return None
        data = f.read(_CAP + 1)
        return data if len(data) <= _CAP else None


# What parsing a snapshot that is not one can raise (JSON of another shape, nested too deep).
_DAMAGED = (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError, OSError)


def lookup(
    store: Store, project: Path, algorithm: Algorithm, families: Sequence[str] = ()
) -> Sequence[Result] | None:
    """The results of verifying every record (or every record of ``families``) if a snapshot
    still holds for the project as it is now; ``None`` if the full verify must run."""
    try:
        raw = _read(_slot(store, project, algorithm))
        if raw is None:  # none to use: the registry files are not even hashed
            return None
        snap = Snapshot.from_bytes(raw)
        if snap.key != current_key(store, project, algorithm) or not snap.holds(store):
            return None
        if not families:
            return snap.results()
        rows = [i for i, name in enumerate(snap.names) if family_of(name) in families]
        # A family with no record is the full verify's error to report.
        if {family_of(snap.names[i]) for i in rows} != set(families):
            return None
        return snap.results(rows)
    except _DAMAGED:
        return None  # a damaged snapshot costs one full verify


def remember(
    store: Store,
    registry: Registry,
    plan: VerifyPlan,
    results: Sequence[Result],
    verifier: Verifier,
) -> bool:
    """Save a snapshot of ``results`` if they cover every record and all passed, and every object
    read has its proof in the verified-state cache; otherwise drop the project's snapshot.
    Whether one was saved. A failure to write loses only the shortcut."""
    algorithm = verifier.algorithm
    slot = _slot(store, registry.root, algorithm)
    objects = _proved(plan, verifier, algorithm)
    every = [r.name for r in results] == registry.names()
    if objects is None or not every or any(r.status not in _OK for r in results):
        with contextlib.suppress(OSError):
            slot.unlink()
        return False
    files = [(family, fam.text_digest) for family, fam in registry.families.items()]
    try:
        snap = Snapshot.of(key(store, registry.root, algorithm, files), results, objects)
        _write(slot, snap.to_bytes())
    except (OSError, OverflowError, ValueError):  # a stat past 64 bits, a name with a line
        with contextlib.suppress(OSError):  # break: no shortcut for this project
            slot.unlink()
        return False
    return True


def _proved(
    plan: VerifyPlan, verifier: Verifier, algorithm: Algorithm
) -> tuple[tuple[str, Entry], ...] | None:
    """Each planned object with the stat its proof in the verified-state cache holds; ``None``
    if one has none (it was not verified, or the cache could not keep it)."""
    proof, auto = verifier.cache.proof, algorithm is Algorithm.AUTO
    out: list[tuple[str, Entry]] = []
    for hexpart, size, blake3 in plan.objects:
        entry = proof(hexpart, size, blake3 if auto else None)
        if entry is None:
            return None
        out.append((hexpart, entry))
    return tuple(out)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    import tempfile  # only a full verify writes a snapshot: a warm one does not pay for it

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".snapshot")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@cyclic_gc_paused()
def verify_project(  # noqa: PLR0913 - the verify command's options, each keyword-only
    store: Store,
    load: Callable[[], Registry],
    project: Path,
    *,
    names: Sequence[str] = (),
    families: Sequence[str] = (),
    full: bool = False,
    algorithm: Algorithm = Algorithm.AUTO,
    workers: int | None = None,
    progress: Callable[[int], AbstractContextManager[Callable[[Result], None] | None]]
    | None = None,
) -> Sequence[Result]:
    """Verify a project's records as the verify command does: from a snapshot when one holds
    (never with ``full`` or explicit ``names``), else in full, ``load`` giving the registry and
    ``progress(total)`` the callback each result is passed to; a full verify of every record
    that passed is remembered as the project's snapshot."""
    if not full and not names:
        cached = lookup(store, project, algorithm, families)
        if cached is not None:
            return cached
    from fixture_store.verify import Verifier, VerifyPlan

    registry = load()
    chosen = registry.select(names, families)
    verifier = Verifier(store, full=full, algorithm=algorithm)
    plan = VerifyPlan.of(store, registry, chosen)
    with progress(len(chosen)) if progress else contextlib.nullcontext() as advance:
        results = plan.execute(verifier, workers=workers, on_result=advance)
    if not names and chosen == registry.names():  # every record, also as all its families
        remember(store, registry, plan, results, verifier)
    return results


__all__ = ["Snapshot", "folder", "lookup", "remember", "verify_project"]
