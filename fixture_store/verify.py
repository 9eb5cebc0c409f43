"""Verification, the one door: a record is valid, its object is present, digest and size match.

Nothing without a record is trusted; every refusal is a typed error (see errors.py) naming the
artifact, expected vs actual digest, and the command that fixes it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from fixture_store.errors import RegistryError, UnknownArtifactError
from fixture_store.objects.digests import Algorithm, Digest
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.objects.store import ObjectFiles, Store
from fixture_store.readers import content
from fixture_store.registry import Record, Registry
from fixture_store.verifying.hashing import (
    SMALL_OBJECT,
    Hashed,
    HashJob,
    _hashing,
    _largest_first,
    _pool_size,
    hash_path,
)
from fixture_store.verifying.records import assemble, repair_command
from fixture_store.verifying.results import ObjectCheck, ObjectKey, Result, Status, object_key
from fixture_store.verifying.verifier import Verifier

# The names callers import from here, wherever they live now (the door stays this module).
__all__ = [
    "SMALL_OBJECT",
    "HashJob",
    "Hashed",
    "ObjectCheck",
    "ObjectKey",
    "Result",
    "Status",
    "Verifier",
    "VerifyPlan",
    "_hashing",
    "_pool_size",
    "assemble",
    "hash_path",
    "object_key",
    "presence_by_family",
    "present",
    "repair_command",
    "verify_names",
]


@cyclic_gc_paused()
def verify_names(  # noqa: PLR0913 - the verify command's options, each keyword-only
    store: Store,
    registry: Registry,
    names: Iterable[str],
    *,
    full: bool = False,
    workers: int | None = None,
    on_result: Callable[[Result], None] | None = None,
    algorithm: Algorithm = Algorithm.AUTO,
    executor: str = "thread",
    verifier: Verifier | None = None,
    flush: bool = True,
) -> list[Result]:
    """Verify artifacts by name; results in the order of ``names``.

    Work is planned across objects, not records (see :class:`VerifyPlan`): every distinct
    object is checked once (the node corpus shares many members), the stat-and-cache pass runs
    first without a pool (a warm run costs stat calls only), and only the objects left are
    hashed in parallel, largest first. ``executor`` is "thread" (hashlib and BLAKE3 release the
    GIL on large buffers) or "process". With ``flush=False`` the verified-state cache saves new
    entries only when a batch is due (see :meth:`VerifiedCache.flush_due`): for callers that
    verify one artifact at a time.
    """
    verifier = verifier or Verifier(store, full=full, algorithm=algorithm)
    plan = VerifyPlan.of(store, registry, names)
    return plan.execute(
        verifier, workers=workers, executor=executor, on_result=on_result, flush=flush
    )


@dataclass(frozen=True)
class VerifyPlan:
    """What verifying some names takes, decided from the registry alone (nothing read yet).

    ``settled`` holds the results the registry decides by itself (an invalid record, an unknown
    name, a gap without an object), ``records`` every other record with the keys of its
    objects, and ``objects`` each distinct object once, with what it must match. Inspect it,
    then :meth:`execute` it; indexes are positions in ``names``.
    """

    store: Store
    names: Sequence[str]
    settled: Mapping[int, Result]
    records: Mapping[int, tuple[Record, list[ObjectKey]]]
    objects: Mapping[ObjectKey, tuple[Digest, str | None]]

    @classmethod
    def of(cls, store: Store, registry: Registry, names: Iterable[str]) -> VerifyPlan:
        names = list(names)
        invalid = dict(registry.invalid())
        settled: dict[int, Result] = {}
        records: dict[int, tuple[Record, list[ObjectKey]]] = {}
        objects: dict[ObjectKey, tuple[Digest, str | None]] = {}
        for i, name in enumerate(names):
            record = _lookup(registry, invalid, name)
            if isinstance(record, Result):
                settled[i] = record
                continue
            keys = _object_keys(objects, record)
            if keys:
                records[i] = (record, keys)
            else:
                settled[i] = assemble(record, store, _never)
        return cls(store, names, settled, records, objects)

    def execute(
        self,
        verifier: Verifier,
        *,
        workers: int | None = None,
        executor: str = "thread",
        on_result: Callable[[Result], None] | None = None,
        flush: bool = True,
    ) -> list[Result]:
        """Run the plan: :meth:`_Run.sweep`, :meth:`_Run.settle`, :meth:`_Run.hash`; results in
        the order of ``names``, each also passed to ``on_result`` as soon as it is known."""
        run = _Run(self, verifier, on_result)
        try:
            run.sweep()
            run.settle()
            run.hash(workers, executor)
        finally:
            run.files.close()
            if flush:
                verifier.cache.flush()
            else:
                verifier.cache.flush_due()
        return [r for r in run.results if r is not None]


def _lookup(registry: Registry, invalid: Mapping[str, RegistryError], name: str) -> Record | Result:
    """The record named ``name``, or the result that there is no valid one."""
    err = invalid.get(name)
    if err is not None:
        fix = err.fix or "edit the record so it validates"
        return Result(name, Status.INVALID_RECORD, err.about(name), fix=fix)
    try:
        return registry.get(name)
    except UnknownArtifactError as e:
        return Result(name, Status.UNKNOWN, e.about(name), fix=e.fix)


def _object_keys(
    objects: dict[ObjectKey, tuple[Digest, str | None]], record: Record
) -> list[ObjectKey]:
    """The keys of ``record``'s objects, adding to ``objects`` those not planned yet."""
    keys: list[ObjectKey] = []
    for ref in record.objects():
        key = object_key(ref.digest, ref.blake3)
        keys.append(key)
        if key not in objects:
            objects[key] = (ref.digest, ref.blake3)
    return keys


class _Run:
    """One execution of a :class:`VerifyPlan`: the checks found so far, and which records wait
    on which objects. Each step is a method; ``finish`` settles one record."""

    def __init__(
        self,
        plan: VerifyPlan,
        verifier: Verifier,
        on_result: Callable[[Result], None] | None,
    ) -> None:
        self.plan, self.verifier, self.on_result = plan, verifier, on_result
        self.results: list[Result | None] = [None] * len(plan.names)
        self.checks: dict[ObjectKey, ObjectCheck] = {}
        self.waiting: dict[ObjectKey, list[int]] = {}  # object -> records that wait on it
        self.remaining: dict[int, int] = {}  # record -> how many of its objects are unchecked
        self.to_hash: list[tuple[ObjectKey, os.stat_result]] = []
        self.files = ObjectFiles(plan.store.root)  # closed by VerifyPlan.execute
        # What the registry decided is known, and reported, before any object is read.
        for i in sorted(plan.settled):
            self.results[i] = plan.settled[i]
            if on_result is not None:
                on_result(plan.settled[i])

    def sweep(self) -> None:
        """One stat per object: the missing ones and those the verified-state cache vouches for
        are checked; the others, with their stat, are left to hash."""
        self.to_hash = self.verifier.sweep(self.plan.objects, self.checks)

    def settle(self) -> None:
        """Finish every record whose objects the sweep checked (on a warm run, all of them);
        the others wait for the objects still to hash."""
        checks, waiting, remaining, finish = self.checks, self.waiting, self.remaining, self.finish
        for i, (_, keys) in self.plan.records.items():
            for k in keys:
                if k not in checks:
                    break
            else:  # no set built on the warm path, where every record ends here
                finish(i)
                continue
            left = {k for k in keys if k not in checks}
            remaining[i] = len(left)
            for key in left:
                waiting.setdefault(key, []).append(i)

    def hash(self, workers: int | None, executor: str) -> None:
        """Hash the objects the sweep left, largest first, in a pool where that pays; each
        record is finished as soon as its last object is checked."""
        to_hash, objects, judge = self.to_hash, self.plan.objects, self.verifier.judge
        to_hash.sort(key=_largest_first)
        jobs = [self.verifier.job(*objects[key], st.st_size) for key, st in to_hash]
        with _hashing(jobs, _pool_size(to_hash, workers), executor) as hashed:
            for (key, st), h in zip(to_hash, hashed, strict=True):
                self.checked(key, judge(*objects[key], st, h))

    def checked(self, key: ObjectKey, check: ObjectCheck) -> None:
        """Keep one hashed object's check; finish the records it was the last one missing."""
        self.checks[key] = check
        remaining = self.remaining
        for i in self.waiting[key]:
            remaining[i] -= 1
            if remaining[i] == 0:
                self.finish(i)

    def sniff(self, hexpart: str) -> str:
        """The format of an object by its leading bytes, opened through the path primitive
        (the run's object folders, opened once): a link, FIFO or folder there is refused."""
        fd = self.files.open_fd(hexpart)
        try:
            return content.sniff(fd)
        finally:
            os.close(fd)

    def finish(self, i: int) -> None:
        """Record ``i``'s result, from the checks of all its objects."""
        record, keys = self.plan.records[i]
        checks = self.checks
        result = _all_verified(record, keys, checks, self.sniff) or assemble(
            record,
            self.plan.store,
            lambda d, b3: checks[object_key(d, b3)],
            full=self.verifier.full,
        )
        self.results[i] = result
        if self.on_result is not None:
            self.on_result(result)


def _all_verified(
    record: Record,
    keys: list[ObjectKey],
    checks: Mapping[ObjectKey, ObjectCheck],
    sniff: Callable[[str], str],
) -> Result | None:
    """The result of a record whose objects all verified and whose content needs no check of
    its own (the warm path: no second walk over its objects, a plain object's leading bytes
    sniffed by ``sniff``); ``None`` for any other record."""
    verified = Status.VERIFIED
    hashed, cached = 0, True
    for k in keys:
        c = checks[k]
        if c.status is not verified:
            return None
        hashed += c.hashed
        cached = cached and c.cached
    if record.content is not None:
        return None  # checked against its manifest by assemble
    # Content undeclared: a tree, or one object whose leading bytes must be no archive or array.
    if record.members is None and sniff(keys[0][0]) != "unknown":
        return None
    return Result(
        record.name,
        verified,
        expected=record.digest,
        actual=record.digest,
        hashed_bytes=hashed,
        cached=cached,
        kind=record.kind,
    )


def _never(_d: Digest, _b3: str | None) -> ObjectCheck:
    raise AssertionError("a record without objects has nothing to check")


# -- presence: which objects are in the store, without hashing any ----------------------------
def present(store: Store, record: Record) -> bool:
    """Whether every object verifying ``record`` would read is in the store (nothing is hashed,
    so present is not verified)."""
    return all(store.has(ref.digest) for ref in record.objects())


def presence_by_family(store: Store, registry: Registry) -> dict[str, Counter[str]]:
    """Per family, how many records are ``present``, ``missing``, a ``gap`` (declared, with no
    object yet) or ``invalid``; ``invalid`` is always counted, the others only when non-zero."""
    per_family: dict[str, Counter[str]] = {}
    for family, fam in registry.families.items():
        counts: Counter[str] = Counter()
        for record in fam.records.values():
            if record.is_gap and record.digest is None:
                counts["gap"] += 1
            else:
                counts["present" if present(store, record) else "missing"] += 1
        counts["invalid"] += len(fam.invalid)
        per_family[family] = counts
    return per_family
