"""DVC outs, as ``dvc add`` and ``dvc commit`` write them: md5 checked, SHA-256 recorded."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.importers import dvc
from fixture_store.importers.entry import ManifestError
from fixture_store.importers.register import ImportRefusedError
from fixture_store.objects.store import Store
from tests.support.importing import family_doc, plan, refusal, run_import

DATA = b"reference bytes\n" * 8
SHA = hashlib.sha256(DATA).hexdigest()
MD5 = hashlib.md5(DATA, usedforsecurity=False).hexdigest()


def _dvc(*args: str, cwd: Path) -> None:
    tool = Path(sys.executable).with_name("dvc")
    subprocess.run([str(tool), *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git + DVC repository with a file and a folder added, and a stage committed."""
    repo = tmp_path_factory.mktemp("dvc") / "repo"
    (repo / "provenance").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _dvc("init", "-q", cwd=repo)
    (repo / "data").mkdir()
    (repo / "data" / "ref.bin").write_bytes(DATA)
    (repo / "data" / "cases").mkdir()
    (repo / "data" / "cases" / "x.bin").write_bytes(b"x")
    (repo / "data" / "cases" / "y.bin").write_bytes(b"y")
    _dvc("add", "-q", "data/ref.bin", "data/cases", cwd=repo)
    _dvc("stage", "add", "-q", "-n", "make", "-o", "out.bin", "true", cwd=repo)
    (repo / "out.bin").write_bytes(b"made")
    _dvc("commit", "-q", "-f", "make", cwd=repo)
    return repo


@pytest.fixture
def repo(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(template, copy, symlinks=True)
    monkeypatch.chdir(copy)
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    return copy


def _cache_object(repo: Path, md5: str) -> Path:
    return repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def test_a_dvc_file_imports_with_its_md5_checked_and_sha256_recorded(
    store: Store, repo: Path
) -> None:
    planned, done = run_import(store, repo, repo / "data" / "ref.bin.dvc")
    assert planned.format == "dvc"
    (record,) = done.written
    assert record.name == "imp/ref.bin"
    assert record.object.hex == SHA
    assert record.source.to_json() == {"type": "local", "path": "data/ref.bin"}
    assert record.metadata is not None
    assert list(record.metadata["imported_from"]["digests"]) == [f"md5:{MD5}"]
    assert planned.orphans == ()  # the .dvc file and .gitignore are DVC's own


def test_an_absent_workspace_file_is_read_from_the_dvc_cache(store: Store, repo: Path) -> None:
    (repo / "data" / "ref.bin").unlink()
    _, done = run_import(store, repo, repo / "data" / "ref.bin.dvc")
    assert [r.object.hex for r in done.written] == [SHA]


def test_a_workspace_link_into_the_cache_reads_the_cache_object(store: Store, repo: Path) -> None:
    target = repo / "data" / "ref.bin"
    target.unlink()
    os.symlink(_cache_object(repo, MD5), target)  # what DVC's cache.type = symlink leaves
    _, done = run_import(store, repo, repo / "data" / "ref.bin.dvc")
    assert [r.object.hex for r in done.written] == [SHA]


def test_bytes_that_fail_dvc_md5_are_refused_and_nothing_is_registered(
    store: Store, repo: Path
) -> None:
    target = repo / "data" / "ref.bin"
    os.chmod(target, 0o644)
    target.write_bytes(DATA[:-1] + b"!")
    with pytest.raises(
        ImportRefusedError, match=f"md5 of the bytes is .*, the manifest says {MD5}"
    ):
        run_import(store, repo, repo / "data" / "ref.bin.dvc")
    assert family_doc(repo) == {}
    assert list(store.iter_objects()) == []


def test_a_directory_out_is_expanded_from_its_checked_listing(store: Store, repo: Path) -> None:
    _, done = run_import(store, repo, repo / "data" / "cases.dvc")
    assert sorted(r.name for r in done.written) == ["imp/cases/x.bin", "imp/cases/y.bin"]
    assert registry_mod.load(repo).get("imp/cases/x.bin").object.hex == (
        hashlib.sha256(b"x").hexdigest()
    )


def test_a_tampered_directory_listing_is_refused(repo: Path) -> None:
    text = (repo / "data" / "cases.dvc").read_text()
    md5 = text.split("md5: ")[1].split(".dir")[0]
    listing = _cache_object(repo, md5 + ".dir")
    os.chmod(listing, 0o644)
    listing.write_text('[{"md5": "00000000000000000000000000000000", "relpath": "x.bin"}]')
    with pytest.raises(ManifestError, match="the cached listing does not match its md5"):
        plan(repo, repo / "data" / "cases.dvc")


def test_a_directory_listing_missing_from_the_cache_says_to_fetch_it(repo: Path) -> None:
    shutil.rmtree(repo / ".dvc" / "cache")
    with pytest.raises(ManifestError, match="not in the DVC cache") as caught:
        plan(repo, repo / "data" / "cases.dvc")
    assert caught.value.fix is not None and "dvc fetch cases" in caught.value.fix


def test_dvc_lock_outs_import(store: Store, repo: Path) -> None:
    planned, done = run_import(store, repo, repo / "dvc.lock", fmt="dvc")
    assert [r.name for r in done.written] == ["imp/out.bin"]
    assert planned.accepted[0].entry.where.endswith("dvc.lock line 6")
    assert planned.manifest == "dvc.lock"  # as the project names it, never a machine path


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("- md5: abc\n  path: a.bin\n", "has 3 hex characters"),
        (f"- md5: {MD5}\n  path: ../a.bin\n", "'..' segment"),
        (f"- md5: {MD5}\n  path: /etc/passwd\n", "is absolute"),
        (f"- md5: {MD5}\n  md5: {MD5}\n  path: a.bin\n", "duplicate key 'md5'"),
        (f"- md5: {MD5}\n  path: a.bin\n- md5: {MD5}\n  path: a.bin\n", "listed twice"),
        ("- path: a.bin\n", "has no md5"),
        (f"- md5: {MD5}\n  size: -1\n  path: a.bin\n", "size must be"),
    ],
)
def test_hostile_dvc_files_are_refused_naming_the_line(out: str, message: str) -> None:
    where, said = refusal(lambda: dvc.parse(f"outs:\n{out}", "x.dvc"))
    assert message in said or re.search(message, said)
    assert where.startswith("x.dvc line ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("outs:\n- path: a.bin\n  md5: x\n  meta: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
        ("outs:\n- path: a.bin\n  md5: x\n  meta: " + "[" * 70 + "]" * 70 + "\n", "nested"),
        ("outs:\n- path: a.bin\n  md5: x\n  size: " + "9" * 5000 + "\n", "digit"),
        ("outs:\n- path: a.bin\n  md5: x\n  size: " + "9" * 30 + "\n", "more than 20 digits"),
        ("outs:\n- path: a.bin\n  md5: x\n  meta: .inf\n", "not finite"),
        ('outs:\n- path: a.bin\n  md5: x\n  meta: "\\ud800"\n', "lone surrogate"),
        ("x: &a [1, 2]\ny: [*a, *a]\nouts: []\n", "YAML alias"),
    ],
    ids=["deep-5000", "deep-70", "digits-5000", "digits-30", "inf", "surrogate", "alias"],
)
def test_a_dvc_file_past_the_registry_bounds_is_refused(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        dvc.parse(text, "x.dvc")
    assert caught.value.where.startswith("x.dvc")


def test_an_outs_fields_beyond_dvc_s_own_are_kept_verbatim_and_reported(
    store: Store, repo: Path
) -> None:
    """``desc``, ``meta``, ``labels``, ``remote``: what a project writes beside DVC's own fields
    reaches the record (metadata.unknown_fields, by pointer) and the report, never dropped."""
    dvc_file = repo / "data" / "ref.bin.dvc"
    text = dvc_file.read_text().replace(
        "  path: ref.bin\n",
        "  path: ref.bin\n  desc: the reference logits\n  meta:\n    owner: vision\n"
        "  labels: [golden]\n  remote: shared\n",
    )
    assert "desc:" in text
    dvc_file.write_text(text)
    planned, done = run_import(store, repo, dvc_file)
    (record,) = done.written
    assert record.metadata is not None
    assert record.metadata["unknown_fields"] == {
        "/outs/0/desc": "the reference logits",
        "/outs/0/meta": {"owner": "vision"},
        "/outs/0/labels": ["golden"],
        "/outs/0/remote": "shared",
    }
    assert planned.to_json()["unknown_fields"] == list(record.metadata["unknown_fields"])
