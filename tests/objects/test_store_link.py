"""`add --link`: hard links instead of copies, with the store's guarantees kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.errors import IntegrityError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names

OTHER_FS = Path("/dev/shm")


def test_a_linked_file_is_the_object_and_both_are_read_only(tmp_path: Path) -> None:
    src = tmp_path / "w.bin"
    data = os.urandom(3 << 20)
    src.write_bytes(data)
    store = Store.at(tmp_path / "store")
    stored = store.write_file(src, link=True)
    obj = store.object_path(stored.digest)
    assert stored.digest == digests.of_bytes(data)
    assert stored.blake3 == blake3.blake3(data).hexdigest()
    assert os.path.samefile(src, obj)
    assert stat.S_IMODE(src.stat().st_mode) & 0o222 == 0
    assert src.read_bytes() == data
    assert list(store.tmp_dir.iterdir()) == []


def test_a_linked_folder_shares_every_member(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    blobs = {f"input_{i}.pb": os.urandom(4096) for i in range(20)}
    for name, data in blobs.items():
        (folder / name).write_bytes(data)
    store = Store.at(tmp_path / "store")
    stored = store.write_files([folder / n for n in blobs], link=True)
    for (name, data), s in zip(blobs.items(), stored, strict=True):
        assert s.digest == digests.of_bytes(data)
        assert os.path.samefile(folder / name, store.object_path(s.digest))


def test_a_linked_file_with_the_wrong_digest_stores_nothing_and_keeps_the_file(
    tmp_path: Path,
) -> None:
    src = tmp_path / "w.bin"
    src.write_bytes(b"the real bytes")
    mode = src.stat().st_mode
    store = Store.at(tmp_path / "store")
    wrong = digests.of_bytes(b"other bytes")
    with pytest.raises(IntegrityError, match="do not match the expected digest"):
        store.write_file(src, wrong, link=True)
    assert src.read_bytes() == b"the real bytes"
    assert src.stat().st_mode == mode and src.stat().st_nlink == 1
    assert list(store.iter_objects()) == []
    assert list(store.tmp_dir.iterdir()) == []


@pytest.mark.skipif(not OTHER_FS.is_dir(), reason="needs /dev/shm as a second filesystem")
@pytest.mark.usefixtures("store")
def test_a_file_on_another_filesystem_is_copied_and_named(project: Path) -> None:
    if os.stat(OTHER_FS).st_dev == os.stat(project).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test folder here")
    (project / "data").mkdir()
    local = project / "data" / "here.bin"
    local.write_bytes(b"here" * 1000)
    elsewhere = Path(os.path.realpath(OTHER_FS)) / f"fixture-store-test-{os.getpid()}.bin"
    elsewhere.write_bytes(b"there" * 1000)
    try:
        link_target = project / "data" / "there.bin"
        link_target.symlink_to(elsewhere)
        result = CliRunner().invoke(
            main, ["add", "data/there.bin", "--name", "fam/there", "--kind", "fixture", "--link"]
        )
        assert result.exit_code == 0, result.stderr
        assert "1 file(s) copied, not linked" in result.stderr
        assert str(link_target) in result.stderr or "there.bin" in result.stderr
        assert os.stat(elsewhere).st_nlink == 1  # a copy, not a link
        result = CliRunner().invoke(
            main, ["add", "data/here.bin", "--name", "fam/here", "--kind", "fixture", "--link"]
        )
        assert result.exit_code == 0, result.stderr
        assert "copied, not linked" not in result.stderr
        assert os.stat(local).st_nlink == 2
    finally:
        elsewhere.unlink()


def test_an_in_place_edit_of_a_linked_file_is_caught_by_verify(project: Path, store: Store) -> None:
    (project / "data").mkdir()
    src = project / "data" / "w.bin"
    src.write_bytes(os.urandom(1 << 20))
    ingest.add(store, registry_mod.load(project), src, name="fam/w", kind="checkpoint", link=True)
    reg = registry_mod.load(project)
    assert verify_names(store, reg, ["fam/w"])[0].status is Status.VERIFIED  # cache now warm
    os.chmod(src, 0o644)
    with open(src, "r+b") as f:  # the hazard `--link` documents: editing the file in place
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))
    result = verify_names(store, reg, ["fam/w"])[0]
    assert result.status is Status.MISMATCH
    assert "fam/w" in result.name


NOBODY = 65534  # a user id that owns nothing of the test's


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file another user owns")
@pytest.mark.usefixtures("store")
def test_a_file_another_user_owns_is_copied_not_linked(project: Path) -> None:
    (project / "data").mkdir()
    theirs = project / "data" / "theirs.bin"
    theirs.write_bytes(b"their bytes" * 100)
    os.chown(theirs, NOBODY, NOBODY)
    mode = stat.S_IMODE(theirs.stat().st_mode)
    result = CliRunner().invoke(
        main, ["add", "data/theirs.bin", "--name", "fam/theirs", "--kind", "fixture", "--link"]
    )
    assert result.exit_code == 0, result.stderr
    assert "1 file(s) copied, not linked" in result.stderr
    # Linked, the object would be their file: they could edit it in place, and the commit
    # would have made their file read-only.
    assert theirs.stat().st_nlink == 1
    assert stat.S_IMODE(theirs.stat().st_mode) == mode and theirs.stat().st_uid == NOBODY
    record = registry_mod.load(project).get("fam/theirs")
    assert Store.at().object_path(record.object).stat().st_uid == os.geteuid()
