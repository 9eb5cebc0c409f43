"""Upstreams: pinned references without a digest, parsed by the pin rules, printed back."""

from __future__ import annotations

from typing import Any

import pytest

from fixture_store.errors import RegistryError
from fixture_store.registry import (
    GitUpstream,
    HubUpstream,
    PackageUpstream,
    UrlUpstream,
    Where,
    parse_record,
)
from fixture_store.registry.upstream import parse_list
from fixture_store.registry.upstream_notation import parse_uri

REV = "f826b80d28226b62986cc218e5cec390b1096902"
WHERE = Where("provenance/f.json", "f/x")
LOCAL = {"type": "local", "path": "x"}
HEX = "ab" * 32


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"hf://MIT/ast-finetuned-audioset-10-10-0.4593@{REV}/model.safetensors",
            HubUpstream("MIT/ast-finetuned-audioset-10-10-0.4593", REV, "model.safetensors"),
        ),
        (
            f"git+https://github.com/o/r@{REV}#src/model.py",
            GitUpstream("https://github.com/o/r", REV, "src/model.py"),
        ),
        (
            "pypi:onnx==1.22.0/onnx/backend/test/data",
            PackageUpstream("onnx==1.22.0", "onnx/backend/test/data"),
        ),
        ("https://example.org/a.bin", UrlUpstream("https://example.org/a.bin")),
        (
            f'{{"type": "url", "url": "https://example.org/a", "digest": "sha256:{HEX}"}}',
            UrlUpstream("https://example.org/a", digest=f"sha256:{HEX}"),
        ),
    ],
)
def test_the_short_forms_parse_and_print_back(text: str, expected: Any) -> None:
    up = parse_uri(text, WHERE)
    assert up == expected
    assert parse_uri(up.uri(), WHERE) == up or up.type == "url"
    assert parse_list([up.to_json()], WHERE) == (up,)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hf://MIT/ast@main/model.safetensors", "'main' is a branch"),
        (f"hf://MIT/ast@{REV[:12]}/model.safetensors", "short commit sha"),
        ("git+https://github.com/o/r@v1.0#x.py", "'v1.0' is a branch"),
        (f"git+http://github.com/o/r@{REV}#x.py", "not https"),
        (f"git+https://github.com/o/r@{REV}#../x.py", "x.py"),
        ("pypi:onnx>=1.22/x", "not an exact pin"),
        ("http://example.org/a", "not https"),
        ("https://huggingface.co/o/m/resolve/main/w.bin", "Hub file URL"),
        ("s3://bucket/x", "not a pinned upstream"),
        ('{"type": "svn", "url": "https://x"}', "unknown upstream type"),
        (f'{{"type": "url", "url": "https://x.org/a", "digest": "{HEX}"}}', "sha256:"),
    ],
)
def test_a_moving_or_unsafe_reference_is_refused(text: str, message: str) -> None:
    with pytest.raises(RegistryError, match="upstream") as e:
        parse_uri(text, WHERE)
    assert message in str(e.value)


def test_a_record_keeps_its_upstreams_seed_input_shape_and_command() -> None:
    raw = {
        "kind": "fixture",
        "source": LOCAL,
        "digest": f"sha256:{HEX}",
        "size": 1,
        "upstream": [
            {
                "type": "hub",
                "repo_id": "MIT/ast",
                "revision": REV,
                "path": "model.safetensors",
                "license": "bsd-3-clause",
            },
            {"type": "package", "requirement": "torch==2.4.0", "path": "torch/nn/functional.py"},
        ],
        "seed": 0,
        "input_shape": {"pixel_values": [1, 3, 224, 224]},
        "command": ["python", "gen.py", "--seed", "0"],
    }
    record = parse_record("f/x", raw, file="f.json")
    assert record.upstream[0] == HubUpstream(
        "MIT/ast", REV, "model.safetensors", license="bsd-3-clause"
    )
    assert record.seed == 0 and record.command == ("python", "gen.py", "--seed", "0")
    assert record.to_json() == raw


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("upstream", [], "non-empty list"),
        ("upstream", [{"type": "url", "url": "https://a.org/x"}] * 2, "twice"),
        ("upstream", [{"type": "url", "url": "https://a.org/x", "sha": "1"}], "unknown field"),
        ("seed", True, "integer"),
        ("input_shape", [1, -1], "non-negative"),
        ("input_shape", {}, "non-negative"),
        ("command", "python gen.py", "list of arguments"),
    ],
)
def test_a_bad_upstream_seed_shape_or_command_names_its_field(
    field: str, value: Any, message: str
) -> None:
    raw = {"kind": "fixture", "source": LOCAL, "digest": f"sha256:{HEX}", "size": 1, field: value}
    with pytest.raises(RegistryError, match=message) as e:
        parse_record("f/x", raw, file="f.json")
    assert e.value.field is not None and e.value.field.startswith(field)
