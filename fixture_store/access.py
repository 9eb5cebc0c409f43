"""Verified access: the only way library users, the pytest plugin and the comparators get bytes.

Every accessor verifies first (the verified-state cache makes repeats cost a stat) and raises a
typed :class:`~fixture_store.errors.ArtifactError` instead of handing out unverified data.
"""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fixture_store import registry as registry_mod
from fixture_store.errors import FixtureStoreError, UnsafeContentError, UsageError
from fixture_store.objects import anchored, digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import SHARD_LEN, Store
from fixture_store.objects.trees import Tree
from fixture_store.registry import HubSource, LocalSource, PackageSource, Record, Registry
from fixture_store.verify import Result, Verifier

if TYPE_CHECKING:
    import numpy as np

    from fixture_store.readers.onnxcase import OnnxCase
    from fixture_store.readers.safetensors import Tensors
    from fixture_store.remotes.base import Remote
    from fixture_store.remotes.ranges import SpanRead

SAFETENSORS_MEDIA_TYPE = registry_mod.FORMAT_MEDIA_TYPES["safetensors"]


class RemoteRefusedWarning(UserWarning):
    """A remote sent other bytes than a tensor's range (refused; a later place served it)."""


@dataclass(frozen=True)
class TensorFrom:
    """A tensor, and how its range was read (``None``: from the store's verified object)."""

    array: np.ndarray[Any, Any]
    read: SpanRead | None


@dataclass
class Fixtures:
    """A verified view of one store and one registry."""

    store: Store
    registry: Registry
    full: bool = False
    # Save verified-state cache entries in batches rather than after each artifact; the owner
    # calls close() at the end (a long-lived view, as the pytest plugin keeps for a session).
    batch_cache_writes: bool = False
    # The remotes a tensor's range is read from before its source (None: the configured ones).
    remotes: Sequence[Remote] | None = None
    offline: bool | None = None  # None: the environment's (HF_HUB_OFFLINE=1 is offline)
    _verifier: Verifier = field(init=False, repr=False)
    _results: dict[str, Result] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._verifier = Verifier(self.store, full=self.full)

    @classmethod
    def open(
        cls,
        store: str | os.PathLike[str] | None = None,
        registry: str | os.PathLike[str] | None = None,
        *,
        full: bool = False,
    ) -> Fixtures:
        return cls(Store.at(store), registry_mod.load(registry), full=full)

    def record(self, name: str) -> Record:
        return self.registry.get(name)

    def check(self, name: str) -> Result:
        """Verify ``name`` once per view and return the result (never raises for bad data)."""
        from fixture_store.verify import verify_names

        with self._lock:
            cached = self._results.get(name)
        if cached is not None:
            return cached
        result = verify_names(
            self.store,
            self.registry,
            [name],
            workers=1,
            verifier=self._verifier,
            flush=not self.batch_cache_writes,
        )[0]
        with self._lock:
            self._results[name] = result
        return result

    def close(self) -> None:
        """Save what the verified-state cache learnt (needed with ``batch_cache_writes``)."""
        self._verifier.cache.flush()

    def verified(self, name: str) -> Record:
        """The record of ``name`` after its bytes verified; raises a typed error otherwise."""
        self.check(name).raise_for_status()
        return self.registry.get(name)

    def path(self, name: str) -> Path:
        """Path of a verified single-object artifact (read-only; never write to it)."""
        record = self.verified(name)
        if record.is_tree:
            raise UsageError(f"{name} is a tree; use tree({name!r})")
        return self.store.object_path(record.object)

    def open_bytes(self, name: str) -> BinaryIO:
        """The bytes of a verified single-object artifact, opened through the path primitive
        (DESIGN 13): a link, FIFO or folder at the object's name or its shard's is refused."""
        self.path(name)  # verified, and one object
        return self.store.open_object(self.registry.get(name).object)

    def read_bytes(self, name: str) -> bytes:
        with self.open_bytes(name) as f:
            return f.read()

    def arrays(self, name: str) -> dict[str, np.ndarray[Any, Any]]:
        """The arrays of a verified ``.npy``/``.npz`` (or safetensors) artifact, read by the
        safe readers.

        Headers are checked before allocation under the record's limits profile, and the
        arrays must match the record's ``arrays`` manifest (names, dtypes, shapes) exactly.
        A ``.npy`` gives one array named after the file (without ``.npy``).
        """
        from fixture_store import limits
        from fixture_store.readers import npy as arrays_mod
        from fixture_store.readers.pinned import pin_object

        record = self.verified(name)
        if record.media_type == SAFETENSORS_MEDIA_TYPE:
            return dict(self.tensors(name))
        self.path(name)  # one object, not a tree
        profile = limits.profile(record.profile)
        manifest = {k: dict(v) for k, v in record.arrays.items()} if record.arrays else None
        if is_npz(record):
            pinned = pin_object(self.store, record.object, name)  # never through a link
            return arrays_mod.read_npz(pinned, profile, manifest, artifact=name)
        key = npy_name(record)
        spec = manifest.get(key) if manifest else None
        if manifest is not None and spec is None:
            raise UnsafeContentError(name, f"the record's arrays manifest has no entry {key!r}")
        pinned = pin_object(self.store, record.object, name)  # never through a link
        return {key: arrays_mod.read_npy(pinned, profile, spec, artifact=name)}

    def inputs(self, name: str) -> dict[str, np.ndarray[Any, Any]]:
        """The arrays of :meth:`arrays` the record's tolerance names as ``inputs`` (what a parity
        test gives the model; :mod:`~fixture_store.registry.roles`); ``{}`` when it names none."""
        role = self.verified(name).tolerance
        found = role.inputs if role is not None else None
        arrays = self.arrays(name)
        return {k: v for k, v in arrays.items() if found is not None and found.holds(k)}

    def tensors(self, name: str) -> Tensors:
        """The tensors of a verified safetensors artifact: a read-only mapping of tensor name ->
        array over a read-only memory map of the object, each mapped when it is first asked for.

        The object is verified first (digest, then its header against the record's ``arrays``
        manifest under the record's limits profile); no tensor byte is read before.
        """
        from fixture_store import limits
        from fixture_store.readers import safetensors
        from fixture_store.readers.pinned import pin_object

        record = self.verified(name)
        if record.media_type != SAFETENSORS_MEDIA_TYPE:
            raise UsageError(
                f"{name} is not a safetensors artifact (media type {record.media_type!r})",
                fix=f"use path({name!r}) for its bytes",
            )
        manifest = {k: dict(v) for k, v in record.arrays.items()} if record.arrays else None
        return safetensors.open_tensors(
            pin_object(self.store, record.object, name),  # never through a link
            limits.profile(record.profile),
            manifest,
            artifact=name,
        )

    def tensor(
        self, name: str, key: str, *, rows: tuple[int, int] | None = None
    ) -> np.ndarray[Any, Any]:
        """One tensor of a verified safetensors, NPY or NPZ artifact (see :meth:`tensors` and
        :meth:`arrays`; an NPY's one array is named as :meth:`arrays` names it), or ``rows``
        ``[start, stop)`` of its first axis.

        When the object is not in the store and the record carries the tensor's byte range and
        digests (a large reference), only that range is read (for rows of an NPY, only the
        chunks that cover them), from the places a fetch tries in its order (the remotes, then
        the record's source; :mod:`fixture_store.remotes.ranges`), and verified against the
        recorded digests; nothing is stored. Every reader of the whole object still needs the
        whole object. A remote that sent other bytes than the tensor's is a
        :class:`RemoteRefusedWarning` when a later place served it."""
        got = self.tensor_read(name, key, rows=rows)
        for refusal in got.read.refused if got.read is not None else ():
            warnings.warn(RemoteRefusedWarning(str(refusal)), stacklevel=2)
        return got.array

    def tensor_read(
        self, name: str, key: str, *, rows: tuple[int, int] | None = None
    ) -> TensorFrom:
        """:meth:`tensor`, and where its bytes came from (``read`` is ``None``: the store)."""
        from fixture_store.readers.tensor_ranges import row_span
        from fixture_store.remotes.ranges import read_tensor
        from fixture_store.sources import FetchContext, offline_from_env
        from fixture_store.sources.ranges import ranged

        record = self.registry.get(name)
        if ranged(record, key) is not None and not self.store.has(record.object):
            offline = offline_from_env() if self.offline is None else self.offline
            ctx = FetchContext(self.store, self.registry.root, offline=offline)
            remotes = () if ctx.offline else self._remotes()  # offline: none, as in a fetch
            got = read_tensor(ctx, record, key, remotes, rows)
            return TensorFrom(got.array, got.read)
        verified = self.verified(name)
        if verified.content is not registry_mod.Content.ARRAYS:
            raise UsageError(
                f"{name} holds no tensors (its record declares no safetensors, NPY or NPZ arrays)",
                fix=f"use path({name!r}) for its bytes",
            )
        if rows is not None and _is_npy(verified) and key == npy_name(verified):
            return TensorFrom(self._npy_rows(verified, key, rows), None)
        if verified.media_type == SAFETENSORS_MEDIA_TYPE:
            tensors: Mapping[str, np.ndarray[Any, Any]] = self.tensors(name)
        else:
            tensors = self.arrays(name)
        if key not in tensors:
            raise UsageError(
                f"{name} has no tensor {key!r}",
                fix=f"one of: {', '.join(sorted(tensors)) or '(none)'}",
            )
        array = tensors[key]
        if rows is None:
            return TensorFrom(array, None)
        row_span(name, key, tuple(array.shape), array.dtype.itemsize, rows)  # within the array
        return TensorFrom(array[rows[0] : rows[1]], None)

    def _remotes(self) -> Sequence[Remote]:
        """The remotes a range is read from before the source: those given, else the project's
        configured ones as fetch tries them (the default first), opened once per view."""
        from fixture_store.remotes import config, open_remote

        with self._lock:
            if self.remotes is None:
                specs = config.load(self.registry.root).mirrors()
                self.remotes = tuple(open_remote(spec) for spec in specs)
            return self.remotes

    def _npy_rows(self, record: Record, key: str, rows: tuple[int, int]) -> np.ndarray[Any, Any]:
        """Rows of the verified NPY object of ``record``: only their bytes are read."""
        from fixture_store import limits
        from fixture_store.readers import npy
        from fixture_store.readers.pinned import pin_object
        from fixture_store.readers.tensor_ranges import row_span

        spec = (record.arrays or {}).get(key)
        profile = limits.profile(record.profile)
        pinned = pin_object(self.store, record.object, record.name)  # never through a link
        header = npy.check_npy(pinned, profile, spec, artifact=record.name)
        row_span(record.name, key, header.shape, header.dtype.itemsize, rows)  # within it
        pinned = pin_object(self.store, record.object, record.name)
        return npy.read_npy_rows(pinned, profile, spec, rows, artifact=record.name)

    def onnx_case(self, name: str) -> OnnxCase:
        """A verified onnx-case tree, loaded: its model and test data sets, with the record's
        tolerance. A record of another kind is a usage error naming its kind."""
        from fixture_store.readers.onnxcase import load_case

        record = self.verified(name)
        if record.kind is not registry_mod.Kind.ONNX_CASE:
            raise UsageError(f"{name} is a {record.kind!r} artifact, not an onnx-case")
        members = record.members.members if record.members is not None else ()
        return load_case(self.tree(name), name=name, tolerance=record.tolerance, members=members)

    def tree(self, name: str) -> Path:
        """A folder holding exactly the verified members of a tree artifact (hard links to the
        objects); read it through its manifest (:meth:`tree_files`), not by listing it."""
        return checkout_tree(self.store, self.verified(name))

    def tree_files(self, name: str) -> dict[str, Path]:
        """The verified members of a tree artifact: member path -> its file in the checkout,
        from the manifest, so no caller needs to list the folder."""
        record = self.verified(name)
        folder = checkout_tree(self.store, record)
        assert record.tree is not None
        return {m: folder.joinpath(*m.split("/")) for m in record.tree.members}


def _is_npy(record: Record) -> bool:
    return record.media_type == registry_mod.FORMAT_MEDIA_TYPES["npy"]


def is_npz(record: Record) -> bool:
    """Whether a record's object is an NPZ (by its media type, else its source's file name)."""
    if record.media_type:
        return record.media_type == "application/x-npz"
    return (_source_path(record) or "").endswith(".npz")


def npy_name(record: Record) -> str:
    """The name of an NPY record's one array: its file name without ``.npy``."""
    return Path(_source_path(record) or record.name).name.removesuffix(".npy")


def _source_path(record: Record) -> str | None:
    """The path the record's source names (in a repo, a distribution, the project), if any."""
    source = record.source
    return source.path if isinstance(source, HubSource | PackageSource | LocalSource) else None


def checkout_tree(store: Store, record: Record) -> Path:
    """The checkout of a tree record whose objects verified; UsageError for a single object."""
    tree = record.tree
    if tree is None:
        raise UsageError(f"{record.name} is not a tree; use path({record.name!r})")
    return checkout(store, tree, record.object.hex)


def checkout(store: Store, tree: Tree, key: str) -> Path:
    """Materialise a tree under ``trees/<key>`` as hard links to its (verified) objects.

    Built in a staging folder and renamed into place, so a crash never leaves a half tree. An
    existing checkout is reused only if it is exactly its manifest (see :func:`checkout_intact`);
    anything else there is removed (a link only as a link) and the checkout is rebuilt.
    ``trees/`` itself must be a plain folder of the store; every folder, link and copy is made
    through the path primitive, from descriptors, never through a link.
    """
    final = store.root / "trees" / key
    if store.plain("trees") and checkout_intact(store, tree, final):
        return final
    store.ensure()
    with store.folder("tmp") as temps:
        staging, name = temps.mkdtemp("tree-")
        try:
            with staging:
                for member, digest in tree:
                    _place(store, staging, member, digest)
            with store.folder("trees", create=True) as checkouts:
                checkouts.remove_tree(key)
                try:
                    temps.replace(name, checkouts, key)
                except OSError:
                    if not checkout_intact(store, tree, final):
                        raise
        finally:
            temps.remove_tree(name)
    return final


def _place(store: Store, staging: anchored.Folder, member: str, digest: Digest) -> None:
    """One member in the staging folder: a hard link to its object, or a read-only copy where
    the store's filesystem cannot link."""
    *parents, name = member.split("/")
    with (
        staging.folder(*parents, create=True) as folder,
        store.folder("objects", "sha256", digest.hex[:SHARD_LEN]) as shard,
    ):
        try:
            shard.link(digest.hex[SHARD_LEN:], folder, name)
        except OSError:
            with (
                shard.open(digest.hex[SHARD_LEN:]) as src,
                os.fdopen(folder.create(name), "wb") as out,
            ):
                shutil.copyfileobj(src, out)
                os.fchmod(out.fileno(), 0o444)


def checkout_intact(store: Store, tree: Tree, folder: Path) -> bool:
    """Whether ``folder`` is exactly ``tree`` (DESIGN 11): a plain folder whose entries are the
    manifest's members and the folders that hold them, nothing else (no extra entry, no link,
    no special file), each member a regular file that is its object (the same inode) or, for a
    copy, holds its bytes. Nothing is followed: every folder is opened through the path
    primitive and every entry's type comes from the listing."""
    members = dict(tree.members)
    folders = {""} | {m.rsplit("/", 1)[0] for m in members if "/" in m}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    try:
        with store.folder(*folder.relative_to(store.root).parts) as top:
            seen = _intact_members(store, top, "", members, folders)
        return seen == len(members)
    except (OSError, FixtureStoreError):
        return False


def _intact_members(
    store: Store, folder: anchored.Folder, rel: str, members: dict[str, Digest], folders: set[str]
) -> int:
    """How many members ``folder`` (at ``rel``) holds intact; -1 once anything is out of place
    (an extra entry, a link, a special file, a member that is not its object)."""
    seen = 0
    for entry in list(folder.scandir()):
        name = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False) and name in folders:
            with folder.folder(entry.name) as sub:
                found = _intact_members(store, sub, name, members, folders)
            if found < 0:
                return -1
            seen += found
        elif entry.is_file(follow_symlinks=False) and name in members:
            if not _is_object(store, folder, entry, members[name]):
                return -1
            seen += 1
        else:  # a link, a special file, or an entry the manifest does not have
            return -1
    return seen


def _is_object(
    store: Store, folder: anchored.Folder, entry: os.DirEntry[str], digest: Digest
) -> bool:
    """Whether a checkout's regular file is ``digest``'s object: the same inode, or a copy
    (another filesystem) whose bytes hash to it."""
    st = entry.stat(follow_symlinks=False)
    with store.folder("objects", "sha256", digest.hex[:SHARD_LEN]) as shard:
        obj = shard.lstat(digest.hex[SHARD_LEN:])
    if (st.st_dev, st.st_ino) == (obj.st_dev, obj.st_ino):
        return True
    if st.st_size != digest.size:
        return False
    with folder.open(entry.name) as f:
        return digests.of_stream(f) == digest
