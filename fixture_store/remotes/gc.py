"""Garbage collection of a folder or an S3 remote: what no record of the registries it is told
about references (``fixture-store remote gc``). A plan first, then, if asked, its execution.

*Referenced* means: an object some record of the given registries keeps
(:meth:`~fixture_store.registry.Record.referenced`: its objects, and a package source's
distribution), whatever its source (a record pinned to a Hub commit too). The project's own
registry is always one of them; a remote shared by several projects or branches is collected
only with all of their registries (``--keep-registry``), as ``dvc gc --cloud`` is with
``--all-branches``/``--projects``. A registry with an invalid record is refused: its objects
cannot be told apart from garbage.

What the plan decides, from one listing of the remote:

- an object under its own key that nothing references: removed;
- a pack (see :mod:`~fixture_store.remotes.packs`) none of whose objects is referenced:
  removed, and every index naming it is replaced;
- a pack partly garbage: repacked if the referenced bytes are under ``repack_below`` of it
  (its referenced objects copied, each checked against its digest, into a new pack written
  once and read back), else kept whole (the garbage bytes it keeps are reported);
- a pack no index names (a push cut between its packs and its index): removed;
- a push's temp file left in a folder remote's ``tmp/`` (a push killed mid-copy): removed;
- a multipart upload a cut push left open on S3 (:mod:`~fixture_store.remotes.uploads`):
  aborted;
- anything written less than ``min_age`` seconds ago, and every pack an index that young
  names, is left: it may belong to a push in flight whose records gc has not seen.

Execution only ever moves the remote between readable states. New packs first, then one new
index naming every entry of the indexes it replaces that survives (write-once, read back),
then the replaced indexes, and only then the packs and objects that go: a gc cut anywhere
leaves every referenced object readable (at worst a pack no index names, or an index the next
gc replaces). Before anything is deleted the indexes are listed again, and a pack an index
written meanwhile names is spared.

What it cannot see: a push of a registry gc was not told about, running at the same time, may
find an object present (in a pack or at its key) that gc then removes; that push reports it
pushed, and the next push sends it again. The project has no lock on a remote that a push
would honour, so gc is for a quiet moment, with every registry that shares the remote.
"""

from __future__ import annotations

import collections
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.registry import Registry
from fixture_store.remotes import gc_uploads, packs
from fixture_store.remotes.base import GuardedBody, Remote, RemoteError, Retry, object_key
from fixture_store.remotes.folder import TEMP_PREFIX
from fixture_store.remotes.keys import DELETE_BATCH, Entry, Keys, keys_of
from fixture_store.remotes.packs import Slot
from fixture_store.remotes.uploads import Upload

# Left alone: written less than an hour ago (a push in flight from a checkout whose records gc
# has not seen writes its packs, then its index, within that).
DEFAULT_MIN_AGE = 3600.0
# A partly-garbage pack whose referenced bytes are under half of it is repacked.
DEFAULT_REPACK_BELOW = 0.5


class Fate(StrEnum):
    DELETE = "delete"  # every object of it garbage
    REPACK = "repack"  # its referenced objects into a new pack, then it goes
    KEEP = "keep"  # partly garbage, kept whole
    ORPHAN = "orphan"  # named by no index: a cut push's leftover
    YOUNG = "young"  # garbage, but too recent to remove


GOES = frozenset({Fate.DELETE, Fate.REPACK, Fate.ORPHAN})


def refusal(remote: Remote) -> UsageError | None:
    """Why ``remote`` cannot be collected, if it cannot (a kind without keys to delete)."""
    if keys_of(remote) is not None:
        return None
    kind = type(remote).__name__
    if kind == "HubRemote":
        return UsageError(
            f"remote {remote.label} is a Hub repo: its history keeps every file ever committed, "
            "so deleting files in a new commit frees nothing and only breaks records pinned to "
            "older commits; fixture-store does not collect a Hub remote",
            fix="use the Hub's own tools to rewrite the repo's history (super-squash), or "
            "collect a folder or S3 remote instead",
        )
    return UsageError(
        f"remote {remote.label} only serves bytes (an https mirror); it cannot be collected",
        fix="run gc on the folder or bucket the mirror serves (fixture-store remote gc NAME)",
    )


def referenced(registries: Iterable[Registry]) -> set[str]:
    """Hex digests of every object a record of ``registries`` keeps; refused (nothing is
    decided) if a record of one of them is invalid."""
    keep: set[str] = set()
    for registry in registries:
        invalid = registry.invalid_summary()
        if invalid:
            raise UsageError(
                f"the registry at {registry.root} has {invalid}, so the objects they reference "
                "cannot be told apart from garbage; refusing to collect the remote",
                fix=f"fixture-store --registry {registry.root} verify, fix the records, then "
                "run remote gc again",
            )
        for record in registry.records():
            keep.update(record.referenced())
    return keep


@dataclass(frozen=True)
class PackPlan:
    """What becomes of one pack: ``live``, its referenced objects with their offsets."""

    pack: Digest
    fate: Fate
    live: tuple[tuple[Digest, int], ...] = ()
    garbage: int = 0
    garbage_bytes: int = 0

    @property
    def key(self) -> str:
        return packs.pack_key(self.pack.hex)


@dataclass(frozen=True)
class Plan:
    """What a gc of the remote would do, decided from one listing of it."""

    label: str
    referenced: int
    objects: tuple[tuple[str, int], ...]  # garbage under its own key: (key, size)
    young_objects: int
    temps: tuple[tuple[str, int], ...]  # a cut push's temp files (a folder's tmp/push-*)
    packs: tuple[PackPlan, ...]  # every pack holding garbage, and every orphan
    replaced: Mapping[str, Mapping[str, Slot]]  # index hex -> its slots
    indexes: frozenset[str]  # every index read
    uploads: tuple[Upload, ...] = ()  # multipart uploads cut pushes left open (S3), to abort
    young_uploads: int = 0

    def fated(self, *fates: Fate) -> list[PackPlan]:
        return [p for p in self.packs if p.fate in fates]

    @property
    def freed(self) -> int:
        """Bytes the removals free (a repacked pack's referenced bytes are written again)."""
        gone = sum(p.pack.size for p in self.fated(*GOES))
        rewritten = sum(d.size for p in self.fated(Fate.REPACK) for d, _ in p.live)
        loose = sum(size for _, size in (*self.objects, *self.temps))
        return loose + gone - rewritten + sum(u.size or 0 for u in self.uploads)

    @property
    def kept_bytes(self) -> int:
        """Garbage bytes left in packs kept whole or too young."""
        return sum(p.garbage_bytes for p in self.fated(Fate.KEEP, Fate.YOUNG))

    def to_json(self) -> dict[str, object]:
        return {
            "remote": self.label,
            "referenced": self.referenced,
            "objects": [key for key, _ in self.objects],
            "young_objects": self.young_objects,
            "temps": [key for key, _ in self.temps],
            "packs": [
                {
                    "pack": p.pack.hex,
                    "size": p.pack.size,
                    "fate": str(p.fate),
                    "live": len(p.live),
                    "garbage": p.garbage,
                    "garbage_bytes": p.garbage_bytes,
                }
                for p in self.packs
            ],
            "indexes_replaced": sorted(self.replaced),
            "uploads": [
                {"key": u.key, "upload_id": u.upload_id, "initiated": u.written, "bytes": u.size}
                for u in self.uploads
            ],
            "young_uploads": self.young_uploads,
            "bytes_freed": self.freed,
            "bytes_kept": self.kept_bytes,
        }


@dataclass(frozen=True)
class Ages:
    now: float
    min_age: float

    def old(self, entry: Entry | Upload) -> bool:
        return self.now - entry.written >= self.min_age


def plan(
    keys: Keys,
    keep: set[str],
    *,
    min_age: float = DEFAULT_MIN_AGE,
    repack_below: float = DEFAULT_REPACK_BELOW,
    retry: Retry | None = None,
    jobs: int = 8,
) -> Plan:
    """What to remove from the remote ``keys`` reaches, keeping the objects in ``keep``."""
    retry = retry or Retry()
    ages = Ages(time.time(), min_age)
    loose = keys.stamped_objects()
    garbage = {h: e for h, e in loose.items() if h not in keep}
    objects = tuple(
        sorted((object_key(Digest(h, e.size)), e.size) for h, e in garbage.items() if ages.old(e))
    )
    indexes = keys.stamped(packs.INDEXES)
    slots = read_indexes(keys, indexes, retry, jobs)
    young = {h for h, e in _named(indexes, packs.INDEX_NAME).items() if not ages.old(e)}
    pinned = {s.pack.hex for h in young for s in slots[h].values()}
    found = _named(keys.stamped(packs.PACKS), packs.PACK_NAME)
    members: dict[str, dict[str, Slot]] = collections.defaultdict(dict)
    for table in slots.values():
        for h, slot in table.items():
            members[slot.pack.hex].setdefault(h, slot)
    fates = [
        fate
        for p, entry in sorted(found.items())
        if (
            fate := _fate(
                p,
                entry,
                members.get(p, {}),
                keep=keep,
                ages=ages,
                repack_below=repack_below,
                pinned=p in pinned,
            )
        )
    ]
    going = {p.pack.hex for p in fates if p.fate in GOES}
    replaced = {
        h: table for h, table in slots.items() if any(s.pack.hex in going for s in table.values())
    }
    uploads, young_uploads = gc_uploads.stale(keys, ages.old, retry, jobs)
    return Plan(
        keys.label,
        len(keep),
        objects,
        len(garbage) - len(objects),
        _temps(keys, ages),
        tuple(fates),
        replaced,
        frozenset(slots),
        uploads,
        young_uploads,
    )


def _temps(keys: Keys, ages: Ages) -> tuple[tuple[str, int], ...]:
    """The temp files of pushes (``tmp/push-*``: a folder remote's) written before ``ages``."""
    if keys.temps is None:
        return ()
    listed = keys.stamped(keys.temps)
    return tuple(
        sorted(
            (f"{keys.temps}/{n}", e.size)
            for n, e in listed.items()
            if n.startswith(TEMP_PREFIX) and ages.old(e)
        )
    )


def _named(listed: Mapping[str, Entry], pattern: re.Pattern[str]) -> dict[str, Entry]:
    return {m[1]: e for n, e in listed.items() if (m := pattern.fullmatch(n))}


def _fate(
    hexpart: str,
    entry: Entry,
    members: Mapping[str, Slot],
    *,
    keep: set[str],
    ages: Ages,
    repack_below: float,
    pinned: bool,
) -> PackPlan | None:
    """The pack's plan, or ``None`` if it holds no garbage."""
    pack = Digest(hexpart, entry.size)
    if not members:
        return PackPlan(pack, Fate.ORPHAN if ages.old(entry) and not pinned else Fate.YOUNG)
    live = tuple(
        sorted(
            ((Digest(h, s.length), s.offset) for h, s in members.items() if h in keep),
            key=lambda item: item[1],
        )
    )
    dead = [s.length for h, s in members.items() if h not in keep]
    if not dead:
        return None
    facts = {"live": live, "garbage": len(dead), "garbage_bytes": sum(dead)}
    if pinned or not ages.old(entry):
        return PackPlan(pack, Fate.YOUNG, **facts)  # type: ignore[arg-type]
    if not live:
        return PackPlan(pack, Fate.DELETE, **facts)  # type: ignore[arg-type]
    live_bytes = sum(d.size for d, _ in live)
    fate = Fate.REPACK if live_bytes < repack_below * max(entry.size, 1) else Fate.KEEP
    return PackPlan(pack, fate, **facts)  # type: ignore[arg-type]


def read_indexes(
    keys: Keys, listed: Mapping[str, Entry], retry: Retry, jobs: int
) -> dict[str, dict[str, Slot]]:
    """Every index of the remote, by name; refused if one cannot be read or is not whole
    (which packs it keeps alive would not be known)."""
    names = sorted(_named(listed, packs.INDEX_NAME).items())

    def read(item: tuple[str, Entry]) -> dict[str, Slot] | str:
        hexpart, entry = item
        key = packs.index_key(hexpart)
        if entry.size > packs.INDEX_CAP:
            return f"{key}: {entry.size:,} bytes, more than the {packs.INDEX_CAP:,} read"
        try:
            data = packs.read_whole(keys, key, Digest(hexpart, entry.size), retry)
            return packs.parse_index(data, hexpart)
        except (FixtureStoreError, ValueError) as e:
            return f"{key}: {getattr(e, 'message', e)}"

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(names)))) as pool:
        got = dict(zip((h for h, _ in names), pool.map(read, names), strict=True))
    problems = [v for v in got.values() if isinstance(v, str)]
    if problems:
        raise UsageError(
            f"{len(problems)} pack index(es) of the remote {keys.label} cannot be read (first: "
            f"{problems[0]}), so which packs hold referenced objects is not known; refusing "
            "to collect the remote",
            fix="remove the damaged index from the remote (a push from a store holding its "
            "objects writes them again), then run remote gc again",
        )
    return {h: v for h, v in got.items() if not isinstance(v, str)}


# -- execution -------------------------------------------------------------------------------
@dataclass
class Swept:
    """What the execution of a plan did."""

    plan: Plan
    removed: list[str] = field(default_factory=list)
    failed: dict[str, FixtureStoreError] = field(default_factory=dict)
    repacked: dict[str, str] = field(default_factory=dict)  # old pack hex -> new pack hex
    spared: list[str] = field(default_factory=list)  # packs a newer index names
    aborted: list[str] = field(default_factory=list)  # multipart uploads
    index: str | None = None  # the index written

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, object]:
        return {
            "removed": self.removed,
            "repacked": self.repacked,
            "spared": self.spared,
            "aborted": self.aborted,
            "index_written": self.index,
            "failed": [
                {"key": k, "message": e.message, "fix": e.fix} for k, e in self.failed.items()
            ],
        }


def execute(
    keys: Keys,
    the_plan: Plan,
    *,
    retry: Retry | None = None,
    jobs: int = 8,
    on_key: Callable[[str], None] | None = None,
) -> Swept:
    """Do what ``the_plan`` says, in the order that keeps the remote readable (see the module)."""
    retry = retry or Retry()
    swept = Swept(the_plan)
    with tempfile.TemporaryDirectory(prefix="fixture-store-gc-") as scratch:
        new = {}
        for p in the_plan.fated(Fate.REPACK):
            got = _repack(keys, p, retry, Path(scratch))
            if isinstance(got, FixtureStoreError):
                swept.failed[p.key] = got  # kept whole: its slots are carried
            else:
                new[p.pack.hex] = got
                swept.repacked[p.pack.hex] = got[0].hex
        gone = {p.pack.hex for p in the_plan.fated(Fate.DELETE, Fate.ORPHAN)} | set(new)
        if the_plan.replaced:
            swept.index = _write_index(
                keys, the_plan.replaced, gone, new, retry=retry, scratch=Path(scratch)
            )
            old = [packs.index_key(h) for h in the_plan.replaced]
            _remove(keys, old, swept, retry=retry, jobs=jobs)  # one left stays read below
    # Every pack an index names as deletion starts is spared: one written since the plan (a
    # push), the one written above (a repack may write a pack the plan found unnamed, left by
    # a gc cut before its index), a replaced one that could not be removed. The indexes the
    # plan read and kept name none that goes.
    spared = _named_since(keys, set(the_plan.indexes) - set(the_plan.replaced), retry, jobs)
    swept.spared = sorted(gone & spared)
    doomed = [packs.pack_key(h) for h in sorted(gone - spared)]
    doomed += [key for key, _ in (*the_plan.objects, *the_plan.temps)]
    _remove(keys, doomed, swept, retry=retry, jobs=jobs, on_key=on_key)
    swept.aborted, failed = gc_uploads.abort_all(
        keys, the_plan.uploads, retry=retry, jobs=jobs, on_key=on_key
    )
    swept.failed.update(failed)
    if the_plan.replaced:  # the list an https mirror reads the packs by names the new index
        try:
            packs.refresh_list(keys, retry)
        except FixtureStoreError as e:
            swept.failed[packs.LIST_KEY] = e
    return swept


def _named_since(keys: Keys, known: set[str], retry: Retry, jobs: int) -> set[str]:
    """The packs that the remote's indexes, but the ``known`` ones, name."""
    listed = keys.stamped(packs.INDEXES)
    fresh = {
        n: e
        for n, e in listed.items()
        if (m := packs.INDEX_NAME.fullmatch(n)) and m[1] not in known
    }
    return {
        s.pack.hex
        for table in read_indexes(keys, fresh, retry, jobs).values()
        for s in table.values()
    }


def _remove(
    keys: Keys,
    doomed: Sequence[str],
    swept: Swept,
    *,
    retry: Retry,
    jobs: int,
    on_key: Callable[[str], None] | None = None,
) -> None:
    batches = [doomed[i : i + DELETE_BATCH] for i in range(0, len(doomed), DELETE_BATCH)]

    def one(batch: Sequence[str]) -> dict[str, FixtureStoreError]:
        try:
            return retry.run(lambda: keys.delete(batch))
        except FixtureStoreError as e:
            return dict.fromkeys(batch, e)

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(batches)))) as pool:
        for batch, failed in zip(batches, pool.map(one, batches), strict=True):
            swept.failed.update(failed)
            for key in batch:
                if key not in failed:
                    swept.removed.append(key)
                if on_key is not None:
                    on_key(key)


def _write_index(
    keys: Keys,
    replaced: Mapping[str, Mapping[str, Slot]],
    gone: set[str],
    new: Mapping[str, tuple[Digest, list[tuple[Digest, int]]]],
    *,
    retry: Retry,
    scratch: Path,
) -> str | None:
    """One index naming what survives of the ``replaced`` ones (their entries in packs that
    stay, and the repacked objects in their new packs), written once and read back; its name,
    or ``None`` if nothing survives."""
    by_pack: dict[Digest, dict[str, tuple[Digest, int]]] = collections.defaultdict(dict)
    for table in replaced.values():
        for h, slot in table.items():
            if slot.pack.hex not in gone:
                by_pack[slot.pack][h] = (Digest(h, slot.length), slot.offset)
    for pack, members in new.values():
        by_pack[pack].update({d.hex: (d, offset) for d, offset in members})
    if not by_pack:
        return None
    data = packs.index_bytes(
        [(p, sorted(m.values(), key=lambda x: x[1])) for p, m in sorted(by_pack.items())]
    )
    digest = digests.of_bytes(data)
    key = packs.index_key(digest.hex)
    _put_checked(keys, key, data, digest, retry=retry, scratch=scratch)
    return digest.hex


def _put_checked(
    keys: Keys, key: str, data: bytes | Path, digest: Digest, *, retry: Retry, scratch: Path
) -> None:
    """Upload ``data`` (bytes, or a file) under ``key`` write-once, then read it back whole and
    check it is ``digest``: nothing is removed on the strength of a write not seen whole."""
    if isinstance(data, bytes):
        fd, tmp = tempfile.mkstemp(prefix="gc-", dir=scratch)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        path = Path(tmp)
    else:
        path = data
    retry.run(lambda: keys.put(key, path, digest), deadline=retry.deadline(digest.size))
    back = packs.read_whole(keys, key, digest, retry)
    if digests.of_bytes(back) != digest:
        raise RemoteError(
            f"remote {keys.label}: {key} read back is not the bytes gc wrote; nothing was removed",
            fix=f"remove {key} from the remote, then run remote gc again",
        )


def _repack(
    keys: Keys, p: PackPlan, retry: Retry, scratch: Path
) -> tuple[Digest, list[tuple[Digest, int]]] | FixtureStoreError:
    """The pack's referenced objects copied into a new pack (each hashed on the way and checked
    against its digest), uploaded write-once and read back: the new pack and its members."""
    fd, tmp = tempfile.mkstemp(prefix="repack-", dir=scratch)
    try:
        with os.fdopen(fd, "w+b") as out:
            members: list[tuple[Digest, int]] = []
            wanted = [(Slot(p.pack, offset, d.size), d) for d, offset in p.live]
            for run in packs.runs(wanted):
                members += _copy_run(keys, p.key, run, out, retry)
        with open(tmp, "rb") as f:
            new = digests.of_stream(f)
        _put_checked(keys, packs.pack_key(new.hex), Path(tmp), new, retry=retry, scratch=scratch)
        return new, members
    except FixtureStoreError as e:
        return RemoteError(
            f"{e.message}; the pack {p.key} was kept whole", fix=e.fix or "run remote gc again"
        )
    finally:
        os.unlink(tmp)


def _copy_run(
    keys: Keys, key: str, run: packs.Run, out: BinaryIO, retry: Retry
) -> list[tuple[Digest, int]]:
    """Copy one run's objects to the end of ``out`` (again from there if a try is cut)."""
    begin = out.seek(0, os.SEEK_END)

    def attempt() -> list[tuple[Digest, int]]:
        out.seek(begin)
        out.truncate()
        start = run.items[0][0].offset
        stream = keys.open_range(key, run.pack, start, run.end - start)
        try:
            body = GuardedBody(stream, run.end - start, f"remote {keys.label}: {key}")
            return _copy_pieces(keys, key, body, run, out)
        finally:
            stream.close()

    return retry.run(attempt, deadline=retry.deadline(run.end - run.items[0][0].offset))


def _copy_pieces(
    keys: Keys, key: str, body: GuardedBody, run: packs.Run, out: BinaryIO
) -> list[tuple[Digest, int]]:
    members = []
    at = run.items[0][0].offset
    for slot, d in run.items:
        _skip(body, slot.offset - at)
        offset = out.tell()
        hasher = digests.Hasher()
        left = slot.length
        while left and (chunk := body.read(min(left, digests.CHUNK))):
            hasher.update(chunk)
            out.write(chunk)
            left -= len(chunk)
        if left or hasher.digest() != d:
            raise RemoteError(
                f"the remote {keys.label} holds other bytes for {d.text} in the pack {key} "
                f"(bytes {slot.offset}-{slot.offset + slot.length - 1})",
                fix=f"push the object again from a store where it verifies, then remove {key}",
            )
        members.append((d, offset))
        at = slot.offset + slot.length
    return members


def _skip(body: GuardedBody, n: int) -> None:
    while n > 0 and (chunk := body.read(min(n, digests.CHUNK))):
        n -= len(chunk)
