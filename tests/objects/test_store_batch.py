"""Batched puts keep the single put's guarantees: checked bytes, one copy, no temp left."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import blake3
import pytest

from fixture_store.errors import StoreError
from fixture_store.objects import digests
from fixture_store.objects.store import Store


def _files(folder: Path, blobs: list[bytes]) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for i, data in enumerate(blobs):
        p = folder / f"f{i}"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_write_files_stores_every_file_with_both_digests(tmp_path: Path) -> None:
    blobs = [os.urandom(4096) for _ in range(40)] + [b"dup", b"dup"]
    paths = _files(tmp_path / "src", blobs)
    store = Store.at(tmp_path / "store")
    stored = store.write_files(paths)
    assert [s.digest for s in stored] == [digests.of_bytes(b) for b in blobs]
    assert [s.blake3 for s in stored] == [blake3.blake3(b).hexdigest() for b in blobs]
    for s, data in zip(stored, blobs, strict=True):
        path = store.object_path(s.digest)
        assert path.read_bytes() == data
        assert not os.access(path, os.W_OK) or os.geteuid() == 0
        assert path.stat().st_mode & 0o222 == 0
    assert len(list(store.iter_objects())) == 41
    assert list(store.tmp_dir.iterdir()) == []


def test_write_files_with_an_unreadable_file_leaves_no_temp(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"fine")
    store = Store.at(tmp_path / "store")
    with pytest.raises(StoreError, match="cannot read"):
        store.write_files([tmp_path / "ok", tmp_path / "absent"])
    assert list(store.tmp_dir.iterdir()) == []
    assert list(store.iter_objects()) == []


def _big(tmp_path: Path, extra: int = 0) -> tuple[Path, bytes]:
    from fixture_store.objects.store import KERNEL_COPY_MIN

    data = os.urandom(KERNEL_COPY_MIN + 3 * digests.CHUNK + 11 + extra)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    return path, data


def test_a_large_file_is_copied_in_kernel_and_hashed_from_the_copy(tmp_path: Path) -> None:
    path, data = _big(tmp_path)
    store = Store.at(tmp_path / "store")
    stored = store.write_file(path, digests.of_bytes(data))
    assert stored.digest == digests.of_bytes(data)
    assert stored.blake3 == blake3.blake3(data).hexdigest()
    assert store.object_path(stored.digest).read_bytes() == data
    assert list(store.tmp_dir.iterdir()) == []


def test_a_large_file_with_the_wrong_digest_stores_nothing(tmp_path: Path) -> None:
    from fixture_store.errors import IntegrityError

    path, data = _big(tmp_path)
    store = Store.at(tmp_path / "store")
    wrong = digests.Digest(digests.of_bytes(b"other").hex, len(data))
    with pytest.raises(IntegrityError, match="do not match the expected digest"):
        store.write_file(path, wrong)
    shorter = digests.Digest(digests.of_bytes(data).hex, len(data) - 100)
    with pytest.raises(IntegrityError, match="or more"):
        store.write_file(path, shorter)  # copied at most size + 1 bytes, then refused
    assert list(store.iter_objects()) == []
    assert list(store.tmp_dir.iterdir()) == []


def test_without_a_kernel_copy_the_large_file_goes_through_user_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    calls = []

    def cross_device(*args: object) -> int:
        calls.append(args)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", cross_device, raising=False)
    path, data = _big(tmp_path)
    store = Store.at(tmp_path / "store")
    stored = store.write_file(path)
    assert calls, "the kernel copy was not tried"
    assert store.object_path(stored.digest).read_bytes() == data
    assert stored.blake3 == blake3.blake3(data).hexdigest()


def test_a_failed_batch_sync_stores_nothing_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctypes
    import errno

    from fixture_store.objects import fsutil

    def failing_syncfs(_fd: int) -> int:
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(fsutil, "_load_syncfs", lambda: failing_syncfs)
    paths = _files(tmp_path / "src", [os.urandom(100) for _ in range(fsutil.SYNCFS_MIN)])
    store = Store.at(tmp_path / "store")
    with pytest.raises(StoreError, match="I/O error in the store"):
        store.write_files(paths)
    assert list(store.iter_objects()) == []
    assert list(store.tmp_dir.iterdir()) == []


@pytest.mark.parametrize("count", [1, 3, 40])
def test_batches_below_and_above_the_syncfs_threshold_store_every_file(
    tmp_path: Path, count: int
) -> None:
    blobs = [os.urandom(64) for _ in range(count)]
    paths = _files(tmp_path / "src", blobs)
    store = Store.at(tmp_path / "store")
    stored = store.write_files(paths)
    assert [store.object_path(s.digest).read_bytes() for s in stored] == blobs


@pytest.mark.parametrize("count", [3, 40])
def test_a_batch_is_durable_before_any_object_is_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """DESIGN 4 for batches: the bytes are synced (one syncfs, or an fsync each) before the
    first rename, and the renames are synced before write_files returns."""
    from fixture_store.objects import anchored, fsutil

    store = Store.at(tmp_path / "store")
    seen: list[tuple[str, int]] = []
    real_sync_all, real_fsync = fsutil.SyncBatch.sync_all, fsutil.fsync_path

    def sync_all(self: fsutil.SyncBatch) -> None:
        seen.append(("syncfs", len(list(store.iter_objects()))))
        real_sync_all(self)

    def fsync_path(path: Path) -> None:
        seen.append(
            ("fsync " + ("folder" if path.is_dir() else "file"), len(list(store.iter_objects())))
        )
        real_fsync(path)

    def fsync_folder(self: anchored.Folder) -> None:
        seen.append(("fsync folder", len(list(store.iter_objects()))))
        real_fsync_folder(self)

    real_fsync_folder = anchored.Folder.fsync
    monkeypatch.setattr(fsutil.SyncBatch, "sync_all", sync_all)
    monkeypatch.setattr(fsutil, "fsync_path", fsync_path)
    monkeypatch.setattr(anchored.Folder, "fsync", fsync_folder)
    paths = _files(tmp_path / "src", [os.urandom(64) for _ in range(count)])
    store.write_files(paths)
    data_syncs = [n for what, n in seen if what in ("syncfs", "fsync file")]
    assert data_syncs and data_syncs[0] == 0, seen  # synced while nothing was visible yet
    assert seen[-1][0] in ("syncfs", "fsync folder"), seen  # the renames were synced last
    assert len(list(store.iter_objects())) == count
    if sys.platform.startswith("linux") and count >= fsutil.SYNCFS_MIN:
        assert [what for what, _ in seen] == ["syncfs", "syncfs"], seen  # bytes, then renames


def test_a_buffered_stream_read_part_way_stores_exactly_what_is_left(tmp_path: Path) -> None:
    path, data = _big(tmp_path)
    store = Store.at(tmp_path / "store")
    with open(path, "rb") as f:  # buffered: the file position runs ahead of the stream's
        assert f.read(10) == data[:10]
        stored = store.write_stream(f)
    assert store.object_path(stored.digest).read_bytes() == data[10:]


def test_staged_files_are_invisible_until_published_and_removed_if_never_published(
    tmp_path: Path,
) -> None:
    import io

    store = Store.at(tmp_path / "store")
    blobs = [os.urandom(100 + i) for i in range(3)]
    with store.staging() as staging:
        staged = [staging.stream(io.BytesIO(b), digests.of_bytes(b)) for b in blobs]
        assert [s.stored.digest for s in staged] == [digests.of_bytes(b) for b in blobs]
        assert list(store.iter_objects()) == []  # checked, but nothing visible yet
        assert len(list(store.tmp_dir.iterdir())) == 3
        staging.publish(staged[:2])
        assert [store.object_path(s.stored.digest).read_bytes() for s in staged[:2]] == blobs[:2]
        assert not store.has(staged[2].stored.digest)
    assert not store.has(staged[2].stored.digest)
    assert list(store.tmp_dir.iterdir()) == []  # the unpublished one went with the block
    assert len(list(store.iter_objects())) == 2


def test_a_stream_of_other_bytes_stages_nothing(tmp_path: Path) -> None:
    import io

    from fixture_store.errors import IntegrityError

    store = Store.at(tmp_path / "store")
    expected = digests.of_bytes(b"expected")
    with store.staging() as staging:
        with pytest.raises(IntegrityError, match="nothing was stored"):
            staging.stream(io.BytesIO(b"other!!!"), expected)
        assert list(store.tmp_dir.iterdir()) == []
        staging.publish([])
    assert list(store.iter_objects()) == []
