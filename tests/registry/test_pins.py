"""Pin rules: a Hub file URL must name a full 40-hex commit, not a branch hidden in its path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.registry import parse_record
from fixture_store.registry.pins import (
    check_hub_resolve_url,
    hub_url_revision,
    require_pinned_hub_url,
    revision_problem,
)

REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "url",
    [
        f"https://huggingface.co/org/tiny/resolve/{REV}/model.safetensors",
        f"https://huggingface.co/gpt2/resolve/{REV}/config.json",
        f"https://huggingface.co/datasets/org/clips/resolve/{REV}/a/b.mp4?download=true",
        f"https://huggingface.co/spaces/org/demo/raw/{REV}/app.py",
        f"https://hf.co/org/tiny/resolve/{REV}/model.bin",
        f"https://huggingface.co/org/resolve/resolve/{REV}/x.bin",  # a repo named "resolve"
        "https://example.org/org/tiny/resolve/main/model.bin",  # not the Hub: not its routes
        "https://huggingface.co/org/tiny",  # a repo page, not a file
        "https://huggingface.co/org/tiny/blob/main/README.md",  # the web view, not a download
    ],
)
def test_pinned_or_other_urls_pass(url: str) -> None:
    assert check_hub_resolve_url(url) is None


@pytest.mark.parametrize(
    ("url", "revision", "why"),
    [
        ("https://huggingface.co/org/tiny/resolve/main/model.bin", "main", "a branch, tag"),
        ("https://huggingface.co/gpt2/resolve/main/config.json", "main", "a branch, tag"),
        ("https://huggingface.co/datasets/org/c/resolve/v1.0/a.mp4", "v1.0", "a branch, tag"),
        ("https://huggingface.co/org/tiny/raw/main/config.json", "main", "a branch, tag"),
        ("https://huggingface.co/org/tiny/resolve/0123abc/m.bin", "0123abc", "short commit sha"),
        (f"https://huggingface.co/org/tiny/resolve/{REV.upper()}/m.bin", REV.upper(), "upper"),
        ("https://huggingface.co/org/t/resolve/refs%2Fpr%2F1/m.bin", "refs/pr/1", "a branch"),
        ("https://HuggingFace.co:443/org/tiny/resolve/main/m.bin", "main", "a branch, tag"),
        ("https://www.huggingface.co/org/tiny/resolve/main/m.bin", "main", "a branch, tag"),
        ("https://hf.co/org/resolve/resolve/main/x.bin", "main", "a branch, tag"),
    ],
)
def test_a_hub_url_at_a_moving_revision_is_refused(url: str, revision: str, why: str) -> None:
    assert hub_url_revision(url) == revision
    problem = check_hub_resolve_url(url)
    assert problem is not None
    assert problem.startswith(f"{url!r} is a Hub file URL whose revision {revision!r} is ")
    assert why in problem and "full 40-hex commit" in problem


def test_revision_problem_matches_the_hub_source_rule() -> None:
    assert revision_problem(REV) is None
    assert revision_problem("main") == "'main' is a branch, tag or other moving reference"
    assert revision_problem("abc1234") == "'abc1234' is a short commit sha"
    assert revision_problem(REV.upper()) == f"{REV.upper()!r} is upper case"


def test_require_raises_the_registry_error_naming_file_record_and_field() -> None:
    require_pinned_hub_url(f"https://huggingface.co/o/m/resolve/{REV}/x", file="f", record="r")
    with pytest.raises(RegistryError) as info:
        require_pinned_hub_url("https://huggingface.co/o/m/resolve/main/x", file="f", record="r")
    assert info.value.message.startswith("f: record 'r': field 'source.url': ")
    assert info.value.fix is not None and "commit sha" in info.value.fix


def _url_record(url: str) -> dict[str, object]:
    source = {"type": "url", "url": url}
    return {"kind": "fixture", "digest": "sha256:" + "ab" * 32, "size": 3, "source": source}


def test_a_url_record_hiding_a_branch_is_invalid(project: Path) -> None:
    url = "https://huggingface.co/org/tiny/resolve/main/model.bin"
    with pytest.raises(
        RegistryError, match=r"field 'source\.url': .* whose revision 'main' is a branch"
    ):
        parse_record("clips/a", _url_record(url), file="clips.json")
    # In a registry: the record is reported invalid, the others still load.
    pinned = f"https://huggingface.co/org/tiny/resolve/{REV}/model.bin"
    doc = {
        "format_version": 1,
        "records": {"clips/a": _url_record(url), "clips/b": _url_record(pinned)},
    }
    (project / "provenance" / "clips.json").write_text(json.dumps(doc))
    reg = registry_mod.load(project)
    invalid = dict(reg.invalid())
    assert "clips/a" in invalid and "full 40-hex commit" in invalid["clips/a"].message
    assert reg.get("clips/b").source.describe() == pinned


# A revision that starts with a full commit and goes on is not a pin, in every place one is read.
GOES_ON = [f"{REV}-wip", f"{REV}0", f"{REV}\n", f"{REV}/x", f" {REV}"]


@pytest.mark.parametrize("revision", GOES_ON)
def test_a_commit_that_goes_on_is_not_a_pin(revision: str) -> None:
    assert revision_problem(revision) is not None


def _source_forms(revision: str) -> list[tuple[str, dict[str, str]]]:
    hub = {"type": "hub", "repo_id": "org/m", "revision": revision, "path": "w.bin"}
    url = f"https://huggingface.co/org/m/resolve/{revision}/w.bin"
    return [
        ("source.revision", hub),
        ("source.url", {"type": "url", "url": url}),
        ("source.revision", {**hub, "repo_type": "dataset"}),
    ]


@pytest.mark.parametrize("revision", [f"{REV}-wip", f"{REV}0"])
def test_every_source_type_refuses_a_commit_that_goes_on(revision: str) -> None:
    for field, source in _source_forms(revision):
        raw = {"kind": "checkpoint", "digest": "sha256:" + "a" * 64, "size": 1, "source": source}
        with pytest.raises(RegistryError) as e:
            parse_record("fam/a", raw, file="provenance/fam.json")
        assert e.value.field == field, source


@pytest.mark.parametrize("revision", [f"{REV}-wip", f"{REV}0"])
def test_every_upstream_type_refuses_a_commit_that_goes_on(revision: str) -> None:
    from fixture_store.registry.upstream import parse_list
    from fixture_store.registry.upstream_notation import parse_uri
    from fixture_store.registry.where import Where

    where = Where("provenance/fam.json", "fam/a")
    forms = [
        f"hf://org/m@{revision}/w.bin",
        f"hf://datasets/org/m@{revision}/w.bin",
        f"git+https://github.com/o/r@{revision}#x.py",
        f"https://huggingface.co/org/m/resolve/{revision}/w.bin",
    ]
    for text in forms:
        with pytest.raises(RegistryError, match="upstream"):
            parse_uri(text, where)
    as_json = [
        {"type": "hub", "repo_id": "org/m", "revision": revision, "path": "w.bin"},
        {"type": "git", "url": "https://github.com/o/r", "commit": revision, "path": "x.py"},
        {"type": "url", "url": f"https://huggingface.co/org/m/resolve/{revision}/w.bin"},
    ]
    for raw in as_json:
        with pytest.raises(RegistryError, match="upstream"):
            parse_list([raw], where)
