"""A Hugging Face cache, made by the real ``huggingface_hub`` client from the loopback Hub,
imported as Hub sources pinned at its commit, its blobs verified where they lie."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support.cli import run
from tests.support.hubserver import HubState, git_blob_id, hub_server

COMMIT = "c0ffee" + "1" * 34
WEIGHTS = b"\x00\x01weights" * 300
CONFIG = b'{"hidden": 8}\n'
NESTED = b"vocab\n" * 20


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A cache holding org/tiny at COMMIT: an LFS file, a git file and a nested git file,
    downloaded by ``hf_hub_download``; and datasets org/rows (one LFS file)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    cache_dir = tmp_path / "hf-cache"
    with hub_server(COMMIT) as (endpoint, state):
        _serve(state)
        for path in ("model.bin", "config.json", "tok/vocab.txt"):
            huggingface_hub.hf_hub_download(
                "org/tiny", path, revision=COMMIT, cache_dir=cache_dir, endpoint=endpoint
            )
        huggingface_hub.hf_hub_download(
            "org/rows",
            "rows.bin",
            repo_type="dataset",
            revision=COMMIT,
            cache_dir=cache_dir,
            endpoint=endpoint,
        )
    return cache_dir


def _serve(state: HubState) -> None:
    state.add("org/tiny", "model.bin", WEIGHTS)
    state.add("org/tiny", "config.json", CONFIG, lfs=False)
    state.add("org/tiny", "tok/vocab.txt", NESTED, lfs=False)
    state.add("org/rows", "rows.bin", WEIGHTS[::-1], repo_type="dataset")


def snapshot(cache: Path, repo: str = "models--org--tiny") -> Path:
    return cache / repo / "snapshots" / COMMIT


@pytest.mark.usefixtures("store")
def test_a_snapshot_imports_as_hub_sources_at_its_commit_and_verifies(
    cache: Path, project: Path, store: Store
) -> None:
    blobs = sorted(p.name for p in (cache / "models--org--tiny" / "blobs").iterdir())
    assert hashlib.sha256(WEIGHTS).hexdigest() in blobs and git_blob_id(CONFIG) in blobs
    code, out, err = run("import", str(snapshot(cache)), "--family", "tiny", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "hf-cache" and doc["manifest"] == f"hf://org/tiny@{COMMIT}"
    assert sorted(a["path"] for a in doc["accepted"]) == [
        "config.json",
        "model.bin",
        "tok/vocab.txt",
    ]
    assert doc["unverified"] == [] and doc["mismatched"] == []
    reg = registry_mod.load(project)
    record = reg.get("tiny/tok/vocab.txt")
    assert record.source.to_json() == {
        "type": "hub",
        "repo_id": "org/tiny",
        "revision": COMMIT,
        "path": "tok/vocab.txt",
    }
    assert record.object.hex == hashlib.sha256(NESTED).hexdigest()
    names = ["tiny/model.bin", "tiny/config.json", "tiny/tok/vocab.txt"]
    assert {r.status for r in verify_names(store, reg, names)} == {Status.VERIFIED}


@pytest.mark.usefixtures("store")
def test_the_repository_folder_imports_at_a_ref_and_a_dataset_keeps_its_type(
    cache: Path, project: Path
) -> None:
    code, _, err = run("import", str(cache / "datasets--org--rows"), "--family", "rows")
    assert code == 0, err
    source = registry_mod.load(project).get("rows/rows.bin").source.to_json()
    assert source["repo_type"] == "dataset" and source["revision"] == COMMIT
    repo = cache / "models--org--tiny"
    code, _, err = run("import", str(repo), "--family", "t", "--revision", "v9")
    assert code == 2 and "has no ref 'v9'" in err and COMMIT in err
    # What the client writes when it downloads a ref: refs/<ref> holding the commit.
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "v9").write_text(COMMIT)
    code, _, err = run("import", str(repo), "--family", "t", "--revision", "v9")
    assert code == 0, err
    assert registry_mod.load(project).get("t/model.bin").source.to_json()["revision"] == COMMIT


@pytest.mark.usefixtures("store")
def test_a_snapshot_with_another_revision_is_refused_and_nothing_is_imported(
    cache: Path, project: Path
) -> None:
    """A snapshot folder is one commit: a --revision naming another (a ref, another commit)
    is a usage error naming both, not silently imported as the snapshot's commit."""
    other = "d" * 40
    for revision in (other, "main"):
        code, _, err = run(
            "import", str(snapshot(cache)), "--family", "tiny", "--revision", revision
        )
        assert code == 2
        assert f"is the snapshot of {COMMIT}, not of --revision {revision}" in err
    assert registry_mod.load(project).names() == []
    code, _, err = run("import", str(snapshot(cache)), "--family", "tiny", "--revision", COMMIT)
    assert code == 0, err


@pytest.mark.parametrize(
    ("blob", "path", "why"),
    [
        (git_blob_id(CONFIG), "config.json", "git blob id of the bytes"),
        (hashlib.sha256(WEIGHTS).hexdigest(), "model.bin", "sha256 of the bytes"),
    ],
)
@pytest.mark.usefixtures("store")
def test_a_blob_whose_bytes_are_not_its_name_is_refused_naming_the_file(
    cache: Path, project: Path, blob: str, path: str, why: str
) -> None:
    (cache / "models--org--tiny" / "blobs" / blob).write_bytes(b'{"hidden": 9}\n')
    code, _, err = run("import", str(snapshot(cache)), "--family", "tiny")
    assert code == 1 and path in err and why in err
    assert not (project / "provenance" / "tiny.json").exists()


@pytest.mark.usefixtures("store")
def test_a_file_that_cannot_be_verified_is_named_and_left_out(cache: Path, project: Path) -> None:
    link = snapshot(cache) / "config.json"
    link.unlink()
    link.write_bytes(CONFIG)  # a cache made without links holds the file itself
    code, out, err = run("import", str(snapshot(cache)), "--family", "tiny")
    assert code == 0, err
    assert "imported 2 new record(s)" in out
    assert "not verified:" in err and "config.json" in err and "not a link into blobs/" in err
    assert (
        "tiny/config.json"
        not in json.loads((project / "provenance/tiny.json").read_text())["records"]
    )
    code, _, err = run("import", str(snapshot(cache)), "--family", "t2", "--strict")
    assert code == 1 and "found but not verified" in err


@pytest.mark.parametrize("target", ["outside", "absolute", "sibling"])
@pytest.mark.usefixtures("store")
def test_a_link_out_of_the_blobs_folder_is_refused_and_nothing_is_imported(
    cache: Path, project: Path, tmp_path: Path, target: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not yours")
    link = snapshot(cache) / "model.bin"
    link.unlink()
    text = {
        "outside": os.path.relpath(secret, link.parent),
        "absolute": str(secret),
        "sibling": "../../refs/main",
    }[target]
    link.symlink_to(text)
    code, _, err = run("import", str(snapshot(cache)), "--family", "tiny")
    assert code == 2, err
    assert "model.bin links to" in err and "outside the cache's blobs/ folder" in err
    assert "Traceback" not in err
    assert not (project / "provenance" / "tiny.json").exists()


@pytest.mark.usefixtures("store")
def test_a_blob_that_is_itself_a_link_is_refused(cache: Path, tmp_path: Path) -> None:
    blob = cache / "models--org--tiny" / "blobs" / hashlib.sha256(WEIGHTS).hexdigest()
    elsewhere = tmp_path / "elsewhere.bin"
    elsewhere.write_bytes(WEIGHTS)
    blob.unlink()
    blob.symlink_to(elsewhere)
    code, _, err = run("import", str(snapshot(cache)), "--family", "tiny")
    assert code == 2 and "is a symbolic link" in err and "follows no link" in err


@pytest.mark.usefixtures("store")
def test_dry_run_plans_what_the_import_then_registers(cache: Path, project: Path) -> None:
    args = ["import", str(snapshot(cache)), "--family", "tiny", "--json"]
    code, out, err = run(*args, "--dry-run")
    assert code == 0, err
    dry = json.loads(out)
    assert dry["imported"] is None and not (project / "provenance" / "tiny.json").exists()
    code, out, err = run(*args)
    assert code == 0, err
    real = json.loads(out)
    assert {k: v for k, v in real.items() if k != "imported"} == {
        k: v for k, v in dry.items() if k != "imported"
    }
    assert sorted(real["imported"]["written"]) == sorted(
        f"tiny/{a['path']}" for a in dry["accepted"]
    )
