"""The shared-folder remote: the store's layout and atomicity rules, several processes at once."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
from pathlib import Path

import pytest

from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.remotes.base import MissingRemoteObject, RemoteError, RemoteObject, Retry
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.sync import pull_object


def _objects(store: Store, count: int, seed: int) -> list[Digest]:
    rng = random.Random(seed)
    return [store.put_bytes(rng.randbytes(rng.randrange(1, 300_000))) for _ in range(count)]


def test_an_upload_lands_at_the_documented_key_read_only(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = FolderRemote("shared", tmp_path / "remote")
    remote.upload(store.object_path(digest), digest)
    final = tmp_path / "remote" / "objects" / "sha256" / digest.hex[:2] / digest.hex[2:]
    assert final.read_bytes() == b"payload"
    assert not os.access(final, os.W_OK) or os.geteuid() == 0
    assert oct(final.stat().st_mode & 0o222) == "0o0"
    assert list((tmp_path / "remote" / "tmp").iterdir()) == []


def test_an_object_already_there_is_never_replaced(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = FolderRemote("shared", tmp_path / "remote")
    remote.path(digest).parent.mkdir(parents=True)
    remote.path(digest).write_bytes(b"another")
    remote.upload(store.object_path(digest), digest)
    assert remote.path(digest).read_bytes() == b"another"


class _LosesTheRace(FolderRemote):
    """Another writer publishes the object just after this one looked for it."""

    def stat(self, digest: Digest) -> RemoteObject | None:
        final = self.path(digest)
        final.parent.mkdir(parents=True, exist_ok=True)
        final.write_bytes(b"another")
        return None


def test_an_object_published_after_the_check_is_never_replaced(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = _LosesTheRace("shared", tmp_path / "remote")
    assert remote.upload(store.object_path(digest), digest) is False
    assert remote.path(digest).read_bytes() == b"another"  # write-once holds in the race too
    assert list((tmp_path / "remote" / "tmp").iterdir()) == []  # and no temp file is left


def test_a_link_on_the_remote_is_not_an_object(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = FolderRemote("shared", tmp_path / "remote")
    remote.path(digest).parent.mkdir(parents=True)
    (tmp_path / "elsewhere").write_bytes(b"payload")
    remote.path(digest).symlink_to(tmp_path / "elsewhere")
    assert remote.stat(digest) is None
    with pytest.raises(MissingRemoteObject, match="is a link"):
        remote.open(digest)


def _pusher(store_root: str, remote_root: str, hexes: list[tuple[str, int]]) -> None:
    store, remote = Store.at(store_root), FolderRemote("shared", Path(remote_root))
    order = list(hexes)
    random.Random(os.getpid()).shuffle(order)
    for hexpart, size in order:
        digest = Digest(hexpart, size)
        if remote.stat(digest) is None:
            remote.upload(store.object_path(digest), digest)


def _puller(store_root: str, remote_root: str, hexes: list[tuple[str, int]]) -> None:
    store, remote = Store.at(store_root).ensure(), FolderRemote("shared", Path(remote_root))
    pending = [Digest(h, s) for h, s in hexes]
    retry = Retry(attempts=2, backoff=0.01, total=5.0)
    for _ in range(2000):  # until the pushers have sent everything
        still = []
        for digest in pending:
            try:
                with store.writing(), store.staging(replace=True) as staging:
                    staging.publish([pull_object(staging, remote, digest, retry)])
            except MissingRemoteObject:
                still.append(digest)
        if not still:
            return
        pending = still
    raise AssertionError(f"{len(pending)} objects never arrived")


@pytest.mark.slow
def test_several_processes_pushing_and_pulling_at_once_leave_no_partial_object(
    tmp_path: Path,
) -> None:
    source = Store.at(tmp_path / "source").ensure()
    digests = _objects(source, 60, seed=7)
    hexes = [(d.hex, d.size) for d in digests]
    remote_root = tmp_path / "remote"
    # The remote exists before anyone starts (a pull from a folder that does not exist is an
    # error, not an empty remote): the pullers wait for objects, not for the folder.
    remote_root.mkdir()
    ctx = multiprocessing.get_context("spawn")
    pullers = [str(tmp_path / f"puller-{i}") for i in range(2)]
    procs = [
        ctx.Process(target=_pusher, args=(str(source.root), str(remote_root), hexes))
        for _ in range(3)
    ] + [ctx.Process(target=_puller, args=(root, str(remote_root), hexes)) for root in pullers]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    remote = FolderRemote("shared", remote_root)
    for digest in digests:
        data = remote.path(digest).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest.hex and len(data) == digest.size
    assert list((remote_root / "tmp").iterdir()) == []
    for root in pullers:
        store = Store.at(root)
        for digest in digests:
            assert hashlib.sha256(store.object_path(digest).read_bytes()).hexdigest() == digest.hex
        assert sorted(h for h, _ in store.iter_objects()) == sorted(d.hex for d in digests)


@pytest.mark.parametrize("level", ["tmp", "objects", "objects/sha256", "shard"])
def test_a_push_never_writes_through_a_link_in_the_remote(tmp_path: Path, level: str) -> None:
    """A symlinked shard folder made the object land outside the remote: a link at any folder
    a push writes in is refused, with the link to remove named."""
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = FolderRemote("shared", tmp_path / "remote")
    parts = {"shard": f"objects/sha256/{digest.hex[:2]}"}.get(level, level)
    link = tmp_path / "remote" / parts
    link.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(RemoteError) as info:
        remote.upload(store.object_path(digest), digest)
    assert not isinstance(info.value, MissingRemoteObject)
    assert str(link) in info.value.message and "link" in info.value.message
    assert info.value.fix is not None and f"remove {link}" in info.value.fix
    assert list(outside.rglob("*")) == []


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_special_file_at_a_key_is_a_clear_remote_error(tmp_path: Path, kind: str) -> None:
    """A FIFO at an object's key hung pull and fetch, a folder there was an IsADirectoryError
    traceback: both are the remote's own error, naming the path."""
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    remote = FolderRemote("shared", tmp_path / "remote")
    remote.path(digest).parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(remote.path(digest))  # no writer ever opens it
    else:
        remote.path(digest).mkdir()
    assert remote.stat(digest) is None
    with pytest.raises(RemoteError) as info:
        remote.open(digest)
    assert not isinstance(info.value, MissingRemoteObject)
    assert str(remote.path(digest)) in info.value.message
    assert {"fifo": "a FIFO", "folder": "a folder"}[kind] in info.value.message


def test_an_object_that_changes_while_it_is_pushed_writes_nothing(tmp_path: Path) -> None:
    """Remote objects are write-once, so bytes that no longer match the digest they are pushed
    as would be poison for good: the push checks what it copied and publishes nothing."""
    store = Store.at(tmp_path / "store").ensure()
    digest = store.put_bytes(b"payload")
    changed = tmp_path / "changed"
    changed.write_bytes(b"PAYLOAD")  # the object as it reads after an edit in place
    remote = FolderRemote("shared", tmp_path / "remote")
    with pytest.raises(RemoteError, match="changed while it was pushed") as info:
        remote.upload(changed, digest)
    assert info.value.fix is not None and "verify --full" in info.value.fix
    assert remote.stat(digest) is None and not os.path.lexists(remote.path(digest))
    assert list((tmp_path / "remote" / "tmp").iterdir()) == []
    assert remote.upload(store.object_path(digest), digest) is True  # the name is still free
