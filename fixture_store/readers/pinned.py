"""Reading a checked object's bytes into buffers the reader owns, never through a memory map.

A memory-mapped array is only as good as the file under it at the moment each page is touched:
an object truncated after it was verified raised a bare ``ValueError`` (or, once mapped, killed
the process with ``SIGBUS``), and one rewritten in place before its first read handed out other
values. The trust model leaves out whoever can write the store (see ``docs/trust-model.md``), but
a reader must not crash, nor hand out bytes it did not check, because of them.

A :class:`PinnedFile` is opened once, when the object's header is checked, and remembers the
file's identity then (device, inode, size, mtime_ns, ctime_ns; ``ctime`` moves on every write and
no user can set it back). Every read is a ``pread`` of exactly the bytes asked for into a new
buffer, with the identity checked before and after: a file truncated, grown or written to since
is a :class:`~fixture_store.errors.DigestMismatchError` naming the artifact and what changed, and
the caller gets no array. The price is one copy of each tensor read (measured in
``bench/safetensors.py``); the gain is that nothing can fault later, when the array is used.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Self

from fixture_store.errors import DigestMismatchError
from fixture_store.objects import names
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store

if TYPE_CHECKING:  # numpy is imported by read(): the archive readers open files here too
    import numpy as np

Identity = tuple[int, int, int, int, int]
# Bytes asked of one pread: a single read of hundreds of MiB into fresh memory measured 10-25x
# slower than the same bytes in slices of this size (1.2-2.6 s against 0.11 s for 256 MiB).
SLICE = 16 * 1024 * 1024


def identity_of(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PinnedFile:
    """An object file opened for reading, and its identity when it was opened. ``source`` is
    the path of the user's file, or a file its caller opened (a store object:
    :func:`pin_object`), which the pinned file then owns; ``path`` names it in messages."""

    def __init__(
        self,
        source: str | os.PathLike[str] | BinaryIO,
        artifact: str,
        *,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.artifact = artifact
        if isinstance(source, str | os.PathLike):
            self.path = os.fspath(source)
            self.file: BinaryIO = open(source, "rb", buffering=0)  # noqa: SIM115 - close()
        else:
            self.path, self.file = os.fspath(path or artifact), source
        self.identity = identity_of(os.fstat(self.file.fileno()))

    @property
    def size(self) -> int:
        return self.identity[2]

    def read(self, offset: int, size: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """Exactly ``size`` bytes at ``offset``, in a buffer of their own; refused if the file is
        not the one it was when pinned, before or after the read. (``np.empty``, not a
        ``bytearray``: that would write zeros over every page before the read writes the bytes,
        a second pass that cost half again on 256 MiB.)"""
        import numpy as np

        self.check()
        buffer = np.empty(size, np.uint8)
        view = buffer.data  # the array's own memoryview
        done = 0
        while done < size:
            n = os.preadv(self.file.fileno(), [view[done : done + SLICE]], offset + done)
            if n == 0:
                raise self._changed(f"it ends at byte {offset + done}, before byte {offset + size}")
            done += n
        self.check()
        return buffer

    def check(self) -> None:
        now = identity_of(os.fstat(self.file.fileno()))
        if now == self.identity:
            return
        if now[2] != self.size:
            raise self._changed(f"its size went from {self.size} to {now[2]} bytes")
        raise self._changed("it was written to (its modification or change time moved)")

    def _changed(self, what: str) -> DigestMismatchError:
        return DigestMismatchError(
            self.artifact,
            f"the object changed after it was verified ({what}); nothing more is read from it",
            fix=f"fixture-store verify {names.shell(self.artifact)}  (fixture-store fetch "
            f"{names.shell(self.artifact)} "
            "restores the object); find what writes to the store",
        )

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


# What the array readers read: the user's file by its path, or a store object already pinned.
Source = str | os.PathLike[str] | PinnedFile


def pin_object(store: Store, digest: Digest, artifact: str) -> PinnedFile:
    """The verified object of ``digest``, opened through the path primitive (DESIGN 13:
    :meth:`Store.open_object`; a link, FIFO or folder at its name or its shard's is the store's
    refusal, never followed) and pinned, for the readers of ``artifact``."""
    return PinnedFile(store.open_object(digest), artifact, path=store.object_path(digest))


def pin(source: Source, artifact: str) -> PinnedFile:
    """``source`` pinned: a path is opened (the user's file); a pinned file is taken over (the
    reader closes it when done, as one it opened itself)."""
    return source if isinstance(source, PinnedFile) else PinnedFile(source, artifact)


def label_of(source: Source, artifact: str | None) -> str:
    if artifact:
        return artifact
    return source.artifact if isinstance(source, PinnedFile) else os.fspath(source)
