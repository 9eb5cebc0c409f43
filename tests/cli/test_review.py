"""fixture-store diff (a registry change as a reviewer reads it) and fixture-store check (the
records alone), on git repositories made in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import markdown  # type: ignore[import-untyped]  # mkdocs brings it, without stubs
import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.registry import shards
from tests.support.cli import run
from tests.support.gitoracle import git_env


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        env={**git_env(repo), "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z"},
        check=True,
        capture_output=True,
    )


def record(i: int, data: bytes | None = None, **fields: Any) -> dict[str, Any]:
    data = f"bytes {i}".encode() if data is None else data
    return {
        "kind": "fixture",
        "source": {"type": "local", "path": f"data/{i}.bin"},
        "digest": digests.of_bytes(data).text,
        "size": len(data),
        **fields,
    }


def write(project: Path, family: str, records: dict[str, Any], *, sharded: bool = False) -> None:
    folder = project / "provenance"
    if not sharded:
        doc = {"format_version": 1, "records": records}
        (folder / f"{family}.json").write_text(registry_mod.dumps(doc))
        return
    (folder / f"{family}.json").write_text(registry_mod.dumps({"format_version": 1, "shards": 256}))
    (folder / family).mkdir(exist_ok=True)
    for old in (folder / family).glob("*.json"):
        old.unlink()
    for shard, names in shards.grouped(records).items():
        doc = {"format_version": 1, "records": {n: records[n] for n in names}}
        (folder / family / f"{shard}.json").write_text(registry_mod.dumps(doc))


BEFORE = {
    "fam/loose": record(1, tolerance={"metric": "max_abs", "max": 1e-5}),
    "fam/tight": record(2, tolerance={"metric": "rms", "max": 1e-3}),
    "fam/env": record(3, tolerance={"metric": "rms", "max": 1e-6}),
    "fam/digest": record(4),
    "fam/gap": record(5, tolerance={"metric": "rms", "max": 1e-6}),  # a gap judges nothing
    "fam/old-name": record(6),
    "fam/gone": record(7),
    "fam/pinned": record(8),
}


def after() -> dict[str, Any]:
    out = dict(BEFORE)
    out["fam/loose"] = record(1, tolerance={"metric": "max_abs", "max": 1e-3, "why": "CI | flaky"})
    out["fam/tight"] = record(
        2, tolerance={"metric": "rms", "max": 1e-4, "why": "<img src=x> & *stricter*"}
    )
    out["fam/env"] = record(
        3,
        tolerance={
            "metric": "rms",
            "max": 1e-6,
            "expectations": {"device:cuda": {"max": 1e-4, "why": "TF32 matmuls"}},
        },
    )
    out["fam/digest"] = record(4, b"other bytes")
    out["fam/gap"] = {"kind": "fixture", "gap": {"reason": "upstream moved it"}}
    out["fam/new-name"] = out.pop("fam/old-name")
    del out["fam/gone"]
    out["fam/added"] = record(9)
    out["fam/pinned"] = record(8, source={"type": "local", "path": "data/other.bin"})
    return out


@pytest.fixture
def changed(project: Path, request: pytest.FixtureRequest) -> Path:
    """A repository whose HEAD holds BEFORE and whose working tree holds after(), in one family
    file or (``indirect`` parameter ``True``) in shards."""
    sharded = getattr(request, "param", False)
    git(project, "init", "-q")
    write(project, "fam", BEFORE, sharded=sharded)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "before")
    write(project, "fam", after(), sharded=sharded)
    return project


EXPECTED = {
    ("loosened", "fam/loose"),
    ("tightened", "fam/tight"),
    ("loosened", "fam/env"),
    ("digest", "fam/digest"),
    ("gap-made", "fam/gap"),
    ("renamed", "fam/new-name"),
    ("removed", "fam/gone"),
    ("added", "fam/added"),
    ("source", "fam/pinned"),
}


@pytest.mark.parametrize("changed", [False, True], ids=["one-file", "sharded"], indirect=True)
@pytest.mark.usefixtures("changed")
def test_diff_names_every_change_a_reviewer_must_catch() -> None:
    code, out, _ = run("diff", "--json")
    assert code == 0
    doc = json.loads(out)
    assert {(c["kind"], c["name"]) for c in doc["changes"]} == EXPECTED
    by_name = {c["name"]: c for c in doc["changes"]}
    assert by_name["fam/loose"]["why"] == "CI | flaky"
    assert by_name["fam/loose"]["before"] == "max_abs <= 1e-05"
    assert by_name["fam/env"]["where"] == "tolerance record where device:cuda"
    assert by_name["fam/env"]["why"] == "TF32 matmuls"
    assert by_name["fam/new-name"]["renamed_from"] == "fam/old-name"
    digest = by_name["fam/digest"]
    assert digest["digest"]["before"] == BEFORE["fam/digest"]["digest"]  # in full
    assert digest["size"] == {"before": 7, "after": 11}
    assert by_name["fam/gap"]["digest"]["after"] is None
    assert doc["before"]["revision"] == "HEAD" and len(doc["before"]["commit"]) == 40
    assert doc["after"] == {"revision": None, "commit": None}
    assert doc["counts"]["loosened"] == 2


@pytest.mark.usefixtures("changed")
def test_diff_text_is_one_line_per_change_loosened_first() -> None:
    code, out, _ = run("diff")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("registry diff: HEAD (") and "-> working tree" in lines[0]
    assert len(lines) == 1 + len(EXPECTED)
    assert lines[1].startswith("loosened") and lines[2].startswith("loosened")
    assert any(
        line.startswith("renamed") and "fam/old-name -> fam/new-name" in line for line in lines
    )


@pytest.mark.usefixtures("changed")
def test_fail_on_exits_1_for_the_kinds_named() -> None:
    assert run("diff", "--fail-on", "loosened,digest,gap")[0] == 1
    assert run("diff", "--fail-on", "invalid,size")[0] == 0
    code, _, err = run("diff", "--fail-on", "looser")
    assert code == 2 and "'looser' is no kind of change" in err and "loosened" in err


@pytest.mark.usefixtures("changed")
def test_markdown_renders_as_a_table_with_the_values_escaped() -> None:
    code, out, _ = run("diff", "--format", "markdown")
    assert code == 0
    html = markdown.markdown(out, extensions=["tables"])
    assert html.count("<tr>") == 1 + len(EXPECTED)  # the header and a row per change
    assert "<strong>loosened</strong>" in html
    assert "<code>fam/loose</code>" in html
    # the why's '|' stays in its cell: six cells in every row
    assert "CI | flaky" in html
    assert all(row.count("<td>") == 6 for row in html.split("<tr>")[2:])
    # a why's HTML and emphasis are text, not markup
    assert "<img" not in html and "&lt;img src=x&gt; &amp; *stricter*" in html


@pytest.mark.parametrize("changed", [True], ids=["sharded"], indirect=True)
def test_diff_between_two_revisions(changed: Path) -> None:
    git(changed, "add", "-A")
    git(changed, "commit", "-qm", "after")
    code, out, _ = run("diff", "HEAD~1", "HEAD", "--json")
    assert code == 0
    doc = json.loads(out)
    assert {(c["kind"], c["name"]) for c in doc["changes"]} == EXPECTED
    assert doc["after"]["revision"] == "HEAD"
    # and nothing changed since
    code, out, _ = run("diff")
    assert code == 0 and out.splitlines() == [out.splitlines()[0]]
    assert "no changes" in out


@pytest.mark.usefixtures("changed")
def test_an_unknown_revision_is_a_usage_error() -> None:
    code, _, err = run("diff", "no-such-branch")
    assert code == 2 and "'no-such-branch' names no commit of the project's git repository" in err
    code, _, err = run("diff", "--output=x")
    assert code == 2


def test_an_invalid_record_is_named_not_a_traceback(changed: Path) -> None:
    records = after()
    records["fam/added"] = {**records["fam/added"], "digest": "sha256:abc"}
    write(changed, "fam", records, sharded=(changed / "provenance" / "fam").is_dir())
    code, out, _ = run("diff", "--fail-on", "invalid")
    assert code == 1
    assert any(line.startswith("invalid") and "fam/added" in line for line in out.splitlines())


def test_check_validates_records_without_a_store(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "no-store-here"))
    write(project, "fam", BEFORE)
    code, out, _ = run("check")
    assert (code, out) == (0, "registry: valid\n")
    broken = dict(BEFORE)
    broken["fam/bad"] = {**record(1), "digest": "sha256:abc"}
    broken["fam/oracle"] = record(
        2,
        tolerance={
            "metric": "max_abs",
            "max": 1,
            "oracle": {"record": "fam/f64", "metric": "rms", "factor": 2},
        },
    )
    write(project, "fam", broken)
    code, out, _ = run("check")
    assert code == 2
    assert "invalid-record: fam/bad: " in out
    assert "fam/oracle: its tolerance's oracle names 'fam/f64', which has no record" in out
    assert out.splitlines()[-2:] == [
        "registry: 2 problem(s)",
        "  fix: correct each record named above in its provenance/ file, then check again",
    ]
    code, out, _ = run("check", "--json")
    assert code == 2 and [p["name"] for p in json.loads(out)["problems"]] == [
        "fam/bad",
        "fam/oracle",
    ]
    assert not os.path.exists(tmp_path / "no-store-here")


def test_the_pre_commit_hooks_run_commands_that_need_no_store() -> None:
    """.pre-commit-hooks.yaml at the repository's root: each hook is a fixture-store command that
    exists, runs on registry files only and takes no file names (it reads provenance/ itself)."""
    import shlex

    import yaml

    from fixture_store.cli.app import COMMANDS

    root = Path(__file__).resolve().parents[2]
    hooks = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["fixture-store-check", "fixture-store-diff"]
    for hook in hooks:
        program, command = shlex.split(hook["entry"])
        assert program == "fixture-store" and command in COMMANDS
        assert hook["files"] == "^provenance/" and hook["pass_filenames"] is False
        assert hook["language"] == "python"
    assert hooks[1]["args"] == ["--fail-on", "loosened,digest,gap"]


def test_a_link_or_an_oversized_file_at_a_revision_is_refused_by_name(
    changed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.review import revisions

    with monkeypatch.context() as small:
        small.setattr(revisions, "MAX_FILE_BYTES", 100)
        code, _, err = run("diff")
    assert code == 2 and "HEAD:provenance/fam.json" in err and "more than a registry file" in err
    (changed / "provenance" / "other.json").symlink_to("fam.json")
    git(changed, "add", "-A")
    git(changed, "commit", "-qm", "a link")
    code, _, err = run("diff", "HEAD", "HEAD")
    assert code == 2 and "HEAD:provenance/other.json" in err and "a link" in err
