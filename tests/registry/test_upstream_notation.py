"""One parser for every way an upstream is written: each notation, the repository at a commit
without a file, the bare OWNER/NAME question, and a branch where a commit is required."""

from __future__ import annotations

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import GitUpstream, HubUpstream, Upstream, Where, parse_record
from fixture_store.registry.upstream import parse_list
from fixture_store.registry.upstream_notation import parse_uri, pin, read

REV = "f826b80d28226b62986cc218e5cec390b1096902"
WHERE = Where(None, "f/x")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"google/vit-base-patch16-224@{REV}:model.safetensors",
            HubUpstream("google/vit-base-patch16-224", REV, "model.safetensors"),
        ),
        (f"gpt2@{REV}:config.json", HubUpstream("gpt2", REV, "config.json")),
        (f"hf://org/m@{REV}/w/model.bin", HubUpstream("org/m", REV, "w/model.bin")),
        (f"hf://models/org/m@{REV}/model.bin", HubUpstream("org/m", REV, "model.bin")),
        (
            f"hf://datasets/org/d@{REV}/data/x.parquet",
            HubUpstream("org/d", REV, "data/x.parquet", "dataset"),
        ),
        (
            f"hf://spaces/org/s@{REV}/app.py",
            HubUpstream("org/s", REV, "app.py", "space"),
        ),
        (
            f"git+https://github.com/o/r@{REV}#src/model.py",
            GitUpstream("https://github.com/o/r", REV, "src/model.py"),
        ),
        # a code repository pinned at a commit: no file
        (f"git+https://gitlab.com/o/r@{REV}", GitUpstream("https://gitlab.com/o/r", REV)),
        (
            f"https://github.com/o/r/tree/{REV}",
            GitUpstream("https://github.com/o/r", REV),
        ),
        (
            f"https://github.com/o/r/blob/{REV}/src/convert.py",
            GitUpstream("https://github.com/o/r", REV, "src/convert.py"),
        ),
        (
            f"https://huggingface.co/datasets/org/d/blob/{REV}/x.parquet",
            HubUpstream("org/d", REV, "x.parquet", "dataset"),
        ),
    ],
)
def test_every_notation_reads_as_its_pin(text: str, expected: Upstream) -> None:
    up = parse_uri(text, WHERE)
    assert up == expected
    assert parse_uri(up.uri(), WHERE) == up
    assert parse_list([up.to_json()], WHERE) == (up,)


def test_a_repository_at_a_commit_without_a_file_is_a_record_upstream() -> None:
    up = parse_uri(f"git+https://github.com/o/r@{REV}", WHERE)
    assert up.to_json() == {"type": "git", "url": "https://github.com/o/r", "commit": REV}
    assert up.uri() == f"git+https://github.com/o/r@{REV}"
    raw = {
        "kind": "fixture",
        "source": {"type": "local", "path": "x"},
        "digest": "sha256:" + "ab" * 32,
        "size": 1,
        "upstream": [up.to_json()],
    }
    record = parse_record("f/x", raw, file="provenance/f.json")
    assert record.upstream == (up,)


@pytest.mark.parametrize(
    "text", ["google/vit-base", f"google/vit-base@{REV}", "  google/vit-base  "]
)
def test_a_bare_owner_name_is_a_question_with_both_spellings(text: str) -> None:
    with pytest.raises(RegistryError) as caught:
        parse_uri(text, WHERE)
    message, fix = caught.value.message, caught.value.fix or ""
    assert "Hub repository or a GitHub repository?" in message
    assert "hf://google/vit-base@" in fix and "git+https://github.com/google/vit-base@" in fix


def test_the_question_shows_the_revision_and_file_stated_beside_it() -> None:
    spelled = read("google/vit-base", WHERE, "upstream")
    with pytest.raises(RegistryError) as caught:
        pin(spelled, WHERE, "upstream", revision=REV, path="model.safetensors")
    fix = caught.value.fix or ""
    assert f"hf://google/vit-base@{REV}/model.safetensors" in fix
    assert f"git+https://github.com/google/vit-base@{REV}#model.safetensors" in fix


def test_a_repository_type_answers_the_question() -> None:
    spelled = read("org/d", WHERE, "upstream")
    up = pin(spelled, WHERE, "upstream", revision=REV, path="x.csv", repo_type="dataset")
    assert up == HubUpstream("org/d", REV, "x.csv", "dataset")


@pytest.mark.parametrize(
    "text",
    [
        "google/vit@main:model.safetensors",
        "hf://google/vit@main/model.safetensors",
        "git+https://github.com/o/r@main",
        "https://github.com/o/r/tree/main",
        "https://github.com/o/r/blob/v1.2/src/x.py",
    ],
)
def test_a_branch_where_a_commit_is_required_is_refused_with_the_fix(text: str) -> None:
    with pytest.raises(RegistryError) as caught:
        parse_uri(text, WHERE)
    assert "branch, tag or other moving reference" in caught.value.message
    assert "full sha" in (caught.value.fix or "")


def test_a_revision_stated_twice_must_agree() -> None:
    spelled = read(f"git+https://github.com/o/r@{REV}", WHERE, "upstream")
    with pytest.raises(RegistryError, match="names the revision"):
        pin(spelled, WHERE, "upstream", revision="a" * 40)


def test_a_hub_repository_without_a_file_asks_for_one() -> None:
    with pytest.raises(RegistryError, match="names no file") as caught:
        parse_uri(f"hf://org/m@{REV}", WHERE)
    assert f"org/m@{REV}:FILE" in (caught.value.fix or "")
