"""Scanning: the corpus covers every rule; written archives scan back, truncated ones fail."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.errors import UnsafeArchiveError
from fixture_store.limits import DEFAULT, GIB_1
from fixture_store.readers import archives
from tests.support.archive_corpus import CASES, GOOD, SUFFIX, TAR_FORMATS, metadata_json
from tests.support.hostile import compress, manifest, regular_tar, zip_bytes


def test_every_documented_rule_has_a_case() -> None:
    rules = {c.rule for c in CASES}
    for rule in (
        "absolute-path",
        "traversal",
        "sparse",
        "member-path",
        "backslash",
        "drive-letter",
        "symlink",
        "hardlink",
        "device",
        "fifo",
        "duplicate",
        "extra-member",
        "missing-member",
        "truncated",
        "trailing-garbage",
        "size-lie",
        "compression-ratio",
        "expanded-bytes",
        "member-count",
        "member-bytes",
        "archive-bytes",
        "overlap",
        "gap",
        "metadata-size",
    ):
        assert rule in rules, rule


_NAMES = st.from_regex(
    r"[a-z0-9_][a-z0-9_.-]{0,8}(/[a-z0-9_][a-z0-9_.-]{0,8}){0,2}", fullmatch=True
)
_MEMBERS = st.dictionaries(_NAMES, st.binary(max_size=2000), min_size=1, max_size=6).filter(
    lambda m: not any(a != b and b.startswith(a + "/") for a in m for b in m)
)


@settings(max_examples=60, deadline=None)
@given(members=_MEMBERS, fmt=st.sampled_from([*TAR_FORMATS, "zip"]))
def test_any_written_archive_scans_back_to_its_manifest(
    tmp_path_factory: pytest.TempPathFactory, members: dict[str, bytes], fmt: str
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    path = folder / f"x{SUFFIX[fmt]}"
    if fmt == "zip":
        path.write_bytes(zip_bytes(members, method=zipfile.ZIP_DEFLATED))
    else:
        compression = {"tar": "none", "tar.lz4": "lz4", "tar.zst": "zstd"}[fmt]
        archives.write_tar(members, path, compression)  # type: ignore[arg-type]
    tree = archives.scan(path, DEFAULT, manifest(members))
    assert dict(tree.members) == manifest(members)


@settings(max_examples=60, deadline=None)
@given(members=_MEMBERS, fmt=st.sampled_from(["tar.lz4", "tar.zst", "zip"]), data=st.data())
def test_any_truncated_archive_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
    members: dict[str, bytes],
    fmt: str,
    data: st.DataObject,
) -> None:
    folder = tmp_path_factory.mktemp("trunc")
    path = folder / f"x{SUFFIX[fmt]}"
    raw = zip_bytes(members) if fmt == "zip" else compress(regular_tar(members), fmt)
    cut = data.draw(st.integers(0, len(raw) - 1))
    path.write_bytes(raw[:cut])
    with pytest.raises(UnsafeArchiveError):
        archives.scan(path, DEFAULT, manifest(members))


@pytest.mark.parametrize("fmt", [*TAR_FORMATS, "zip"])
def test_a_metadata_member_at_the_profiles_limit_is_read(
    tmp_path_factory: pytest.TempPathFactory, fmt: str
) -> None:
    members = {**GOOD, "metadata.json": metadata_json(GIB_1.metadata_bytes)}
    path = tmp_path_factory.mktemp("meta") / f"x{SUFFIX[fmt]}"
    raw = zip_bytes(members) if fmt == "zip" else compress(regular_tar(members), fmt)
    path.write_bytes(raw)
    assert dict(archives.scan(path, GIB_1, manifest(members)).members) == manifest(members)
    # The default profile allows 256 KiB of metadata: the same archive is refused there.
    with pytest.raises(UnsafeArchiveError, match="metadata-size"):
        archives.scan(path, DEFAULT, manifest(members))


def test_a_safetensors_file_is_no_archive_and_the_refusal_says_what_it_is(tmp_path: Path) -> None:
    from tests.support.safetensors_corpus import entry, st_bytes

    path = tmp_path / "model.safetensors"
    path.write_bytes(st_bytes({"a": entry("U8", [1], 0, 1)}, b"\0"))
    with pytest.raises(UnsafeArchiveError, match="a safetensors file") as info:
        archives.scan(path, DEFAULT)
    assert info.value.rule == "format"
