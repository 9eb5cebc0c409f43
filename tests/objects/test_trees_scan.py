"""scan_folder (listed with scandir): every regular file, nested paths, and refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixture_store.objects.trees import TreePathError, scan_folder


def test_scan_lists_nested_regular_files_with_posix_paths(tmp_path: Path) -> None:
    (tmp_path / "b" / "c").mkdir(parents=True)
    for rel in ("a.bin", "b/x.pb", "b/c/y.pb"):
        (tmp_path / rel).write_bytes(rel.encode())
    found = scan_folder(tmp_path)
    assert found == {rel: tmp_path / rel for rel in ("a.bin", "b/c/y.pb", "b/x.pb")}


def test_scan_refuses_a_symlinked_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "tree").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "tree" / "sub")
    with pytest.raises(TreePathError, match="symbolic link"):
        scan_folder(tmp_path / "tree")


def test_scan_refuses_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(TreePathError, match="not a regular file"):
        scan_folder(tmp_path)
