"""Planning an import: bytes found and checked, absent files and orphans reported, nothing
written; origins in a project folder and inside a pinned distribution."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from fixture_store import importers
from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.importers import entry as entry_mod
from fixture_store.importers.entry import ManifestError
from fixture_store.importers.plan import LocalOrigin, PackageOrigin, package_origin
from fixture_store.importers.register import register
from fixture_store.objects.store import Store
from fixture_store.registry import PackageSource
from fixture_store.verify import Status, verify_names
from tests.support.importing import plan, write


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sums(folder: Path, names: list[str], listing: str = "SHA256SUMS") -> Path:
    path = folder / listing
    path.write_text("".join(f"{_sha((folder / n).read_bytes())}  {n}\n" for n in names))
    return path


def test_absent_files_and_orphans_are_reported_and_nothing_is_written(
    store: Store, project: Path
) -> None:
    data = project / "data"
    write(data, {"a.bin": b"a", "b.bin": b"b", "sub/c.bin": b"c", "other/d.bin": b"d"})
    manifest = _sums(data, ["a.bin", "b.bin", "sub/c.bin"])
    (data / "b.bin").unlink()
    write(data, {"sub/stray.bin": b"s"})
    planned = plan(project, manifest)
    assert [a.entry.path for a in planned.accepted] == ["a.bin", "sub/c.bin"]
    assert [e.path for e in planned.absent] == ["b.bin"]
    # Orphans: unlisted files beside listed ones; a folder the manifest never mentions is not
    # scanned, and the manifest is no orphan of itself.
    assert planned.orphans == ("sub/stray.bin",)
    assert not (project / "provenance" / "imp.json").exists()
    assert list(store.iter_objects()) == []


def test_a_wrong_size_is_a_mismatch(project: Path) -> None:
    write(project / "data", {"a.bin": b"abc"})
    doc = {"format_version": 1, "files": {"a.bin": {"sha256": _sha(b"abc"), "size": 4}}}
    (project / "data" / "m.json").write_text(json.dumps(doc))
    (mismatch,) = plan(project, project / "data" / "m.json").mismatched
    assert "3 bytes, the manifest says 4" in mismatch.reason


def test_a_symbolic_link_is_refused_not_followed(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"s")
    (project / "data").mkdir()
    os.symlink(outside, project / "data" / "a.bin")
    manifest = project / "data" / "SHA256SUMS"
    manifest.write_text(f"{_sha(b's')}  a.bin\n")
    with pytest.raises(ManifestError, match="not a regular file"):
        plan(project, manifest)


def test_a_root_outside_the_project_is_refused(project: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="outside the project"):
        LocalOrigin(project, tmp_path)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("registry.txt", f"a.bin {'0' * 64}\n", "pooch"),
        ("_registry.py", f"registry = {{'a.bin': '{'0' * 64}'}}\n", "pooch"),
        ("SHA256SUMS", f"{'0' * 64}  a.bin\n", "sha256sum"),
        ("a.bin.dvc", "outs: []\n", "dvc"),
        ("dvc.lock", "stages: {}\n", "dvc"),
        ("manifest.json", '{"format_version": 1}', "json"),
    ],
)
def test_the_format_is_detected(name: str, text: str, expected: str) -> None:
    assert importers.detect(text, name) == expected


def test_an_undetectable_format_asks_to_name_it() -> None:
    with pytest.raises(UsageError, match="reads as none") as caught:
        importers.detect("hello world\n", "notes.txt")
    assert caught.value.fix is not None and "fixture-store import FORMAT" in caught.value.fix


# -- a pinned distribution ----------------------------------------------------------------------
WHEEL = "tinydata-1.0.0-py3-none-any.whl"
PNG = b"\x89PNG\r\n\x1a\n fake image"


def _wheel(path: Path) -> bytes:
    registry = (
        f"registry = {{\n    'data/img.png': '{_sha(PNG)}',\n"
        f"    'data/gone.png': '{'1' * 64}',\n}}\n"
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tinydata/__init__.py", "")
        z.writestr("tinydata/data/_registry.py", registry)
        z.writestr("tinydata/data/img.png", PNG)
        z.writestr("tinydata/data/README.txt", "data\n")
        z.writestr(
            "tinydata-1.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: tinydata\nVersion: 1.0.0\n",
        )
        z.writestr(
            "tinydata-1.0.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("tinydata-1.0.0.dist-info/RECORD", "")
    return path.read_bytes()


def test_files_inside_a_pinned_distribution_get_package_sources(
    store: Store, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheel = _wheel(house / WHEEL)
    for var, value in (
        ("PIP_CONFIG_FILE", os.devnull),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", str(house)),
    ):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("FIXTURE_STORE_PIP", raising=False)
    dist = PackageSource("tinydata==1.0.0", WHEEL, f"sha256:{_sha(wheel)}", ".", len(wheel))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    origin = package_origin(store, project, dist, "tinydata", scratch)
    assert isinstance(origin, PackageOrigin)
    planned = importers.plan_import(origin, "tinydata/data/_registry.py")
    assert planned.manifest == "tinydata==1.0.0:tinydata/data/_registry.py"
    assert [e.path for e in planned.absent] == ["data/gone.png"]
    assert planned.orphans == ("data/README.txt",)
    done = register(store, registry_mod.load(project), planned, origin, family="tiny", gaps=True)
    (record,) = done.written
    assert record.source.to_json()["path"] == "tinydata/data/img.png"
    assert record.source.to_json()["file_digest"] == f"sha256:{_sha(wheel)}"
    results = verify_names(
        store, registry_mod.load(project), ["tiny/data/img.png", "tiny/data/gone.png"]
    )
    assert [r.status for r in results] == [Status.VERIFIED, Status.GAP]


@pytest.mark.parametrize("kind", ["fifo", "folder", "too-large"])
def test_a_manifest_that_is_no_regular_file_or_too_large_is_refused_before_reading(
    project: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A FIFO would hold the import forever; a manifest is read whole, so its size is bounded."""
    data = project / "data"
    write(data, {"a.bin": b"a"})
    manifest = data / "SHA256SUMS"
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "folder":
        manifest.mkdir()
    else:
        _sums(data, ["a.bin"])
        monkeypatch.setattr(entry_mod, "MAX_MANIFEST_BYTES", 16)
    with pytest.raises(ManifestError) as caught:
        plan(project, manifest, "sha256sum")
    assert caught.value.where == str(manifest)
    said = "larger than" if kind == "too-large" else "not a regular file"
    assert said in caught.value.message and caught.value.fix
