"""Zip container checks: every hostile zip case is refused; streamed zips are accepted."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from fixture_store.limits import DEFAULT
from fixture_store.readers import archives
from tests.support.archive_corpus import CASES, GOOD, Case, assert_refused, case_id
from tests.support.hostile import manifest


@pytest.mark.parametrize("case", [c for c in CASES if c.fmt == "zip"], ids=case_id)
def test_hostile_archive_is_refused_and_nothing_is_written(tmp_path: Path, case: Case) -> None:
    assert_refused(tmp_path, case)


class _Unseekable(io.RawIOBase):
    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.data += b
        return len(b)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zip_with_data_descriptors_and_folder_entries_is_accepted(
    tmp_path: Path, method: int
) -> None:
    sink = _Unseekable()
    with zipfile.ZipFile(sink, "w", compression=method) as zf:
        zf.mkdir("data")
        for name, data in GOOD.items():
            with zf.open(name, "w") as f:
                f.write(data)
    path = tmp_path / "streamed.zip"
    path.write_bytes(bytes(sink.data))
    with zipfile.ZipFile(path) as zf:
        assert all(i.flag_bits & 0x8 for i in zf.infolist() if not i.is_dir())
    assert dict(archives.scan(path, DEFAULT, manifest(GOOD)).members) == manifest(GOOD)
