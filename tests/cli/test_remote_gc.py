"""``fixture-store remote gc``: a dry run by default, --yes deletes, refusals exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.support.cli import add_file_and_case, run
from tests.support.s3server import FAKE_CREDENTIALS, moto_server


@pytest.fixture(autouse=True)
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user.toml"
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(path))
    return path


def _drop(project: Path, name: str) -> None:
    """The record ``name`` leaves the registry (its objects stay on the remote)."""
    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    del doc["records"][name]
    path.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.mark.usefixtures("store")
def test_remote_gc_is_a_dry_run_until_yes_and_what_is_referenced_still_pulls(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("remote", "add", "shared", str(remote), "--default")[0] == 0
    assert run("push", "--all")[0] == 0
    _drop(project, "fam/case")
    before = sorted(p for p in remote.rglob("*") if p.is_file())
    code, out, _ = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["bytes_freed"] > 0
    assert sorted(p for p in remote.rglob("*") if p.is_file()) == before
    code, out, err = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--yes")
    assert code == 0, err
    assert "removed" in out
    assert sorted(p for p in remote.rglob("*") if p.is_file()) != before
    code, out, _ = run("remote", "gc", "shared", "--min-age", "0", "--repack-below", "1", "--json")
    assert json.loads(out)["bytes_freed"] == 0  # nothing more
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    assert run("pull", "fam/a")[0] == 0
    assert run("verify", "fam/a")[0] == 0


@pytest.mark.usefixtures("store")
def test_remote_gc_refuses_a_keep_registry_that_does_not_parse(
    project: Path, tmp_path: Path
) -> None:
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("push", "--all", "--remote", str(remote))[0] == 0
    _drop(project, "fam/case")
    other = tmp_path / "other"
    (other / "provenance").mkdir(parents=True)
    (other / "provenance" / "fam.json").write_text("{ not json")
    before = sorted(p for p in remote.rglob("*") if p.is_file())
    code, _, err = run(
        "remote", "gc", str(remote), "--min-age", "0", "--yes", "--keep-registry", str(other)
    )
    assert code == 2, err
    assert "fam.json" in err and "Traceback" not in err
    assert sorted(p for p in remote.rglob("*") if p.is_file()) == before


@pytest.mark.usefixtures("store")
def test_remote_gc_refuses_a_hub_remote(project: Path) -> None:
    add_file_and_case(project)
    code, _, err = run("remote", "gc", "hf://datasets/org/x", "--yes")
    assert code == 2
    assert "history keeps every file" in err and "fix:" in err


@pytest.mark.usefixtures("store")
def test_the_table_counts_a_pack_too_young_to_touch_apart_from_one_kept_whole(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    add_file_and_case(project)
    remote = tmp_path / "remote"
    assert run("push", "--all", "--remote", str(remote))[0] == 0
    _drop(project, "fam/case")
    code, out, err = run("remote", "gc", str(remote))  # the pack was written a moment ago
    assert code == 0, err
    young = next(line for line in out.splitlines() if "packs too young" in line)
    kept = next(line for line in out.splitlines() if "packs kept whole" in line)
    assert "│ 1 " in young and "│ 0 " in kept
    assert "stay in packs kept whole or too young" in out
    assert "written too recently (--min-age)" in err


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """A moto server on loopback, fake credentials, and a client of it."""
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    with moto_server() as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="team")
        yield endpoint, client


def _uploads(client: Any) -> list[str]:
    return sorted(u["Key"] for u in client.list_multipart_uploads(Bucket="team").get("Uploads", []))


@pytest.mark.usefixtures("store")
def test_remote_gc_reports_then_aborts_the_multipart_upload_a_cut_push_left_on_s3(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3: tuple[str, Any]
) -> None:
    endpoint, client = s3
    add_file_and_case(project)
    url = "s3://team/fixtures"
    assert run("remote", "add", "team", url, "--endpoint-url", endpoint, "--default")[0] == 0
    assert run("push", "--all")[0] == 0
    # a push of a large object that died after its first part: the upload stays open
    key = "fixtures/objects/sha256/ab/" + "c" * 62
    upload = client.create_multipart_upload(Bucket="team", Key=key)["UploadId"]
    client.upload_part(Bucket="team", Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 4096)
    client.create_multipart_upload(Bucket="team", Key="elsewhere/objects/sha256/ab/cd")
    code, out, err = run("remote", "gc", "team", "--min-age", "1e12", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["uploads"] == [] and doc["young_uploads"] == 1  # moto dates uploads 2010
    code, out, err = run("remote", "gc", "team", "--min-age", "0", "--json")
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["bytes_freed"] == 4096
    assert [(u["key"], u["upload_id"], u["bytes"]) for u in doc["uploads"]] == [
        (key.removeprefix("fixtures/"), upload, 4096)
    ]
    code, out, err = run("remote", "gc", "team", "--min-age", "0")
    assert code == 0, err
    assert "uploads cut pushes left" in out and "4,096" in out
    assert _uploads(client) == sorted([key, "elsewhere/objects/sha256/ab/cd"])
    code, out, err = run("remote", "gc", "team", "--min-age", "0", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["aborted"] == [f"{key.removeprefix('fixtures/')} (upload {upload})"]
    assert _uploads(client) == ["elsewhere/objects/sha256/ab/cd"]
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh"))
    assert run("pull", "--all")[0] == 0
    assert run("verify")[0] == 0
