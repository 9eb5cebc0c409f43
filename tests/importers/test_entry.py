"""The entry every format parses into: checked on construction, printed and read back."""

from __future__ import annotations

import pytest

from fixture_store.importers.entry import ExpectedDigest, ManifestEntry, ManifestError
from fixture_store.importers.fields import Mapped
from fixture_store.registry import GitUpstream

SHA = "ab" * 32


def test_an_entry_prints_and_reads_back_the_same_value() -> None:
    entry = ManifestEntry(
        "fixtures/block0.npz",
        (ExpectedDigest("sha256", SHA), ExpectedDigest("md5", "cd" * 16)),
        "manifest.json: 'block0.npz'",
        size=3,
        url="https://example.org/block0.npz",
        arrays={"x": {"dtype": "float32", "shape": [1, 3]}},
        tolerance={"metric": "exact"},
        upstream=(GitUpstream("https://github.com/org/model", "a" * 40, "v1"),),
        stated_upstream={"repository": "org/other"},
        seed=0,
        input_shape=(1, 3),
        generator="scripts/make.py",
        metadata={"note": ["kept"]},
        unknown={"/fixtures/block0.npz/notes": {"a": [1]}},
        mapped=(Mapped("/fixtures/block0.npz/checksum", "the record's digest"),),
        pointer="/fixtures/block0.npz",
    )
    assert ManifestEntry.from_json(entry.to_json()) == entry
    assert entry.sha256 == SHA


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../x", "'..' segment"),
        ("/x", "is absolute"),
        ("a\\b", "backslash"),
        ("C:x", "drive letter"),
        ("a//b", "empty"),
        ("a\0b", "control character"),
    ],
)
def test_an_unsafe_path_is_refused_naming_where(path: str, message: str) -> None:
    entry = ManifestEntry(path, (ExpectedDigest("sha256", SHA),), "m line 7")
    assert entry.refused is not None and message in entry.refused  # by itself: no raise
    assert (entry.path, entry.where) == (path, "m line 7")  # as listed, never looked up


def test_an_entry_needs_a_digest() -> None:
    with pytest.raises(ManifestError, match="has no digest"):
        ManifestEntry("a.bin", (), "m line 1")


def test_weak_digests_are_read_as_checks_one_policy_for_every_format() -> None:
    # md5 and sha1 check the bytes that are there; the record keeps the SHA-256 of the bytes.
    assert ExpectedDigest.parse("MD5", "CD" * 16, "m") == ExpectedDigest("md5", "cd" * 16)
    assert ExpectedDigest.parse("sha1", "cd" * 20, "m") == ExpectedDigest("sha1", "cd" * 20)
    entry = ManifestEntry("a.bin", (ExpectedDigest("md5", "cd" * 16),), "m line 1")
    assert entry.weak_only and entry.sha256 is None
    with pytest.raises(ManifestError, match="md5 cannot vouch"):
        ExpectedDigest.parse("md5", "cd" * 16, "m line 1", weak_ok=False)
