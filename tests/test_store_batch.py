"""Batched puts keep the single put's guarantees: checked bytes, one copy, no temp left."""

from __future__ import annotations

import os
from pathlib import Path

import blake3
import pytest

from fixture_store import digests
from fixture_store.errors import StoreError
from fixture_store.store import Store


def test_write_files_stores_every_file_with_both_digests(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    blobs = [os.urandom(4096) for _ in range(40)] + [b"dup", b"dup"]
    paths = []
    for i, data in enumerate(blobs):
        p = src / f"f{i}"
        p.write_bytes(data)
        paths.append(p)
    store = Store.at(tmp_path / "store")
    stored = store.write_files(paths, workers=4)
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
        store.write_files([tmp_path / "ok", tmp_path / "absent"], workers=2)
    assert list(store.tmp_dir.iterdir()) == []
    assert list(store.iter_objects()) == []
