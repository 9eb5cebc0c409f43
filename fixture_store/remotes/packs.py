"""Packs: small objects moved many to a request (a folder or an S3 remote).

A remote's request rate, not its bandwidth, bounds moving many small objects one per key (a
loopback S3 server answers ~100-150 requests a second; a real one at 20-100 ms a request is
no better from one client). So push puts the objects under :attr:`Packing.threshold` end to end
into pack files, and one index that says where each is::

    <prefix>/objects/packs/<64 hex>.pack          objects' bytes end to end
    <prefix>/objects/packs/index/<64 hex>.json    {"format", "packs": [[hex, size]…],
                                                   "objects": {hex: [pack number, offset, length]}}

Both are named by the SHA-256 of their own bytes and written once, like every remote object.
Beside them, one file is rewritten (at once, never torn) by every push and gc: the list of the
indexes, ``<prefix>/objects/packs/indexes.json`` (``{"format", "indexes": {hex: size}}``), for
a remote that lists nothing, an https mirror of the folder or bucket (as git's dumb protocol
reads ``objects/info/packs``). It is a hint like the rest: each index it names is fetched and
checked as a listed one is; one it misses is not read, and its objects read as missing.
A push writes its packs first and its index last: an index names only packs that were written
whole, so a push cut anywhere leaves at most packs no index names (the next push writes the
same packs again, found already there, and then the index). Objects from the threshold on stay
one per key, and a remote may hold both (a remote pushed before packs existed reads as before).

An index is a claim like any other answer of a remote (DESIGN decision 9): it is used only if
its bytes hash to its name and it is well-formed (read by the one bounded JSON reader), and only
to decide which bytes to ask for. Each of its entries stands alone (DESIGN decision 20): an
entry that is not a digest and a range, names no pack of the index or reaches past its pack's
end is refused by itself, and a pull names it for that object only; an entry that overlaps
another is read on its own range, never as part of a run its neighbours share, so its wrong
bytes cannot shift theirs.
Pull reads a pack's wanted objects as few byte ranges (S3 ``Range``, a folder ``pread``), and
stages each object with the digest its record expects, hashed as it is written: one damaged
byte refuses the one object it belongs to, and every other object of the pack lands.

Every request of the packed path runs under a deadline given by its caller (DESIGN decision
14): the listing and reads of the indexes, and each run of ranges, end by the same deadline an
object at its own key would have (``Retry.deadline`` for the bytes, the download policy's
deadline when one is set), counted from the start of the packed part, never one more each.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fixture_store import bounded_json
from fixture_store.errors import FixtureStoreError, IntegrityError, UsageError
from fixture_store.limits import KiB, MiB
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Staged, Staging, Store
from fixture_store.registry import nesting
from fixture_store.remotes.base import (
    MORE_TIME_FIX,
    GuardedBody,
    MissingRemoteObject,
    RemoteError,
    Retry,
    TransientRemoteError,
)
from fixture_store.remotes.config import RemoteSpec
from fixture_store.remotes.keys import Keys, RangeReads
from fixture_store.sources.transfer import Deadline, DownloadPolicy

# Objects under 1 MiB go into packs: below it a request's round trip (10 ms on loopback, 20-100
# ms to a cloud bucket) costs more than sending the bytes; from it on the bytes dominate, and an
# object of its own keeps its own key (readable by any S3 tool, deduplicated across pushes).
PACK_THRESHOLD = 1 * MiB
# Packs of up to 64 MiB: 16 requests a GiB, a bounded temp file per pack being written, and a
# pack cut mid-push costs at most that much to send again. Above S3's multipart threshold, a
# pack goes up in parts sent in parallel.
PACK_SIZE = 64 * MiB
# Pull reads the wanted objects of a pack as runs of ranges: neighbours less than RUN_GAP apart
# share one request (reading a few unwanted bytes costs less than a request), and a run stops
# at RUN_SIZE (runs go in parallel, and a cut run is read again from its first object not
# yet received). A run also stops at RUN_OBJECTS objects: each run's objects are staged in
# order by the thread that reads it, so many small objects of one pack are spread over several
# runs read in parallel (30,000 objects of a few bytes: 59 requests, staged by 8 threads).
RUN_GAP = 256 * KiB
RUN_SIZE = 16 * MiB
RUN_OBJECTS = 512
INDEX_CAP = 256 * MiB  # an index longer than this is not read (~2.5 million objects)
INDEX_FORMAT = "fixture-store/pack-index/1"
PACKS = "objects/packs"
INDEXES = f"{PACKS}/index"
LIST_KEY = f"{PACKS}/indexes.json"
LIST_FORMAT = "fixture-store/pack-indexes/1"
LIST_CAP = 4 * MiB  # ~50,000 indexes (a gc merges them into one); a longer list is not read
# An index nests three levels ({"objects": {hex: [n, offset, length]}}), a list two.
_JSON_DEPTH = 4
_NAME = re.compile(r"([0-9a-f]{64})\.json")
PACK_NAME = re.compile(r"([0-9a-f]{64})\.pack")
INDEX_NAME = _NAME
_HEX = re.compile(r"[0-9a-f]{64}")


def pack_key(hexpart: str) -> str:
    return f"{PACKS}/{hexpart}.pack"


def index_key(hexpart: str) -> str:
    return f"{INDEXES}/{hexpart}.json"


@dataclass(frozen=True)
class Packing:
    """Which objects a push packs (``size < threshold``; 0: none) and how large a pack grows."""

    threshold: int = PACK_THRESHOLD
    pack_size: int = PACK_SIZE

    def __post_init__(self) -> None:
        if self.threshold < 0 or self.pack_size <= 0:
            raise UsageError(
                f"pack_threshold must be 0 or more bytes and packs larger than 0 bytes (got "
                f"{self.threshold}, {self.pack_size})",
                fix="set the remote's pack_threshold to a number of bytes (0: no packs)",
            )

    def packs(self, digest: Digest) -> bool:
        return digest.size < self.threshold


def packing_of(spec: RemoteSpec) -> Packing:
    """The packing a configured remote asks for (its ``pack_threshold``), else the default."""
    return Packing() if spec.pack_threshold is None else Packing(threshold=spec.pack_threshold)


ONE_PER_KEY = Packing(threshold=0)  # no packs: every object under its own key, as before packs


@dataclass(frozen=True, slots=True)
class Slot:
    """Where an index says an object is: a pack (its digest) and a range of it."""

    pack: Digest
    offset: int
    length: int


@dataclass
class PackIndex:
    """Every pack index of a remote, merged; ``problems`` says which were not used and why;
    ``refused``, the entries (by object hex) refused on their own, and why."""

    slots: dict[str, Slot] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    unlisted: FixtureStoreError | None = None  # the listing of the indexes failed
    refused: dict[str, str] = field(default_factory=dict)
    cut: bool = False  # some index was not read for a transient cause (its deadline passed)

    def missing(self, label: str, digest: Digest) -> RemoteError | None:
        """What to say of an object the remote holds neither in a pack nor at its own key, if
        its own index entry was refused, or some index could not be used (it may have been
        there)."""
        entry = self.refused.get(digest.hex)
        if entry is not None:
            return MissingRemoteObject(
                f"{label} does not hold {digest} at its own key, and its pack index entry was "
                f"refused: {entry}"
            )
        if not self.problems:
            return None
        shown = "; ".join(self.problems[:3]) + (" …" if len(self.problems) > 3 else "")  # noqa: PLR2004
        said = (
            f"{label} does not hold {digest} at its own key, and some of its pack indexes could "
            f"not be used: {shown}"
        )
        if self.cut:  # not a plain miss: the remote failed to answer in time
            return TransientRemoteError(said, fix=MORE_TIME_FIX)
        return MissingRemoteObject(said)

    def slot(self, digest: Digest) -> Slot | None:
        """Where ``digest``'s bytes are in a pack, if an index says so with the record's size."""
        found = self.slots.get(digest.hex)
        return found if found is not None and found.length == digest.size else None


def sooner(own: Deadline, overall: Deadline | None) -> Deadline:
    """``own``, or ``overall`` if it ends first."""
    return overall if overall is not None and overall.ends_at < own.ends_at else own


def load_index(
    keys: RangeReads, retry: Retry, jobs: int, deadline: Deadline | None = None
) -> PackIndex:
    """The remote's pack indexes (a listing, and a read of each), merged; every request ends
    by ``deadline`` (default: ``retry``'s for a request of no size, from now)."""
    index = PackIndex()
    deadline = deadline or retry.deadline()
    try:
        listed = retry.run(lambda: keys.listing(INDEXES), deadline=deadline)
    except FixtureStoreError as e:
        index.unlisted = e
        index.problems.append(f"cannot list {INDEXES}/: {e.message}")
        return index
    names = [(m[1], size) for n, size in listed.items() if (m := _NAME.fullmatch(n))]
    names.sort()

    def read(item: tuple[str, int]) -> Entries | str | TransientRemoteError:
        hexpart, size = item
        if size > INDEX_CAP:
            return f"{index_key(hexpart)}: {size:,} bytes, more than the {INDEX_CAP:,} read"
        try:
            data = read_whole(keys, index_key(hexpart), Digest(hexpart, size), retry, deadline)
            return parse_entries(data, hexpart)
        except TransientRemoteError as e:
            return e
        except (FixtureStoreError, ValueError) as e:
            return f"{index_key(hexpart)}: {e}"

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(names)))) as pool:
        for (hexpart, _), got in zip(names, pool.map(read, names), strict=True):
            if isinstance(got, TransientRemoteError):
                index.cut = True
                index.problems.append(f"{index_key(hexpart)}: {got.message}")
                continue
            if isinstance(got, str):
                index.problems.append(got)
                continue
            for obj, slot in got.slots.items():
                index.slots.setdefault(obj, slot)
            for obj, why in got.refused.items():
                index.refused.setdefault(obj, f"{index_key(hexpart)}: {why}")
    for obj in index.slots.keys() & index.refused.keys():  # another index places it
        del index.refused[obj]
    return index


@dataclass(frozen=True)
class Entries:
    """What one index says: the slots of its valid entries, and each refused entry (by its
    key, cut to 80 characters if it is not a digest) with why."""

    slots: dict[str, Slot]
    refused: dict[str, str]


def parse_index(data: bytes, hexpart: str) -> dict[str, Slot]:
    """The slots of an index whose bytes are ``data`` and whose name is ``hexpart``, every entry
    valid; :class:`ValueError` naming the first refused entry otherwise. A remote's gc needs
    the whole index (which packs it keeps alive); a pull judges entries one by one
    (:func:`parse_entries`)."""
    entries = parse_entries(data, hexpart)
    for obj, why in entries.refused.items():
        raise ValueError(f"the entry of {obj}: {why}")
    return entries.slots


def parse_entries(data: bytes, hexpart: str) -> Entries:
    """Each entry of an index whose bytes are ``data`` and whose name is ``hexpart``, judged
    on its own; :class:`ValueError` saying why if the bytes are not its name's or not a pack
    index at all (then no entry of it is used)."""
    if digests.of_bytes(data).hex != hexpart:
        raise ValueError("its bytes are not the ones its name is the digest of (damaged)")
    # Bounded as a document (size, depth); each value is judged in its entry, so a number no
    # entry can hold (30 digits, NaN) refuses that entry, not the index.
    doc = bounded_json.loads(data, cap=INDEX_CAP, max_depth=_JSON_DEPTH)
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT:
        raise ValueError(f"not a pack index (format {INDEX_FORMAT!r})")
    packs = [_pack(p) for p in _list(doc.get("packs"))]
    objects = doc.get("objects")
    if not isinstance(objects, dict):
        raise ValueError("'objects' is not a table")
    slots: dict[str, Slot] = {}
    refused: dict[str, str] = {}
    for obj, where in objects.items():
        try:
            slots[obj] = _slot(obj, where, packs)
        except ValueError as e:
            refused[obj if _HEX.fullmatch(obj) else repr(obj[:80])] = str(e)
    return Entries(slots, refused)


def _slot(obj: str, where: object, packs: Sequence[Digest | str]) -> Slot:
    """The slot one entry names; :class:`ValueError` saying what is wrong with it."""
    if _HEX.fullmatch(obj) is None:
        raise ValueError("its key is not a digest (64 lower-case hex characters)")
    number, offset, length = _numbers(where)
    if number >= len(packs):
        raise ValueError(f"it names pack {number}; the index lists {len(packs)}")
    pack = packs[number]
    if isinstance(pack, str):
        raise ValueError(f"its pack {number} {pack}")
    if offset + length > pack.size:
        raise ValueError(
            f"its bytes {offset}-{offset + length - 1} reach past the end of its pack "
            f"{pack_key(pack.hex)} ({pack.size:,} bytes)"
        )
    return Slot(pack, offset, length)


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise ValueError("'packs' is not a list")
    return value


def _pack(value: object) -> Digest | str:
    """A pack of the index, or what is wrong with its entry (its objects are refused)."""
    if not (isinstance(value, list) and len(value) == 2):  # noqa: PLR2004 - [hex, size]
        return "is not [digest, size]"
    hexpart, size = value
    if not isinstance(hexpart, str) or _HEX.fullmatch(hexpart) is None:
        return "has a digest that is not 64 lower-case hex characters"
    if type(size) is not int or size < 0:
        return f"has a size {size!r} that is not a count"
    return Digest(hexpart, size)


def _numbers(value: object) -> tuple[int, int, int]:
    if not (isinstance(value, list) and len(value) == 3):  # noqa: PLR2004 - [pack, offset, length]
        raise ValueError("an entry is not [pack, offset, length]")
    number, offset, length = (_count(v) for v in value)
    return number, offset, length


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def index_bytes(packs: Sequence[tuple[Digest, Sequence[tuple[Digest, int]]]]) -> bytes:
    """The index of ``packs`` (each: its digest, and its objects with their offsets)."""
    objects = {
        d.hex: [number, offset, d.size]
        for number, (_, members) in enumerate(packs)
        for d, offset in members
    }
    doc = {
        "format": INDEX_FORMAT,
        "packs": [[p.hex, p.size] for p, _ in packs],
        "objects": objects,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def list_bytes(indexes: Mapping[str, int]) -> bytes:
    """The list of pack indexes (name hex → size) a mirror reads (:data:`LIST_KEY`)."""
    doc = {"format": LIST_FORMAT, "indexes": dict(sorted(indexes.items()))}
    return json.dumps(doc, separators=(",", ":")).encode()


def parse_list(data: bytes) -> dict[str, int]:
    """The index names and sizes of a list's bytes, read through the bounded JSON reader;
    :class:`ValueError` saying why if it is not a well-formed list."""
    if len(data) > LIST_CAP:
        raise ValueError(f"longer than the {LIST_CAP:,} bytes read")
    doc = nesting.parse_bounded(data, limit=_JSON_DEPTH)
    if not isinstance(doc, dict) or doc.get("format") != LIST_FORMAT:
        raise ValueError(f"not a list of pack indexes (format {LIST_FORMAT!r})")
    indexes = doc.get("indexes")
    if not isinstance(indexes, dict):
        raise ValueError("'indexes' is not a table")
    for name in indexes:
        if _HEX.fullmatch(name) is None:
            raise ValueError(f"the entry {name[:80]!r} is not an index's digest")
    return {f"{name}.json": _count(size) for name, size in indexes.items()}


def indexes_listed(keys: Keys) -> dict[str, int]:
    """The remote's pack indexes as its listing shows them: name hex → size."""
    return {m[1]: size for n, size in keys.listing(INDEXES).items() if (m := _NAME.fullmatch(n))}


def refresh_list(keys: Keys, retry: Retry, rounds: int = 5) -> None:
    """Make the remote's :data:`LIST_KEY` name exactly the indexes it holds: written (at once),
    then the indexes listed again, and written again until that listing shows no other index,
    so that of several pushes ending together the last to write names every index written
    before it listed."""
    written: dict[str, int] | None = None
    deadline = retry.deadline()  # one for every round, never one each
    for _ in range(rounds):
        listed = retry.run(lambda: indexes_listed(keys), deadline=deadline)
        if listed == written:
            return
        replace = functools.partial(keys.replace, LIST_KEY, list_bytes(listed))
        retry.run(replace, deadline=deadline)
        written = listed


def lacks_list(keys: Keys) -> bool:
    """Whether the remote has no :data:`LIST_KEY` (one packed before lists were written)."""
    return LIST_KEY.rsplit("/", 1)[1] not in keys.listing(PACKS)


def read_whole(
    keys: RangeReads, key: str, digest: Digest, retry: Retry, deadline: Deadline | None = None
) -> bytes:
    """The ``digest.size`` bytes at ``key``, read bounded and retried, by ``deadline`` if it
    ends sooner than the read's own (not checked: the caller hashes them)."""

    def attempt() -> bytes:
        stream = keys.open_range(key, digest, 0, digest.size)
        try:
            body = GuardedBody(stream, digest.size, f"remote {keys.label}: {key}")
            data = bytearray()
            while chunk := body.read(digests.CHUNK):  # a read gives what the connection has
                data += chunk
            return bytes(data)
        finally:
            stream.close()

    return retry.run(attempt, deadline=sooner(retry.deadline(digest.size), deadline))


# -- push -----------------------------------------------------------------------------------
# What push made of one object: True (sent now), False (already there), or the error.
Sent = bool | FixtureStoreError


def push_packed(
    store: Store,
    keys: Keys,
    objects: Sequence[Digest],
    *,
    packing: Packing,
    retry: Retry,
    jobs: int,
) -> dict[str, Sent]:
    """Push ``objects`` (verified in the store, under the threshold, in no index of the
    remote) in packs, then their index; those the remote holds one per key are left."""
    held = keys.objects() if objects else {}
    results: dict[str, Sent] = {d.hex: False for d in objects if held.get(d.hex) == d.size}
    groups = _groups([d for d in objects if d.hex not in results], packing.pack_size)
    written: list[tuple[Digest, list[tuple[Digest, int]]]] = []
    # Packs and the index are made in a folder only this process can enter (mkdtemp: 0700), so
    # no other user of a shared temp folder can replace or read a file between its writing and
    # its upload.
    with (
        tempfile.TemporaryDirectory(prefix="fixture-store-push-") as scratch,
        ThreadPoolExecutor(max_workers=max(1, min(jobs, len(groups)))) as pool,
    ):
        for group, got in zip(
            groups,
            pool.map(lambda g: _write_pack(store, keys, g, retry, Path(scratch)), groups),
            strict=True,
        ):
            if isinstance(got, FixtureStoreError):
                results.update(dict.fromkeys((d.hex for d in group), got))
                continue
            pack, members, failed = got
            results.update(failed)
            if members:
                written.append((pack, members))
        if written:
            sent = _write_index(keys, written, retry, Path(scratch))
            results.update({d.hex: sent for _, members in written for d, _ in members})
    return results


def _groups(objects: Sequence[Digest], pack_size: int) -> list[list[Digest]]:
    """The objects in order, cut into groups of at most ``pack_size`` bytes (an object is
    never split)."""
    groups: list[list[Digest]] = []
    size = pack_size
    for d in objects:
        if size + d.size > pack_size and (not groups or groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(d)
        size += d.size
    return groups


def _write_pack(
    store: Store, keys: Keys, group: Sequence[Digest], retry: Retry, scratch: Path
) -> tuple[Digest, list[tuple[Digest, int]], dict[str, Sent]] | FixtureStoreError:
    """Copy the group's objects into a temp pack in ``scratch`` (each hashed as it is copied:
    one that changed in the store is left out), then upload it write-once."""
    fd, tmp = tempfile.mkstemp(prefix="pack-", dir=scratch)
    try:
        members: list[tuple[Digest, int]] = []
        failed: dict[str, Sent] = {}
        with os.fdopen(fd, "wb") as out:
            for d in group:
                offset = out.tell()
                if _copy_checked(store, d, out) != d:
                    out.seek(offset)
                    out.truncate()
                    failed[d.hex] = RemoteError(
                        f"the store's object {d} changed while it was packed; it was not sent",
                        fix="fixture-store verify --full, then push again",
                    )
                    continue
                members.append((d, offset))
        if not members:
            return Digest(_EMPTY, 0), [], failed
        with open(tmp, "rb") as f:
            pack = digests.of_stream(f)
        try:
            retry.run(
                lambda: keys.put(pack_key(pack.hex), Path(tmp), pack),
                deadline=retry.deadline(pack.size),
            )
        except FixtureStoreError as e:
            return e
        return pack, members, failed
    except OSError as e:
        return RemoteError(f"cannot write a pack in the temp folder: {e}")
    finally:
        os.unlink(tmp)


def _copy_checked(store: Store, digest: Digest, out: BinaryIO) -> Digest | None:
    """Copy the store's object into ``out``, opened through the path primitive (a link or a
    FIFO at its name is refused, never followed); its digest as read, ``None`` if unreadable."""
    hasher = digests.Hasher()
    try:
        with store.open_object(digest) as src:
            while chunk := src.read(digests.CHUNK):
                hasher.update(chunk)
                out.write(chunk)
    except OSError:
        return None
    return hasher.digest()


def _write_index(
    keys: Keys,
    written: Sequence[tuple[Digest, Sequence[tuple[Digest, int]]]],
    retry: Retry,
    scratch: Path,
) -> Sent:
    """Upload the index of the packs written (last: it names only packs that are whole)."""
    data = index_bytes(written)
    digest = digests.of_bytes(data)
    fd, tmp = tempfile.mkstemp(prefix="index-", dir=scratch)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        retry.run(
            lambda: keys.put(index_key(digest.hex), Path(tmp), digest),
            deadline=retry.deadline(digest.size),
        )
    except FixtureStoreError as e:
        return RemoteError(
            f"{e.message} (the packs were written, their index was not: they are not used "
            "until a push writes it)",
            fix="push again: the packs already there are not sent again",
        )
    finally:
        os.unlink(tmp)
    return True


_EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# -- pull -----------------------------------------------------------------------------------
# What pull made of one object: staged (received and checked), or the error.
Got = Staged | FixtureStoreError


@dataclass(frozen=True)
class Run:
    """Objects of one pack read with one range: ``items`` in offset order."""

    pack: Digest
    items: tuple[tuple[Slot, Digest], ...]

    @property
    def end(self) -> int:
        slot = self.items[-1][0]
        return slot.offset + slot.length


def runs(slots: Iterable[tuple[Slot, Digest]]) -> list[Run]:
    """The reads that bring these objects: by pack, in offset order, neighbours closer than
    :data:`RUN_GAP` together, each at most :data:`RUN_SIZE` long (or one object) and of at
    most :data:`RUN_OBJECTS` objects. An entry that starts before the previous one ends (an
    index that lies about one of them) starts a run of its own: a run is read front to back,
    and an overlap would hand the next object bytes shifted by the bad entry."""
    by_pack: dict[str, list[tuple[Slot, Digest]]] = collections.defaultdict(list)
    for slot, d in slots:
        by_pack[slot.pack.hex].append((slot, d))
    found: list[Run] = []
    for items in by_pack.values():
        items.sort(key=lambda item: item[0].offset)
        current: list[tuple[Slot, Digest]] = []
        for slot, d in items:
            if current:
                start, last = current[0][0], current[-1][0]
                end = last.offset + last.length
                if (
                    slot.offset < end
                    or slot.offset - end > RUN_GAP
                    or slot.offset + slot.length - start.offset > RUN_SIZE
                    or len(current) >= RUN_OBJECTS
                ):
                    found.append(Run(slot.pack, tuple(current)))
                    current = []
            current.append((slot, d))
        found.append(Run(items[0][0].pack, tuple(current)))
    return found


def pull_packed(
    staging: Staging,
    keys: RangeReads,
    wanted: Mapping[str, tuple[Slot, Digest]],
    *,
    retry: Retry,
    rate: DownloadPolicy,
    jobs: int,
    deadline: Deadline | None = None,
) -> dict[str, Got]:
    """Stage the ``wanted`` objects (hex → where, and the digest the record expects) from
    their packs, a run of ranges at a time, every run ended by ``deadline`` if it ends sooner
    than the run's own; each object is checked on its own."""
    todo = runs(wanted.values())
    results: dict[str, Got] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(todo)))) as pool:
        for got in pool.map(
            lambda run: _pull_run(staging, keys, run, retry, rate, deadline=deadline), todo
        ):
            results.update(got)
    return results


def _pull_run(
    staging: Staging,
    keys: RangeReads,
    run: Run,
    retry: Retry,
    rate: DownloadPolicy,
    *,
    deadline: Deadline | None,
) -> dict[str, Got]:
    results: dict[str, Got] = {}
    pending = collections.deque(run.items)
    key = pack_key(run.pack.hex)

    def attempt() -> None:
        start = pending[0][0].offset
        stream = keys.open_range(key, run.pack, start, run.end - start)
        try:
            what = f"remote {keys.label}: {key} bytes {start}-{run.end - 1}"
            body = GuardedBody(stream, run.end - start, what, rate.meter())
            at = start
            while pending:
                slot, d = pending[0]
                _Piece(body, slot.offset - at).drain()
                piece = _Piece(body, slot.length)
                try:
                    results[d.hex] = staging.stream(piece, d)  # type: ignore[arg-type]
                except IntegrityError as e:
                    piece.drain()
                    results[d.hex] = _damaged(keys, key, slot, d, e)
                at = slot.offset + slot.length
                pending.popleft()
        finally:
            stream.close()

    try:
        own = retry.deadline(run.end - run.items[0][0].offset, rate)
        retry.run(attempt, deadline=sooner(own, deadline))
    except FixtureStoreError as e:
        results.update(dict.fromkeys((d.hex for _, d in pending), e))
    return results


def _damaged(
    keys: RangeReads, key: str, slot: Slot, digest: Digest, e: IntegrityError
) -> RemoteError:
    where = "the folder or bucket the mirror serves" if keys.read_only else "the remote"
    return RemoteError(
        f"the remote {keys.label} holds other bytes for {digest.text} where its pack index "
        f"entry places it, in the pack {key} (bytes {slot.offset}-"
        f"{slot.offset + slot.length - 1}): {e.message}; nothing of it was stored (the entry or "
        "the pack is damaged; the other objects of the pack are judged on their own)",
        fix=f"remove {key} and every index under {INDEXES}/ that names it from {where}, then "
        "push again from a store where the object verifies",
    )


class _Piece:
    """The next ``size`` bytes of a body, then the end."""

    def __init__(self, body: GuardedBody, size: int) -> None:
        self.body, self.left = body, size

    def read(self, n: int = -1) -> bytes:
        want = self.left if n is None or n < 0 else min(n, self.left)
        if want <= 0:
            return b""
        data = self.body.read(want)
        self.left -= len(data)
        return data

    def readinto(self, buf: memoryview) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def drain(self) -> None:
        while self.read(digests.CHUNK):
            pass
