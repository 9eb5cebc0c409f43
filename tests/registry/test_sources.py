"""Typed sources: each type parses its pinning rules, prints itself back, and names its field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixture_store.errors import RegistryError, UsageError
from fixture_store.registry import (
    GeneratorSource,
    HubSource,
    LocalSource,
    PackageSource,
    UrlSource,
    Where,
    parse_source,
)

PROJECT = Path(__file__).resolve().parents[2]
REV = "0123456789abcdef0123456789abcdef01234567"
HEX = "ab" * 32
WHERE = Where("provenance/fam.json", "fam/x")

HUB = {"type": "hub", "repo_id": "org/model", "revision": REV, "path": "w.bin"}
PACKAGE = {
    "type": "package",
    "requirement": "onnx==1.22.0",
    "file": "onnx-1.22.0-py3-none-any.whl",
    "file_digest": f"sha256:{HEX}",
    "file_size": 10,
    "path": "onnx/backend/test/data/node/test_abs",
}
URL = {"type": "url", "url": "https://example.invalid/clip.mp4"}
GENERATOR = {
    "type": "generator",
    "stage": "video",
    "generator": "models/video_clip.py",
    "environment": {"python": "3.12", "packages": {"av": "14.0.0"}},
    "params": {"frames": 48, "sizes": [64, 48]},
}
LOCAL = {"type": "local", "path": "data/w.bin"}
EXAMPLES: list[dict[str, Any]] = [
    HUB,
    {**HUB, "repo_type": "dataset"},
    PACKAGE,
    URL,
    GENERATOR,
    LOCAL,
]


def _committed_sources() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((PROJECT / "provenance").glob("*.json")):
        for name, record in json.loads(path.read_text())["records"].items():
            out.append((name, record["source"]))
    return out


def test_every_committed_source_round_trips() -> None:
    sources = _committed_sources()
    assert len(sources) > 1000
    for name, raw in sources:
        assert parse_source(raw, Where(record=name)).to_json() == raw, name


@pytest.mark.parametrize("raw", EXAMPLES, ids=lambda r: str(r["type"]))
def test_each_type_round_trips_key_for_key(raw: dict[str, Any]) -> None:
    source = parse_source(raw, WHERE)
    assert source.type == raw["type"]
    assert source.to_json() == raw
    assert json.dumps(source.to_json(), sort_keys=True) == json.dumps(raw, sort_keys=True)


def test_parse_source_dispatches_on_type() -> None:
    assert isinstance(parse_source(HUB, WHERE), HubSource)
    assert isinstance(parse_source(PACKAGE, WHERE), PackageSource)
    assert isinstance(parse_source(URL, WHERE), UrlSource)
    assert isinstance(parse_source(GENERATOR, WHERE), GeneratorSource)
    assert isinstance(parse_source(LOCAL, WHERE), LocalSource)


def test_describe_is_one_line_for_people() -> None:
    described = {raw["type"]: parse_source(raw, WHERE).describe() for raw in EXAMPLES}
    assert described == {
        "hub": f"hub dataset org/model@{REV[:12]}:w.bin",
        "package": f"package onnx==1.22.0 ({PACKAGE['file']}):{PACKAGE['path']}",
        "url": "https://example.invalid/clip.mp4",
        "generator": "generator stage video",
        "local": "local data/w.bin",
    }
    assert parse_source(HUB, WHERE).describe() == f"hub model org/model@{REV[:12]}:w.bin"


def test_a_left_out_repo_type_stays_left_out_and_means_model() -> None:
    hub = HubSource.from_json(HUB, WHERE)
    assert hub.repo_type is None and hub.resolved_repo_type == "model"
    assert "repo_type" not in hub.to_json()


@pytest.mark.parametrize(
    ("uri", "repo_type", "repo_id", "path"),
    [
        (f"hf://org/model@{REV}/w.bin", "model", "org/model", "w.bin"),
        (f"hf://datasets/org/data@{REV}/sub/x.npy", "dataset", "org/data", "sub/x.npy"),
        (f"hf://spaces/org/app@{REV}/a.onnx", "space", "org/app", "a.onnx"),
        (f"hf://gpt2@{REV}/config.json", "model", "gpt2", "config.json"),
    ],
)
def test_the_hub_uri_reads_and_prints_in_one_place(
    uri: str, repo_type: str, repo_id: str, path: str
) -> None:
    hub = HubSource.from_uri(uri)
    assert hub == HubSource(repo_id, REV, path, repo_type)
    assert hub.uri() == uri
    assert HubSource.from_uri(hub.uri()) == hub
    hub.check(WHERE)
    # A record that leaves repo_type out prints the same URI as one that says "model".
    assert HubSource(repo_id, REV, path).uri() == HubSource(repo_id, REV, path, "model").uri()


def test_a_hub_uri_without_revision_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="needs @REVISION"):
        HubSource.from_uri("hf://org/model/w.bin")
    with pytest.raises(UsageError, match="not a hub source"):
        HubSource.from_uri("https://example.org/x")


def test_values_built_in_code_are_checked_by_the_same_rules() -> None:
    with pytest.raises(RegistryError, match="'main' is a branch") as info:
        HubSource.from_uri("hf://org/model@main/w.bin").check(WHERE)
    assert (info.value.file, info.value.record, info.value.field) == (
        "provenance/fam.json",
        "fam/x",
        "source.revision",
    )
    with pytest.raises(RegistryError, match="not https"):
        UrlSource("http://example.org/x").check(WHERE)
    with pytest.raises(RegistryError, match="must be a non-empty string"):
        HubSource.from_uri(f"hf://org/model@{REV}").check(WHERE)
    with pytest.raises(RegistryError, match=r"'\.\.' segment"):
        LocalSource("../outside").check(WHERE)


def test_a_generator_source_holds_its_json_frozen() -> None:
    source = GeneratorSource("s", environment={"packages": {"numpy": "2.0"}}, params={"k": [1]})
    assert source.environment is not None and source.params is not None
    with pytest.raises(TypeError):
        source.environment["packages"]["numpy"] = "1.0"
    assert source.params["k"] == (1,)
    assert source.to_json() == {
        "type": "generator",
        "stage": "s",
        "environment": {"packages": {"numpy": "2.0"}},
        "params": {"k": [1]},
    }


def test_package_source_names_its_distribution() -> None:
    package = PackageSource.from_json(PACKAGE, WHERE)
    assert package.file_hex == HEX
    assert package.name_and_version == ("onnx", "1.22.0")


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        ("not an object", "source", "must be an object with a 'type'"),
        ({"path": "x"}, "source.type", "unknown source type None"),
        ({"type": "carrier-pigeon"}, "source.type", "unknown source type 'carrier-pigeon'"),
        ({"type": ["hub"]}, "source.type", "unknown source type"),
        (_with(HUB, revision="main"), "source.revision", "branch, tag or other moving reference"),
        (_with(HUB, revision="v1.0"), "source.revision", "moving reference"),
        (_with(HUB, revision=REV[:7]), "source.revision", "short commit sha"),
        (_with(HUB, revision=REV.upper()), "source.revision", "upper case"),
        (_with(HUB, revision=_DROP), "source.revision", "missing required field for a hub"),
        (_with(HUB, repo_id="org/a/b"), "source.repo_id", "is not a Hub repo id"),
        (_with(HUB, repo_id=""), "source.repo_id", "must be a non-empty string"),
        (_with(HUB, repo_id=None), "source.repo_id", "must be a non-empty string"),
        (_with(HUB, repo_type="model-zoo"), "source.repo_type", "one of model, dataset, space"),
        (_with(HUB, repo_type=None), "source.repo_type", "must be a non-empty string"),
        (_with(HUB, colour="red"), "source.colour", "unknown field for a hub source"),
        (_with(PACKAGE, requirement="onnx>=1.22"), "source.requirement", "not an exact pin"),
        (_with(PACKAGE, requirement="onnx~=1.22.0"), "source.requirement", "not an exact pin"),
        (_with(PACKAGE, requirement="onnx"), "source.requirement", "not an exact pin"),
        (_with(PACKAGE, file_digest=HEX), "source.file_digest", "prefix"),
        (_with(PACKAGE, file_size=-1), "source.file_size", "non-negative integer"),
        (_with(PACKAGE, file_size=True), "source.file_size", "non-negative integer"),
        (_with(PACKAGE, file_size="10"), "source.file_size", "non-negative integer"),
        (_with(PACKAGE, file_size=None), "source.file_size", "non-negative integer"),
        (_with(PACKAGE, path="../up"), "source.path", "'..' segment"),
        (_with(PACKAGE, file=_DROP), "source.file", "missing required field for a package"),
        (_with(URL, url="http://example.org/x"), "source.url", "not https"),
        (_with(URL, url="https://"), "source.url", "not https"),
        (_with(URL, url="https://example.org/a b"), "source.url", "whitespace"),
        (_with(URL, url="https://example.org/\x00"), "source.url", "control characters"),
        (_with(LOCAL, path="../outside"), "source.path", "'..' segment"),
        (_with(LOCAL, path=3), "source.path", "must be a non-empty string"),
        (_with(GENERATOR, environment=[1]), "source.environment", "must be an object"),
        (_with(GENERATOR, params="x"), "source.params", "must be an object"),
        (_with(GENERATOR, environment=None), "source.environment", "must be an object"),
        (_with(GENERATOR, generator=""), "source.generator", "must be a non-empty string"),
        (_with(GENERATOR, stage=_DROP), "source.stage", "missing required field"),
    ],
)
def test_refusals_name_the_field(raw: Any, field: str, needle: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse_source(raw, WHERE)
    assert info.value.field == field
    assert info.value.file == "provenance/fam.json" and info.value.record == "fam/x"
    assert needle in str(info.value)


@pytest.mark.parametrize("path", [".", "./", "./data/w.bin", "data/./w.bin"])
def test_a_local_path_may_name_the_project_root_or_use_dots(path: str) -> None:
    assert LocalSource.from_json({"type": "local", "path": path}, WHERE).path == path
