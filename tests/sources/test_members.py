"""The minimal safe member reader: hostile entries are never served."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from fixture_store.sources.members import UnsafeMemberError, open_archive


def hostile_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/ok.bin", b"fine")
        z.writestr("../evil.bin", b"x")
        z.writestr("/abs.bin", b"x")
        link = zipfile.ZipInfo("pkg/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "ok.bin")
        z.writestr("pkg/dup.bin", b"one")
        with pytest.warns(UserWarning, match="Duplicate name"):
            z.writestr("pkg/dup.bin", b"two")
    return path


def hostile_tar(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as t:

        def add(
            name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, target: str = ""
        ) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname = kind, len(data), target
            t.addfile(info, io.BytesIO(data) if data else None)

        add("pkg/ok.bin", b"fine")
        add("pkg/../../evil.bin", b"x")
        add("pkg/sym", kind=tarfile.SYMTYPE, target="/etc/passwd")
        add("pkg/hard", kind=tarfile.LNKTYPE, target="pkg/ok.bin")
        add("pkg/fifo", kind=tarfile.FIFOTYPE)
    return path


@pytest.mark.parametrize("make", [hostile_zip, hostile_tar])
def test_regular_member_is_served_and_hostile_ones_refused(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    archive = open_archive(make(tmp_path / "a.bin"))
    with archive.open("pkg/ok.bin", 4) as f:
        assert f.read() == b"fine"
    assert sorted(archive.names()) == ["pkg/ok.bin"]
    for name in archive.refused:
        with pytest.raises(UnsafeMemberError, match=repr(name)):
            archive.open(name, 1)
    assert len(archive.refused) == 4


def test_zip_reasons_are_specific(tmp_path: Path) -> None:
    archive = open_archive(hostile_zip(tmp_path / "a.zip"))
    assert "more than once" in archive.refused["pkg/dup.bin"]
    assert "not a regular file" in archive.refused["pkg/link"]
    assert "unsafe path" in archive.refused["../evil.bin"]
    assert "unsafe path" in archive.refused["/abs.bin"]


def test_size_other_than_recorded_is_refused_before_reading(tmp_path: Path) -> None:
    archive = open_archive(hostile_zip(tmp_path / "a.zip"))
    with pytest.raises(UnsafeMemberError, match="is 4 bytes, the record expects 3"):
        archive.open("pkg/ok.bin", 3)


def test_not_an_archive_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "x.whl"
    p.write_bytes(b"not an archive at all")
    with pytest.raises(Exception, match="neither a zip nor a tar"):
        open_archive(p)
