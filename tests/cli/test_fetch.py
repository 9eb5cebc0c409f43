"""``fixture-store fetch`` end to end through the CLI (local and hub sources, no network)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixture_store.cli import main
from fixture_store.objects.store import Store
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse
from tests.support.served import https_files


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    for i in range(3):
        (root / "data" / f"{i}.bin").write_bytes(bytes([i]) * 100)
    make_registry(
        root,
        {
            f"loc/f{i}": file_record({"type": "local", "path": f"data/{i}.bin"}, bytes([i]) * 100)
            for i in range(3)
        }
        | {
            "other/hub": file_record(
                {"type": "hub", "repo_id": "org/x", "revision": "a" * 40, "path": "w.bin"}, b"w"
            )
        },
    )
    return root


def run(project: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(
        main, ["--store", str(tmp_path / "store"), "--registry", str(project), *args], env=env
    )


def test_fetch_family_then_nothing_to_download_and_json(project: Path, tmp_path: Path) -> None:
    first = run(project, tmp_path, "fetch", "--family", "loc")
    assert first.exit_code == 0, first.output
    assert "3 artifacts: 3 fetched" in first.output
    second = run(project, tmp_path, "fetch", "--family", "loc", "--json")
    assert second.exit_code == 0
    doc = json.loads(second.output)
    assert doc["counts"] == {"present": 3} and doc["downloaded_bytes"] == 0
    assert [r["name"] for r in doc["results"]] == ["loc/f0", "loc/f1", "loc/f2"]


def test_damaged_object_fails_full_verify_and_fetch_repairs_it(
    project: Path, tmp_path: Path
) -> None:
    assert run(project, tmp_path, "fetch", "loc/*").exit_code == 0
    store = Store.at(tmp_path / "store")
    obj = next(p for _, p in store.iter_objects() if p.read_bytes() == bytes([1]) * 100)
    obj.chmod(0o644)
    obj.write_bytes(bytes([1]) * 99 + b"\xff")
    verify = run(project, tmp_path, "verify", "--full", "--family", "loc")
    assert verify.exit_code == 1 and "mismatch: loc/f1" in verify.output
    repair = run(project, tmp_path, "fetch", "--family", "loc")
    assert repair.exit_code == 0 and "3 artifacts: 2 present, 1 fetched" in repair.output
    assert run(project, tmp_path, "verify", "--full", "--family", "loc").exit_code == 0


def test_failure_exits_1_and_names_artifact_and_fix(project: Path, tmp_path: Path) -> None:
    result = run(project, tmp_path, "fetch", "other/hub", env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 1
    assert "failed: other/hub:" in result.output and "offline mode is on" in result.output
    assert "fix: fixture-store fetch other/hub" in result.output


@pytest.mark.parametrize("args", [(), ("--all", "loc/f0"), ("no/such",), ("--family", "nope")])
def test_usage_errors_exit_2(project: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run(project, tmp_path, "fetch", *args)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output


def test_invalid_record_exits_2(project: Path, tmp_path: Path) -> None:
    doc = json.loads((project / "provenance" / "other.json").read_text())
    doc["records"]["other/hub"]["source"]["revision"] = "main"
    (project / "provenance" / "other.json").write_text(json.dumps(doc))
    result = run(project, tmp_path, "fetch", "--all")
    assert result.exit_code == 2
    assert "invalid-record: other/hub" in result.output


def test_report_is_the_same_whether_fetched_or_already_present(
    project: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert run(project, tmp_path, "fetch", "--family", "loc", "--report", str(first)).exit_code == 0
    assert (
        run(project, tmp_path, "fetch", "--family", "loc", "--report", str(second)).exit_code == 0
    )
    assert first.read_bytes() == second.read_bytes()
    doc = json.loads(first.read_text())
    assert doc["ok"] is True
    assert doc["families"] == {"loc": {"artifacts": 3, "bytes": 300, "verified": 3}}
    assert [s["type"] for s in doc["sources"]] == ["local"]
    assert str(tmp_path) not in first.read_text()


def test_a_refused_download_is_reported_as_refused_not_as_zero_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    from tests.support.hubserver import hub_server

    commit = "0123456789abcdef0123456789abcdef01234567"
    weights = bytes(range(256)) * 16
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_ETAG_TIMEOUT", 1)
    src = {"type": "hub", "repo_id": "org/x", "revision": commit, "path": "w.bin"}
    root = tmp_path / "p"
    make_registry(root, {"hub/w": file_record(src, weights, "checkpoint")})
    with hub_server(commit) as (endpoint, state):
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        state.add("org/x", "w.bin", weights[::-1], fault="lie", announce=weights)
        result = run(root, tmp_path, "fetch", "--all")
    assert result.exit_code == 1
    assert "refused 1 downloads (4,096 bytes that did not match their records" in result.output
    assert "downloaded 0 bytes" in result.output  # nothing stored


def test_fetch_all_says_how_to_make_a_generated_artifact_it_cannot_download(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    make_registry(root, {"gen/out": file_record({"type": "generator", "stage": "toy"}, b"o")})
    result = run(root, tmp_path, "fetch", "--all", "--json")
    assert result.exit_code == 1
    [row] = json.loads(result.stdout)["results"]
    assert "not in the store yet" in row["message"]
    assert "fixture-store regenerate toy --fetch" in row["message"]


def test_a_fetch_that_went_well_prints_a_line_per_family_and_no_artifact(
    project: Path, tmp_path: Path
) -> None:
    assert run(project, tmp_path, "fetch", "--family", "loc").exit_code == 0
    quiet = run(project, tmp_path, "fetch", "--family", "loc")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout.splitlines()[:1] == ["  loc: 3 present"]
    assert len(quiet.stdout.splitlines()) == 2 and "loc/f0" not in quiet.stdout
    assert quiet.stderr == ""  # no progress bar (nor the blank line it leaves) in a log
    verbose = run(project, tmp_path, "fetch", "--family", "loc", "--verbose")
    assert all(f"loc/f{i}" in verbose.stdout for i in range(3))


def test_a_fetch_shows_a_row_only_for_what_is_not_fine(project: Path, tmp_path: Path) -> None:
    result = run(project, tmp_path, "fetch", "--all", env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 1
    assert "other/hub" in result.stdout and "loc/f0" not in result.stdout
    assert "  loc: 3 fetched" in result.stdout and "  other: 1 failed" in result.stdout


def test_a_filled_gap_is_named_with_the_sha256_recorded_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal says which records had their SHA-256 recorded, and what their bytes were
    checked against."""
    data = b"weakly known bytes\n" * 40
    md5 = hashlib.md5(data).hexdigest()
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/w.bin"] = data
        root = tmp_path / "weak"
        gap = {"kind": "fixture", "gap": {"reason": "absent; weak"}, "digest": f"md5:{md5}"}
        make_registry(
            root, {"refs/w.bin": {**gap, "source": {"type": "url", "url": served.url("w.bin")}}}
        )
        result = run(root, tmp_path, "fetch", "refs/w.bin")
    assert result.exit_code == 0, result.output
    sha = hashlib.sha256(data).hexdigest()
    assert "1 artifacts: 1 fetched" in result.stdout
    assert (
        f"recorded refs/w.bin: sha256:{sha} ({len(data):,} bytes), its bytes checked against "
        f"md5:{md5}; the gap is lifted"
    ) in result.stdout


def test_a_gap_that_kept_its_digest_is_named_as_lifted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal names each gap lifted whose record kept its digest and size: only the gap
    went."""
    data = b"bytes known by digest and size\n" * 40
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/s.bin"] = data
        root = tmp_path / "sized"
        record = file_record({"type": "url", "url": served.url("s.bin")}, data)
        make_registry(root, {"refs/s.bin": {**record, "gap": {"reason": "absent"}}})
        result = run(root, tmp_path, "fetch", "refs/s.bin")
    assert result.exit_code == 0, result.output
    assert "1 artifacts: 1 fetched" in result.stdout
    sha = hashlib.sha256(data).hexdigest()
    assert (
        f"lifted the gap of refs/s.bin: its bytes are in the store with the digest it kept, "
        f"sha256:{sha} ({len(data):,} bytes)"
    ) in result.stdout
    assert "recorded refs/s.bin" not in result.stdout
