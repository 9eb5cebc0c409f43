"""The store's writer lock (DESIGN decision 10; see "Locks" in :mod:`fixture_store.objects.store`):
held shared by the writers of a process, once for all its threads, each process with its own
``tmp/writer-*`` folder, and exclusively by gc, which then removes the temp files of writers
that died."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from fixture_store.errors import FixtureStoreError, StoreError
from fixture_store.objects import anchored, fsutil
from fixture_store.objects.hashcopy import io_error
from fixture_store.objects.layout import WRITER_LOCK, WRITER_PREFIX

# A loose temp entry (of a caller holding no lock) untouched this long belongs to a writer that
# died, not to one still writing.
STALE_TMP_SECONDS = 3600.0


class LockedStore(Protocol):
    """What the writer lock needs of a store (:class:`fixture_store.objects.store.Store`): its
    root, its temp folder, and its folders opened through the path primitive."""

    @property
    def root(self) -> Path: ...

    @property
    def tmp_dir(self) -> Path: ...

    def ensure(self) -> object: ...

    def plain(self, *parts: str, create: bool = False) -> bool: ...

    def folder(self, *parts: str, create: bool = False) -> anchored.Folder: ...


@dataclass
class _Writing:
    """This process's hold on one store's writer lock, shared by its threads."""

    pid: int
    folder: Path
    exit: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    holders: int = 0
    # The writer folder, open while the lock is held (see Store._temps).
    temps: anchored.Folder | None = None

    @classmethod
    def start(cls, store: LockedStore) -> _Writing:
        store.ensure()
        stack = contextlib.ExitStack()
        try:
            with store.folder("locks") as locks:
                lock = Path(locks.child(WRITER_LOCK))
                stack.enter_context(fsutil.flocked(lock, shared=True, folder=locks))
            with store.folder("tmp") as temps:
                made, name = temps.mkdtemp(f"{WRITER_PREFIX}{os.getpid()}-")
            folder = store.tmp_dir / name
        except OSError as e:
            stack.close()
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                # A store we cannot write to: nothing can be published, so there is nothing to
                # guard (a fetch that finds everything present still works); a write fails
                # with the store's own "not writable" error.
                return cls(os.getpid(), store.tmp_dir, stack)
            raise io_error(e, store.root) from e
        except BaseException:
            stack.close()
            raise
        stack.callback(_remove_folder, store, name)  # before the lock goes: gc never sees it live
        stack.callback(made.close)  # first of all: the folder is removed by name
        return cls(os.getpid(), folder, stack, temps=made)

    def stop(self) -> None:
        self.exit.close()


def _remove_folder(store: LockedStore, name: str) -> None:
    """Remove a writer folder of ``tmp/`` (never through a link)."""
    with contextlib.suppress(FileNotFoundError), store.folder("tmp") as temps:
        try:
            temps.rmdir(name)  # the usual case: every write renamed or removed its temp file
        except FileNotFoundError:
            pass
        except OSError:
            temps.remove_tree(name)


_writing: dict[Path, _Writing] = {}
_writing_guard = threading.Lock()
_thread_state = threading.local()


def _held_by_thread() -> dict[Path, int]:
    """How many :meth:`Store.writing` blocks this thread is in, per store root."""
    held: dict[Path, int] | None = getattr(_thread_state, "writing", None)
    if held is None:
        held = _thread_state.writing = {}
    return held


def _collecting_here() -> set[Path]:
    """The store roots whose writer lock this thread holds exclusively."""
    roots: set[Path] | None = getattr(_thread_state, "collecting", None)
    if roots is None:
        roots = _thread_state.collecting = set()
    return roots


def held_temps(root: Path, where: Path) -> anchored.Folder | None:
    """This process's writer folder of the store at ``root``, open while its writer lock is held,
    if ``where`` is that folder (one open for all the writes of a :func:`hold_shared` block)."""
    held = _writing.get(root)
    if (
        held is not None
        and held.temps is not None
        and held.pid == os.getpid()
        and held.folder == where
    ):
        return held.temps
    return None


@contextlib.contextmanager
def hold_shared(store: LockedStore) -> Iterator[None]:
    """Hold ``store``'s writer lock shared for the block, once per process for all its threads
    (see :meth:`fixture_store.objects.store.Store.writing`)."""
    key = store.root
    held_here = _held_by_thread()
    with _writing_guard:
        held = _writing.get(key)
        if held is None or held.pid != os.getpid():  # none yet, or the parent's (forked)
            held = _writing[key] = _Writing.start(store)
        held.holders += 1
    held_here[key] = held_here.get(key, 0) + 1
    try:
        yield
    finally:
        held_here[key] -= 1
        with _writing_guard:
            held.holders -= 1
            if held.holders == 0:
                if _writing.get(key) is held:
                    del _writing[key]
                held.stop()


@contextlib.contextmanager
def hold_exclusive(store: LockedStore, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``store``'s writer lock exclusively for the block (see
    :meth:`fixture_store.objects.store.Store.collecting`)."""
    if _held_by_thread().get(store.root):
        raise StoreError(
            "cannot collect garbage while this thread holds the store's writer lock: "
            "it would wait for itself"
        )
    if store.root in _collecting_here():
        yield
        return
    store.ensure()
    with (
        store.folder("locks") as locks,
        fsutil.flocked(Path(locks.child(WRITER_LOCK)), on_wait=on_wait, folder=locks),
    ):
        _collecting_here().add(store.root)
        try:
            yield
        finally:
            _collecting_here().discard(store.root)


def temp_folder(store: LockedStore) -> Path:
    """Where a write to ``store`` puts its temp files (see
    :meth:`fixture_store.objects.store.Store.temp_folder`)."""
    held = _writing.get(store.root)
    if held is not None and held.pid == os.getpid() and _held_by_thread().get(store.root):
        return held.folder
    return store.tmp_dir


_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", bound=LockedStore)


def holding_writer_lock(
    fn: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """``fn``, taking its store first, run inside that store's writer lock held shared
    (:meth:`fixture_store.objects.store.Store.writing`)."""

    @functools.wraps(fn)
    def held(store: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with hold_shared(store):
            return fn(store, *args, **kwargs)

    return held


def clean_tmp(store: LockedStore, older_than: float = STALE_TMP_SECONDS) -> int:
    """Remove the temp files of ``store`` left by writers that died (see
    :meth:`fixture_store.objects.store.Store.clean_tmp`); how many entries were removed."""
    if not store.plain("tmp"):  # a tmp/ that is a link is refused: never cleaned through
        return 0
    with hold_exclusive(store), store.folder("tmp") as temps:
        count = 0
        cutoff = time.time() - older_than
        for entry in list(temps.scandir()):
            try:
                owned = entry.name.startswith(WRITER_PREFIX) and entry.is_dir(follow_symlinks=False)
                if not owned and _newest_mtime(temps, entry.name) > cutoff:
                    continue
                temps.remove_tree(entry.name)  # a link: only the link goes
                count += 1
            except FileNotFoundError:
                continue
        return count


def _newest_mtime(folder: anchored.Folder, name: str) -> float:
    """The newest mtime in the temp entry ``name``; a folder is walked without following any
    link."""
    st = folder.lstat(name)
    newest = st.st_mtime
    if stat.S_ISDIR(st.st_mode):
        try:
            sub = folder.folder(name)
        except FixtureStoreError:  # replaced by a link meanwhile: its own mtime
            return newest
        with sub:
            for entry in list(sub.scandir()):
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, _newest_mtime(sub, entry.name))
    return newest
