"""Extraction into the store: a sentinel-bound folder, reused when intact, repaired if tampered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixture_store.errors import StoreError, UnsafeArchiveError
from fixture_store.objects import digests, fsutil
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from tests.support.archive_corpus import GOOD, SUFFIX, TAR_FORMATS
from tests.support.hostile import compress, manifest, regular_tar, zip_bytes


@pytest.mark.parametrize("fmt", [*TAR_FORMATS, "zip"])
def test_valid_archive_extracts_into_place_with_a_sentinel(tmp_path: Path, fmt: str) -> None:
    archive = tmp_path / f"ok{SUFFIX[fmt]}"
    archive.write_bytes(compress(regular_tar(GOOD), fmt) if fmt != "zip" else zip_bytes(GOOD))
    store = Store.at(tmp_path / "store")
    man = manifest(GOOD)
    digest = digests.of_file(archive)
    folder = archives.extract(store, archive, man, archive_digest=digest)
    assert folder == archives.extraction_path(store, digest) / "members"
    for name, data in GOOD.items():
        assert (folder / name).read_bytes() == data
    assert (folder.parent / archives.SENTINEL).is_file()
    assert list(store.tmp_dir.iterdir()) == []
    assert archives.check_extraction(store, archive, man, archive_digest=digest) == folder
    # Idempotent: a second extraction reuses the checked folder.
    assert archives.extract(store, archive, man, archive_digest=digest) == folder


def _extracted(tmp_path: Path) -> tuple[Store, Path, dict[str, Digest], Digest, Path]:
    archive = tmp_path / "ok.tar.zst"
    archive.write_bytes(compress(regular_tar(GOOD), "tar.zst"))
    store = Store.at(tmp_path / "store")
    man = manifest(GOOD)
    digest = digests.of_file(archive)
    return store, archive, man, digest, archives.extract(store, archive, man)


def test_archive_edited_in_place_with_same_size_and_mtime_is_detected(tmp_path: Path) -> None:
    store, archive, man, digest, _folder = _extracted(tmp_path)
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    data[-5] ^= 0xFF
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert archive.stat().st_size == st.st_size and archive.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == "archive-digest"
    with pytest.raises(UnsafeArchiveError) as info:
        archives.extract(store, archive, man, archive_digest=digest)
    assert info.value.rule == "archive-digest"


@pytest.mark.parametrize("tamper", ["edit", "add", "remove", "sentinel"])
def test_tampered_extraction_is_detected_and_repaired(tmp_path: Path, tamper: str) -> None:
    store, archive, man, digest, folder = _extracted(tmp_path)
    target = folder / "b.txt"
    if tamper == "edit":
        target.chmod(0o644)
        target.write_bytes(b"BRAVO\n")
    elif tamper == "add":
        (folder / "data" / "new.bin").write_bytes(b"x")
    elif tamper == "remove":
        target.unlink()
    else:
        (folder.parent / archives.SENTINEL).write_text('{"format": "x"}')
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == (
        "extraction-sentinel" if tamper == "sentinel" else "extraction-tampered"
    )
    repaired = archives.extract(store, archive, man, archive_digest=digest)
    assert repaired == folder
    assert target.read_bytes() == GOOD["b.txt"]
    archives.check_extraction(store, archive, man, archive_digest=digest)


def test_sentinel_is_bound_to_the_manifest(tmp_path: Path) -> None:
    store, archive, _man, digest, _folder = _extracted(tmp_path)
    other = manifest({**GOOD, "b.txt": b"other\n"})
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, other, archive_digest=digest)
    assert info.value.rule == "extraction-sentinel"


@pytest.mark.parametrize("where", ["extraction", "members"])
def test_an_extraction_reached_through_a_link_is_not_reused(tmp_path: Path, where: str) -> None:
    import shutil

    store, archive, man, digest, folder = _extracted(tmp_path)
    planted = folder.parent if where == "extraction" else folder
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(planted, elsewhere)  # an intact copy, outside the store
    fsutil.remove_tree(planted)
    planted.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == "extraction-tampered" and "symbolic link" in info.value.message
    repaired = archives.extract(store, archive, man, archive_digest=digest)
    assert repaired == folder and not folder.is_symlink() and not folder.parent.is_symlink()
    assert (elsewhere / ("b.txt" if where == "members" else "members/b.txt")).is_file()


def test_an_extracted_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "ok.tar.zst"
    archive.write_bytes(compress(regular_tar(GOOD), "tar.zst"))
    store = Store.at(tmp_path / "store").ensure()
    user = tmp_path / "user"
    user.mkdir()
    (store.root / "extracted").symlink_to(user, target_is_directory=True)
    with pytest.raises(StoreError, match="plain folders"):
        archives.extract(store, archive, manifest(GOOD))
    assert list(user.iterdir()) == []


@pytest.mark.parametrize("tamper", ["link-folder", "fifo"])
def test_a_link_or_a_fifo_inside_an_extraction_is_tampered_never_followed(
    tmp_path: Path, tamper: str
) -> None:
    import shutil

    store, archive, man, digest, folder = _extracted(tmp_path)
    if tamper == "link-folder":
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(folder / "data", elsewhere)  # intact bytes, outside the store
        fsutil.remove_tree(folder / "data")
        (folder / "data").symlink_to(elsewhere, target_is_directory=True)
    else:
        (folder / "b.txt").unlink()
        os.mkfifo(folder / "b.txt")  # no writer: a blocking read would hang
    with pytest.raises(UnsafeArchiveError) as info:
        archives.check_extraction(store, archive, man, archive_digest=digest)
    assert info.value.rule == "extraction-tampered"
    assert archives.extract(store, archive, man, archive_digest=digest) == folder
    archives.check_extraction(store, archive, man, archive_digest=digest)


@pytest.mark.parametrize("level", ["tmp", "extracted"])
def test_an_extraction_never_writes_through_a_link_planted_after_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """The staging folder and the final rename are made from descriptors: a link planted once
    the store's folders were checked (here: a check that always passes) is refused."""
    archive = tmp_path / "ok.tar.zst"
    archive.write_bytes(compress(regular_tar(GOOD), "tar.zst"))
    store = Store.at(tmp_path / "store").ensure()
    user = tmp_path / "user"
    user.mkdir()
    fsutil.remove_tree(store.root / level)
    (store.root / level).symlink_to(user, target_is_directory=True)
    monkeypatch.setattr(Store, "plain", lambda *_, **__: True)
    monkeypatch.setattr(Store, "ensure", lambda self: self)
    with pytest.raises(StoreError, match="symbolic link"):
        archives.extract(store, archive, manifest(GOOD))
    assert list(user.iterdir()) == []
