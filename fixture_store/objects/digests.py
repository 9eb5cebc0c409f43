"""SHA-256 + size: the identity of every object (DESIGN decision 1)."""

from __future__ import annotations

import hashlib
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

import blake3 as _blake3

from fixture_store.errors import DigestFormatError

PREFIX = "sha256:"
HEX_LEN = 64  # hex characters of a SHA-256 digest
CHUNK = 1 << 20  # large reads: fewer syscalls, hashlib releases the GIL on big buffers
# Past the first chunk, a file is read by one thread and hashed by another in buffers of
# OVERLAP_CHUNK, READ_AHEAD of them in flight: 1 MiB in all, which stays in the caches between
# the two cores. With 3 buffers of 1 MiB, the hashing core read each chunk back from memory:
# SHA-256 and BLAKE3 of 1 GiB took 0.72-0.80 s against 0.66-0.67 s (hashlib's SHA-256 alone,
# read and hashed on one thread: 0.64 s), on 2 cores with SHA-NI.
OVERLAP_CHUNK = 1 << 18
READ_AHEAD = 4
_HEX = re.compile(r"[0-9a-f]{64}")
_TEXT = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, order=True)
class Digest:
    """``sha256:<64 lower-case hex>`` and the size in bytes, as one value."""

    hex: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.hex, str) or _HEX.fullmatch(self.hex) is None:
            raise DigestFormatError(
                f"not a SHA-256 hex digest: {self.hex!r} (need 64 lower-case hex characters)"
            )
        check_size(self.size)

    @classmethod
    def unchecked(cls, hexpart: str, size: int) -> Digest:
        """A digest from values validated before (read back from a file this code wrote):
        ``__post_init__``'s checks skipped, where they would cost more than the work done."""
        digest = object.__new__(cls)
        object.__setattr__(digest, "hex", hexpart)
        object.__setattr__(digest, "size", size)
        return digest

    @property
    def text(self) -> str:
        """The ``sha256:<hex>`` form used in records."""
        return PREFIX + self.hex

    @property
    def short(self) -> str:
        return self.hex[:12]

    def __str__(self) -> str:
        return f"{self.text} ({self.size} bytes)"


def parse_hex(text: object) -> str:
    """Validate ``sha256:<hex>`` and return the hex part.

    Upper-case hex is refused, not normalised: the registry is reviewed text and has one spelling
    for each digest, the same one Hub LFS oids and pip hashes use.
    """
    if not isinstance(text, str):
        raise DigestFormatError(f"a digest must be a string like 'sha256:<64 hex>', got {text!r}")
    if not text.startswith(PREFIX):
        algo, sep, _ = text.partition(":")
        if sep and algo.lower() != "sha256":
            raise DigestFormatError(f"unsupported digest algorithm {algo!r}: identity is sha256")
        raise DigestFormatError(f"digest {text!r} lacks the 'sha256:' prefix")
    hexpart = text[len(PREFIX) :]
    if len(hexpart) != HEX_LEN:
        raise DigestFormatError(
            f"digest {text!r} has {len(hexpart)} hex characters, SHA-256 has {HEX_LEN}"
        )
    if _HEX.fullmatch(hexpart) is None:
        if _HEX.fullmatch(hexpart.lower()) is not None:
            raise DigestFormatError(
                f"digest {text!r} is upper case; write it in lower case: {PREFIX}{hexpart.lower()}"
            )
        raise DigestFormatError(f"digest {text!r} contains non-hex characters")
    return hexpart


def parse(text: object, size: object) -> Digest:
    """Build a Digest from its record fields, with a clear error for each malformed part."""
    if isinstance(text, str) and _TEXT.fullmatch(text):
        return Digest(text[len(PREFIX) :], check_size(size))
    hexpart = parse_hex(text)
    return Digest(hexpart, check_size(size))


# md5 and sha1 are weak (collisions are practical): they check bytes, beside the SHA-256 computed
# from the same bytes, and never stand for them. One set, for every importer and every gap.
WEAK = frozenset({"md5", "sha1"})
# Hex length of each algorithm a gap may await its bytes by: SHA-256 without their size, or a
# weak digest a manifest states.
AWAITED_HEX_LENGTHS = {"sha256": HEX_LEN, "sha1": 40, "md5": 32}
_LOWER_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True, slots=True)
class Awaited:
    """The digest of bytes a declared gap awaits, known without their size: ``sha256:<hex>``,
    or a weak ``sha1:<hex>`` or ``md5:<hex>``. Parses and prints itself (its text is the
    record's ``digest`` field). The bytes that fill the gap are checked against it, and their
    SHA-256 and size, taken from the same bytes, become the record's digest."""

    algorithm: str
    hex: str

    @classmethod
    def parse(cls, text: object) -> Awaited:
        """``sha256:<hex>``, ``sha1:<hex>`` or ``md5:<hex>``, in lower case; a
        :class:`DigestFormatError` saying what is wrong otherwise."""
        if isinstance(text, str) and ":" in text:
            algorithm, _, hexpart = text.partition(":")
            if algorithm in WEAK:
                return cls(algorithm, _weak_hex(text, algorithm, hexpart))
            if algorithm != "sha256":
                spelt = algorithm.lower()
                hint = (
                    f"write it {spelt!r}"
                    if spelt in AWAITED_HEX_LENGTHS
                    else (
                        "a gap awaits 'sha256:<hex>' (or, known only by a weak digest, "
                        "'sha1:<hex>' or 'md5:<hex>')"
                    )
                )
                raise DigestFormatError(f"unsupported digest algorithm {algorithm!r}: {hint}")
        return cls("sha256", parse_hex(text))

    @property
    def weak(self) -> bool:
        return self.algorithm in WEAK

    def hasher(self) -> hashlib._Hash:
        """A fresh hash object of the algorithm (md5 and sha1 check bytes; they secure nothing)."""
        return hashlib.new(self.algorithm, usedforsecurity=not self.weak)

    def names(self, digest: Digest) -> bool:
        """Whether ``digest`` is the bytes awaited, as far as it can tell: only a SHA-256 can
        (a weak digest is checked against the bytes themselves)."""
        return self.algorithm == "sha256" and self.hex == digest.hex

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"


def _weak_hex(text: str, algorithm: str, hexpart: str) -> str:
    if _LOWER_HEX.fullmatch(hexpart) is None:
        raise DigestFormatError(f"digest {text!r} is not lower-case hex after '{algorithm}:'")
    length = AWAITED_HEX_LENGTHS[algorithm]
    if len(hexpart) != length:
        raise DigestFormatError(
            f"digest {text!r} has {len(hexpart)} hex characters, {algorithm} has {length}"
        )
    return hexpart


# Sizes are file sizes: past 2**63 - 1 no file system, st_size or SQLite integer holds one.
MAX_SIZE = (1 << 63) - 1


def check_size(size: object) -> int:
    """``size`` if it is a byte count a file can have; :class:`DigestFormatError` otherwise."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise DigestFormatError(f"size must be a non-negative integer, got {size!r:.40}")
    if size > MAX_SIZE:
        raise DigestFormatError(f"size {size:.3g} is larger than any file can be (2**63 - 1)")
    return size


class Algorithm(StrEnum):
    """Which hash re-verification uses. SHA-256 is the identity; BLAKE3 only re-checks it."""

    AUTO = "auto"  # BLAKE3 where the record has one, else SHA-256
    SHA256 = "sha256"


_BLAKE3_HEX = re.compile(r"[0-9a-f]{64}")


def check_blake3(text: object) -> str:
    if not isinstance(text, str) or _BLAKE3_HEX.fullmatch(text) is None:
        raise DigestFormatError(f"not a BLAKE3 hex digest: {text!r} (need 64 lower-case hex)")
    return text


class Hasher:
    """Incremental SHA-256 that also counts bytes, and optionally BLAKE3 in the same pass."""

    __slots__ = ("_b3", "_h", "size")

    def __init__(self, *, with_blake3: bool = False) -> None:
        self._h = hashlib.sha256()
        self._b3 = _blake3.blake3() if with_blake3 else None
        self.size = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._h.update(data)
        if self._b3 is not None:
            self._b3.update(data)
        self.size += len(data)

    def digest(self) -> Digest:
        return Digest(self._h.hexdigest(), self.size)

    def blake3_hex(self) -> str | None:
        return None if self._b3 is None else str(self._b3.hexdigest())


def of_bytes(data: bytes | bytearray | memoryview) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest(), len(data))


# Given every chunk of the bytes a store write hashes, in order (see :func:`of_file_both`).
Tap = Callable[[memoryview], object]

_buffers = threading.local()


def read_buffer(size: int = CHUNK) -> memoryview:
    """A reusable per-thread read buffer: allocating (and zeroing) 1 MiB for each small file
    costs more than hashing it."""
    view: memoryview | None = getattr(_buffers, f"b{size}", None)
    if view is None:
        view = memoryview(bytearray(size))
        setattr(_buffers, f"b{size}", view)
    return view


def read_small(path: str | Path, limit: int = CHUNK) -> bytes | None:
    """A file's whole content if it has fewer than ``limit`` bytes, read with one open and one
    read (plus the read that sees the end); ``None`` if it is larger, to be streamed instead."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_small_fd(fd, limit)
    finally:
        os.close(fd)


def read_small_fd(fd: int, limit: int = CHUNK) -> bytes | None:
    """:func:`read_small` of a file its caller opened (a store object is opened through the
    path primitive: :class:`fixture_store.objects.store.ObjectFiles`), from where it stands;
    the descriptor is left open."""
    data = os.read(fd, limit)
    if len(data) < limit and not os.read(fd, 1):
        return data
    return None


def of_stream(stream: BinaryIO) -> Digest:
    """Hash a binary stream in constant memory."""
    h = Hasher()
    view = read_buffer()
    while True:
        n = stream.readinto(view)  # type: ignore[attr-defined]
        if not n:
            break
        h.update(view[:n])
    return h.digest()


def of_file(path: str | Path | int) -> Digest:
    """Hash a file in constant memory with large unbuffered reads, each hashed on the thread
    that read it: SHA-256 alone is slower than the copy out of the page cache, and handing the
    chunks to another core cost more than the copy (1 GiB: 0.64 s read and hashed on one
    thread, 0.67 s with a reading thread beside it, on 2 cores with SHA-NI)."""
    h = Hasher()
    _feed_file(path, h.update, read_ahead=False)
    return h.digest()


def blake3_of_file(path: str | Path | int, *, read_ahead: bool = True) -> tuple[str, int]:
    """BLAKE3 hex and size of a file in constant memory (the fast re-verification digest).

    Plain reads rather than ``update_mmap``: mapped pages would count as resident memory and a
    1 GiB object would break the constant-memory bound.
    """
    h = _blake3.blake3()
    size = _feed_file(path, h.update, read_ahead)
    return str(h.hexdigest()), size


def _feed_file(
    path: str | Path | int,
    update: Callable[[memoryview], object],
    read_ahead: bool = True,
    beside: Callable[[memoryview], object] | None = None,
) -> int:
    """Pass a file's bytes to ``update`` (and ``beside``) chunk by chunk; return the size.

    A file of one chunk is read and hashed inline. A larger one is read by a second thread while
    this one hashes (reads and both hashes release the GIL): measured on 2 cores, BLAKE3 went
    from 2.3x to 4x hashlib SHA-256, because the copy out of the page cache no longer waits for
    the hash. ``beside`` runs on the reading thread, so a second hash of the same bytes costs no
    extra time while it is faster than ``update``. Memory stays bounded at ``READ_AHEAD`` buffers.
    Callers that already hash several files in parallel pass ``read_ahead=False``: the cores are
    busy, extra threads only contend. ``path`` may be a descriptor its caller opened (a store
    object, opened through the path primitive), read from where it stands and left open.
    """

    def both(chunk: memoryview) -> None:
        if beside is not None:
            beside(chunk)
        update(chunk)

    with open(path, "rb", buffering=0, closefd=not isinstance(path, int)) as f:
        view = read_buffer()
        n = f.readinto(view)
        if not n:
            return 0
        if n < len(view) or not read_ahead:
            both(view[:n])
            size = n
            while n := f.readinto(view):  # a file that grew, or a short read
                both(view[:n])
                size += n
            return size
        return n + _feed_overlapped(f, view[:n], update, beside)


def _feed_overlapped(
    f: BinaryIO,
    first: memoryview,
    update: Callable[[memoryview], object],
    beside: Callable[[memoryview], object] | None,
) -> int:
    free: queue.Queue[memoryview] = queue.Queue()
    full: queue.Queue[tuple[memoryview, int] | BaseException | None] = queue.Queue()
    for _ in range(READ_AHEAD):
        free.put(memoryview(bytearray(OVERLAP_CHUNK)))
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                buf = free.get()
                n = f.readinto(buf)  # type: ignore[attr-defined]
                if not n:
                    break
                if beside is not None:
                    beside(buf[:n])
                full.put((buf, n))
        except BaseException as e:  # handed to the hashing thread, raised there
            full.put(e)
            return
        full.put(None)

    if beside is not None:
        beside(first)
    thread = threading.Thread(target=reader, name="fixture-store-read-ahead", daemon=True)
    thread.start()
    size = 0
    try:
        update(first)  # hashed while the reader fetches the next chunks
        while (item := full.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            buf, n = item
            update(buf[:n])
            size += n
            free.put(buf)
    finally:
        stop.set()
        free.put(memoryview(bytearray(0)))  # unblock a reader waiting for a buffer
        thread.join()
    return size


def blake3_of_bytes(data: bytes | bytearray | memoryview) -> str:
    return str(_blake3.blake3(data).hexdigest())


def of_file_both(
    path: str | Path | int, *, read_ahead: bool = True, tap: Tap | None = None
) -> tuple[Digest, str]:
    """SHA-256 (identity) and BLAKE3 of a file, in one read pass; with read-ahead the BLAKE3
    runs on the reading thread, beside the SHA-256. ``tap`` is given every chunk too, in order,
    on the BLAKE3's thread (the digests of a file's array ranges: no read of their own)."""
    sha = hashlib.sha256()
    b3 = _blake3.blake3()

    def beside(chunk: memoryview) -> None:
        b3.update(chunk)
        if tap is not None:
            tap(chunk)

    size = _feed_file(path, sha.update, read_ahead, beside=b3.update if tap is None else beside)
    return Digest(sha.hexdigest(), size), str(b3.hexdigest())


def git_blob_hasher(size: int) -> hashlib._Hash:
    """A SHA-1 primed with git's blob header: fed the ``size`` bytes, its hex is their git blob
    id (the name git and the Hub give a file that is not in LFS)."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % size)
    return h


def git_blob_id_of_file(path: str | Path, *, read_ahead: bool = True) -> tuple[str, Digest]:
    """The git blob id and the SHA-256 digest of a file, in one read pass. The header names the
    size the file has when it is opened; a file that grows or shrinks while it is read gets the
    id of no bytes it held (its digest then names what was read)."""
    sha = hashlib.sha256()
    git = git_blob_hasher(os.stat(path).st_size)
    size = _feed_file(path, sha.update, read_ahead, beside=git.update)
    return git.hexdigest(), Digest(sha.hexdigest(), size)


def of_chunks(chunks: Iterable[bytes]) -> Digest:
    h = Hasher()
    for chunk in chunks:
        h.update(chunk)
    return h.digest()
