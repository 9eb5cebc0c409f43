"""The reproducible tar writer: the same members give the same bytes, normalised."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from fixture_store.limits import DEFAULT
from fixture_store.readers import archives
from tests.support.hostile import manifest


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_write_tar_is_byte_identical_and_normalised(
    tmp_path: Path, compression: archives.Compression
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"from a file")
    os.chmod(src, 0o755)
    members: dict[str, bytes | Path] = {"z/last.bin": b"z", "a.bin": b"a", "m/src.bin": src}
    suffix = {"none": ".tar", "lz4": ".tar.lz4", "zstd": ".tar.zst"}[compression]
    one = archives.write_tar(members, tmp_path / f"one{suffix}", compression)
    os.utime(src, (12345, 12345))
    two = archives.write_tar(
        dict(reversed(members.items())), tmp_path / f"two{suffix}", compression
    )
    assert one == two
    expected = {"z/last.bin": b"z", "a.bin": b"a", "m/src.bin": b"from a file"}
    tree = archives.scan(tmp_path / f"one{suffix}", DEFAULT, manifest(expected))
    assert list(tree.members) == sorted(expected)
    if compression == "none":
        with tarfile.open(tmp_path / "one.tar") as tf:
            infos = tf.getmembers()
        assert [i.name for i in infos] == sorted(expected)
        assert all(
            i.mtime == 0
            and i.uid == 0
            and i.gid == 0
            and i.mode == 0o644
            and i.uname == ""
            and i.gname == ""
            for i in infos
        )
