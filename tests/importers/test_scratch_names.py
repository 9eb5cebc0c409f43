"""The importers that read folders the user did not write (a Hugging Face cache, a Git LFS
object folder) check and store a copy held in the import's scratch folder; every error raised
while a file is held there names the file the user gave, never the copy (a temporary name that
means nothing to them and is gone when the command ends)."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import pytest

from tests.importers.test_gitlfs import pointer, put_object
from tests.support.cli import run

COMMIT = "c0ffee" + "1" * 34


def _unsafe_npz() -> bytes:
    """An NPZ whose one member's NPY header is cut short: the content check refuses it."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x.npy", b"\x93NUMPY\x01\x00garbage")
    return buf.getvalue()


def _hf_cache(project: Path, data: bytes) -> tuple[str, str]:
    """A cached Hub repository holding ``bad.npz`` as huggingface_hub lays it out: the
    snapshot's link into ``blobs/``, the blob named by its SHA-256 (an LFS file)."""
    repo = project / "hf" / "models--org--tiny"
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    os.symlink(f"../../blobs/{blob.name}", repo / "snapshots" / COMMIT / "bad.npz")
    return "hf/models--org--tiny", f"hf/models--org--tiny/snapshots/{COMMIT}/bad.npz"


def _lfs_repo(project: Path, data: bytes) -> tuple[str, str]:
    """A working tree whose ``bad.npz`` is an LFS pointer, its object in ``.git/lfs``."""
    root = project / "lfsrepo"
    root.mkdir()
    (root / ".gitattributes").write_text("*.npz filter=lfs diff=lfs merge=lfs -text\n")
    (root / "bad.npz").write_bytes(pointer(data))
    put_object(root, data)
    return "lfsrepo", "lfsrepo/bad.npz"


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("make", [_hf_cache, _lfs_repo], ids=["hf-cache", "git-lfs"])
def test_a_refused_file_is_named_by_the_path_the_user_gave(project: Path, make: object) -> None:
    given, shown = make(project, _unsafe_npz())  # type: ignore[operator]
    code, _, err = run("import", given, "--family", "tiny")
    assert code == 1, err
    assert f"{shown} is refused, nothing was stored or recorded" in err, err
    assert "held-" not in err and "import-" not in err, err
