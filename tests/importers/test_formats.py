"""Every format refuses any text it cannot read with a ManifestError (a usage error naming the
manifest), never another exception: a malformed manifest is a user mistake, not a crash."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store import importers
from fixture_store.errors import UsageError

SHA = "ab" * 32

# Text near each format's grammar: its own tokens, digests, paths and punctuation, recombined.
TOKENS = st.sampled_from(
    [
        SHA,
        SHA.upper(),
        "md5:" + "cd" * 16,
        "sha256:",
        "  ",
        " *",
        " ^",
        "\\",
        "\n",
        "#",
        "a.bin",
        "../x",
        "/etc/passwd",
        "'",
        '"',
        ":",
        "-",
        "- ",
        "outs:",
        "path: ",
        "md5: ",
        "size: ",
        "hash: md5",
        ".dir",
        "stages:",
        "{",
        "}",
        "[",
        "]",
        ",",
        "registry = ",
        "SHA256 (",
        ") = ",
        "format_version",
        "sha256",
        "null",
        "1",
        "-1",
        "true",
        "?",
    ]
)
TEXT = st.lists(TOKENS | st.text(max_size=4), max_size=30).map("".join)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.just(SHA),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "sha256",
                    "arrays",
                    "tolerance",
                    "upstream",
                    "seed",
                    "input_shape",
                    "dtype",
                    "shape",
                    "repository",
                    "a.bin",
                    "size",
                    "url",
                    "generator",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.parametrize(
    ("fmt", "shown"),
    [
        ("pooch", "registry.txt"),
        ("pooch", "_registry.py"),
        ("sha256sum", "SHA256SUMS"),
        ("dvc", "x.dvc"),
        ("dvc", "dvc.lock"),
        ("json", "manifest.json"),
    ],
)
@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_any_text_parses_or_is_refused_as_a_usage_error(fmt: str, shown: str, text: str) -> None:
    with contextlib.suppress(UsageError):
        importers.parse(fmt, text, shown)


@settings(max_examples=200, deadline=None)
@given(entry=JSONISH, environment=JSONISH)
def test_any_json_entry_parses_or_is_refused_as_a_usage_error(
    entry: object, environment: object
) -> None:
    doc = {"format_version": 1, "locked_environment": environment, "files": {"a.bin": entry}}
    with contextlib.suppress(UsageError):
        importers.parse("json", json.dumps(doc), "manifest.json")
