"""The manifests the field ships, imported as they are: TFDS checksum files, JSON maps without
our ``format_version`` (flat, nested, or found by a JSON pointer), md5sum and sha1sum outputs
and weak digests under one policy, pooch registries with indented comments or a base URL, a
JAX port's upstreams answered by one flag, and orphans that another family registers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fixture_store import importers
from fixture_store.importers import jsonmanifest, tfds
from tests.support.cli import run
from tests.support.importing import family_doc, write

REV = "3f49326e4d9e8a4b0b1c1a6c8e4f2a9d7c1b5e60"
CODE_REV = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
A, B = b"alpha\n" * 10, b"beta\n" * 7


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _import(*args: str, family: str = "refs") -> tuple[int, str, str]:
    return run("import", *args, "--family", family)


def _one_line_error(err: str) -> None:
    assert err.startswith("error: ") and "Traceback" not in err
    assert "fix:" in err


# -- TFDS checksum files ---------------------------------------------------------------------


def test_tfds_lines_name_the_file_its_size_digest_and_url_as_tfds_writes_them() -> None:
    text = (
        f"https://example.org/d/a.zip\t{len(A)}\t{_sha(A)}\ta.zip\n"
        f"https://example.org/d/raw%2Bb.tgz?x=1\t{len(B)}\t{_sha(B)}\n"
    )
    assert importers.detect(text, "checksums.tsv") == "tfds"
    a, b = tfds.parse(text, "checksums.tsv")
    assert (a.path, a.size, a.sha256, a.url) == (
        "a.zip",
        len(A),
        _sha(A),
        "https://example.org/d/a.zip",
    )
    assert b.path == "raw+b.tgz"  # no FILENAME: the URL's last segment, unquoted


@pytest.mark.usefixtures("store")
def test_a_tfds_gap_gets_the_url_as_its_source_and_an_http_one_stays_metadata(
    project: Path,
) -> None:
    data = project / "data"
    data.mkdir()
    (data / "checksums.tsv").write_text(
        f"https://example.org/a.zip\t{len(A)}\t{_sha(A)}\ta.zip\n"
        f"http://example.org/b.zip\t{len(B)}\t{_sha(B)}\tb.zip\n"
    )
    (data / "README.md").write_text("beside the list, not in it\n")
    code, _, err = _import("data/checksums.tsv", "--gaps", "--strict")
    assert code == 0, err  # a list of downloads has no orphans
    records = family_doc(project, "refs")["records"]
    assert records["refs/a.zip"]["source"] == {"type": "url", "url": "https://example.org/a.zip"}
    assert records["refs/a.zip"]["digest"] == f"sha256:{_sha(A)}"
    assert records["refs/a.zip"]["size"] == len(A)
    assert "source" not in records["refs/b.zip"] or records["refs/b.zip"]["source"]["type"] != "url"
    assert records["refs/b.zip"]["metadata"]["url"] == "http://example.org/b.zip"


# -- JSON maps without our format_version ----------------------------------------------------


def _entry(data: bytes, **more: Any) -> dict[str, Any]:
    return {"hash": _sha(data), "url": "https://example.org/x", **more}


def test_a_flat_json_map_is_found_by_itself() -> None:
    text = json.dumps({"a.bin": _entry(A, license="CC0"), "b.bin": {"sha256": _sha(B)}})
    name, entries = importers.parse(None, text, "datasets.json")
    assert name == "json" and [e.path for e in entries] == ["a.bin", "b.bin"]
    assert entries[0].unknown == {"/a.bin/license": "CC0"}


def test_a_nested_map_is_provider_slash_dataset_and_a_pointer_picks_one_provider() -> None:
    doc = {"geoda": {"airbnb": _entry(A)}, "ny": {"bb": _entry(B, filename="bb.zip")}}
    _, entries = importers.parse(None, json.dumps(doc), "database.json")
    assert [e.path for e in entries] == ["geoda/airbnb", "ny/bb"]
    assert entries[1].unknown == {"/ny/bb/filename": "bb.zip"}
    options = importers.ReadOptions(json_pointer="/ny")
    _, (only,) = importers.parse(None, json.dumps(doc), "database.json", options)
    assert only.path == "ny/bb"


@pytest.mark.parametrize(
    ("doc", "pointer", "message"),
    [
        ({"a": 1}, None, "is not a map of name -> entry with a digest"),
        ({"a": {"x": {"hash": _sha(A)}}}, "/b", "no key 'b' there"),
        ({"a": {"x": {"hash": _sha(A)}}}, "a", "a JSON pointer starts with '/'"),
    ],
)
def test_a_map_that_is_not_one_is_refused_with_the_pointer_fix(
    doc: Any, pointer: str | None, message: str
) -> None:
    with pytest.raises(importers.ManifestError, match=message) as caught:
        jsonmanifest.parse(json.dumps(doc), "m.json", pointer)
    assert "--json-pointer" in (caught.value.fix or "")


# -- weak digests: one policy ----------------------------------------------------------------


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("tool", ["md5", "sha1"])
def test_md5sum_and_sha1sum_outputs_check_present_bytes_and_record_sha256(
    project: Path, tool: str
) -> None:
    data = project / "data"
    write(data, {"a.bin": A})
    weak = hashlib.new(tool, B).hexdigest()
    (data / "SUMS").write_text(f"{hashlib.new(tool, A).hexdigest()}  a.bin\n{weak}  b.bin\n")
    code, _, err = _import("data/SUMS", "--gaps")
    assert code == 0, err
    records = family_doc(project, "refs")["records"]
    assert records["refs/a.bin"]["digest"] == f"sha256:{_sha(A)}"
    gap = records["refs/b.bin"]
    # The weak digest is the one the gap awaits, shown as the record's digest, without a size.
    assert "weak" in gap["gap"]["reason"] and "size" not in gap
    assert gap["digest"] == f"{tool}:{weak}"
    assert gap["metadata"]["imported_from"]["digests"] == [f"{tool}:{weak}"]


@pytest.mark.usefixtures("store")
def test_a_weak_gap_with_an_https_url_gets_it_as_its_source_so_fetch_can_fill_it(
    project: Path,
) -> None:
    """The https URL of an entry known by md5 or sha1 alone is its gap's source, as for one
    known by its SHA-256; a digest a gap cannot await (sha512) keeps it as metadata only."""
    data = project / "data"
    data.mkdir()
    md5, sha1 = hashlib.md5(A).hexdigest(), hashlib.sha1(B).hexdigest()
    sha512 = hashlib.sha512(A).hexdigest()
    (data / "registry.txt").write_text(
        f"a.bin md5:{md5} https://example.org/a.bin\n"
        f"b.bin sha1:{sha1} https://example.org/b.bin\n"
        f"c.bin sha512:{sha512} https://example.org/c.bin\n"
    )
    code, _, err = _import("data/registry.txt", "--gaps")
    assert code == 0, err
    records = family_doc(project, "refs")["records"]
    for name, digest in (("a.bin", f"md5:{md5}"), ("b.bin", f"sha1:{sha1}")):
        record = records[f"refs/{name}"]
        assert record["source"] == {"type": "url", "url": f"https://example.org/{name}"}
        assert record["digest"] == digest and "size" not in record and "weak" in str(record)
    only = records["refs/c.bin"]
    assert "digest" not in only and only["metadata"]["url"] == "https://example.org/c.bin"
    assert only.get("source", {}).get("type") != "url"


@pytest.mark.usefixtures("store")
def test_a_weak_digest_that_does_not_match_refuses_the_import(project: Path) -> None:
    data = project / "data"
    write(data, {"a.bin": A})
    (data / "SUMS").write_text(f"{hashlib.md5(B).hexdigest()}  a.bin\n")
    code, _, err = _import("data/SUMS")
    assert code == 1 and "md5 of the bytes is" in err


# -- pooch -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("store")
def test_a_pooch_registry_with_an_indented_comment_is_detected_and_base_url_joins_names(
    project: Path,
) -> None:
    data = project / "data"
    data.mkdir()
    (data / "registry.txt").write_text(
        f"# a comment\n a.bin {_sha(A)}\n  # indented, as pooch's own test data has it\n"
        f"b.bin {_sha(B)} https://mirror.example.org/b.bin\n"
    )
    code, _, err = _import("data/registry.txt", "--gaps", "--base-url", "https://example.org/v1/")
    assert code == 0, err
    records = family_doc(project, "refs")["records"]
    assert records["refs/a.bin"]["metadata"]["url"] == "https://example.org/v1/a.bin"
    assert records["refs/b.bin"]["metadata"]["url"] == "https://mirror.example.org/b.bin"


@pytest.mark.usefixtures("store")
def test_base_url_is_refused_for_another_format(project: Path) -> None:
    write(project / "data", {"SHA256SUMS": f"{_sha(A)}  a.bin\n".encode()})
    code, _, err = _import("data/SHA256SUMS", "--base-url", "https://example.org/")
    assert code == 2
    _one_line_error(err)


# -- a JAX port's upstreams: one flag --------------------------------------------------------


def _jax_port(project: Path) -> str:
    """A JAX port's manifest as such libraries write it: every upstream a bare OWNER/NAME at a
    40-hex revision with a checkpoint file, one checkpoint written as another repository's
    file, digests beside the upstream."""
    doc = {
        "format_version": 1,
        "fixtures": {
            "vit/block0.npy": {
                "sha256": _sha(A),
                "upstream": {
                    "repository": "google/vit-base",
                    "revision": REV,
                    "checkpoint": "model.safetensors",
                },
                "checkpoint_sha256": "7b" * 32,
            },
            "vit/block1.npy": {
                "sha256": _sha(B),
                "upstream": {
                    "repository": "google/vit-base",
                    "revision": REV,
                    "checkpoint": "model.safetensors",
                },
            },
            "dino/out.npy": {
                "sha256": _sha(A + B),
                "upstream": {
                    "repository": "https://github.com/facebookresearch/dinov2",
                    "revision": CODE_REV,
                    "checkpoint": f"facebook/dinov2-small@{REV}:model.safetensors",
                },
                "checkpoint_sha256": "7c" * 32,
            },
        },
    }
    write(project / "refs", {"vit/block0.npy": A, "vit/block1.npy": B, "dino/out.npy": A + B})
    (project / "refs" / "manifest.json").write_text(json.dumps(doc))
    return "refs/manifest.json"


@pytest.mark.usefixtures("store")
def test_a_jax_port_manifest_names_every_ambiguous_entry_then_imports_with_one_flag(
    project: Path,
) -> None:
    manifest = _jax_port(project)
    code, _, err = _import(manifest, "--dry-run")
    assert code == 2
    _one_line_error(err)
    assert "2 entries name upstreams as bare OWNER/NAME" in err
    assert "'vit/block0.npy'" in err and "'vit/block1.npy'" in err
    assert "--upstream-host hf" in err
    code, _, err = _import(manifest, "--upstream-host", "hf")
    assert code == 0, err
    records = family_doc(project, "refs")["records"]
    (up,) = records["refs/vit/block0.npy"]["upstream"]
    assert up["repo_id"] == "google/vit-base" and up["digest"] == f"sha256:{'7b' * 32}"
    code_up, weights = records["refs/dino/out.npy"]["upstream"]
    assert code_up["type"] == "git" and "path" not in code_up
    assert weights["repo_id"] == "facebook/dinov2-small"
    assert weights["path"] == "model.safetensors" and weights["digest"] == f"sha256:{'7c' * 32}"


@pytest.mark.usefixtures("store")
def test_the_project_setting_answers_for_every_import(project: Path) -> None:
    manifest = _jax_port(project)
    (project / "pyproject.toml").write_text('[tool.fixture-store]\nupstream-host = "github"\n')
    code, _, err = _import(manifest)
    assert code == 0, err
    (up,) = family_doc(project, "refs")["records"]["refs/vit/block1.npy"]["upstream"]
    assert up["type"] == "git" and up["url"] == "https://github.com/google/vit-base"
    (project / "pyproject.toml").write_text('[tool.fixture-store]\nupstream-host = "gitlab"\n')
    code, _, err = _import(manifest, "--dry-run")
    assert code == 2 and "must be one of hf, github" in err


# -- orphans are files no family registers ---------------------------------------------------


@pytest.mark.usefixtures("store")
def test_a_file_another_family_registers_is_no_orphan(project: Path) -> None:
    data = project / "data"
    write(data, {"a.bin": A, "b.bin": B})
    (data / "SHA256SUMS").write_text(f"{_sha(A)}  a.bin\n")
    assert run("add", "data/b.bin", "--name", "other/b.bin", "--kind", "fixture")[0] == 0
    code, _, err = _import("data/SHA256SUMS", "--strict")
    assert code == 0, err


# -- gaps lift when their bytes arrive -------------------------------------------------------


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("fmt", ["tfds", "sha256sum"])
def test_a_gap_lifts_when_its_bytes_arrive(project: Path, fmt: str) -> None:
    data = project / "data"
    data.mkdir()
    manifest = data / "list.txt"
    if fmt == "tfds":  # the size known: the gap's record has the digest and size
        manifest.write_text(f"https://example.org/a.bin\t{len(A)}\t{_sha(A)}\ta.bin\n")
    else:  # the SHA-256 alone: the digest the gap awaits
        manifest.write_text(f"{_sha(A)}  a.bin\n")
    assert _import("data/list.txt", "--gaps")[0] == 0
    assert "gap" in family_doc(project, "refs")["records"]["refs/a.bin"]
    (data / "a.bin").write_bytes(A)
    code, _, err = _import("data/list.txt")
    assert code == 0, err
    record = family_doc(project, "refs")["records"]["refs/a.bin"]
    assert "gap" not in record and record["digest"] == f"sha256:{_sha(A)}"
    assert record["size"] == len(A)
    assert run("verify")[0] == 0
