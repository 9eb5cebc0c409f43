from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixture_store.objects import digests, names, trees
from fixture_store.objects.trees import Tree, TreePathError

D = digests.of_bytes(b"x")


@pytest.mark.parametrize(
    "path",
    [
        "/abs",
        "../up",
        "a/../b",
        "a/./b",
        "./a",
        "a//b",
        "a/",
        "",
        "a\\b",
        "C:x",
        "c:/x",
        "a/\x00",
        "a/b\n",
        "a/\u202e",
        "..",
    ],
)
def test_unsafe_member_paths_are_refused(path: str) -> None:
    with pytest.raises(TreePathError):
        trees.check_member_path(path)


def test_a_path_that_is_both_file_and_folder_is_refused() -> None:
    with pytest.raises(TreePathError, match="both a file and a folder"):
        Tree({"a": D, "a/b": D})


def test_manifest_digest_is_independent_of_insertion_order() -> None:
    t1 = Tree({"b": D, "a/c.pb": D})
    t2 = Tree({"a/c.pb": D, "b": D})
    assert t1.canonical_bytes() == t2.canonical_bytes()
    assert t1.digest == t2.digest
    assert trees.parse_manifest(t1.canonical_bytes()) == t1


def test_hash_folder_refuses_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(TreePathError, match="symbolic link"):
        trees.hash_folder(tmp_path)


def test_hash_folder_lists_every_regular_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "in.pb").write_bytes(b"1")
    (tmp_path / "model.onnx").write_bytes(b"2")
    tree, files = trees.hash_folder(tmp_path)
    assert sorted(tree.members) == ["d/in.pb", "model.onnx"]
    assert tree.members["d/in.pb"] == digests.of_bytes(b"1")
    assert files["model.onnx"] == tmp_path / "model.onnx"


@pytest.mark.parametrize(
    "members",
    [
        ["a", "a/b/c"],
        ["x/a", "x/a/b/c/d.pb"],
        ["model.onnx", "model.onnx/deep/er/file"],
    ],
)
def test_a_file_that_is_a_folder_at_any_depth_is_refused(members: list[str]) -> None:
    with pytest.raises(TreePathError, match="both a file and a folder"):
        Tree(dict.fromkeys(members, D))


def test_a_sibling_that_only_shares_a_prefix_is_not_a_clash() -> None:
    assert len(Tree({"a": D, "ab/c": D, "a.pb": D, "b/a/c": D})) == 4


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("a" * 255, True),
        ("a" * 256, False),
        ("d/" + "b" * 256 + "/c", False),
        ("/".join(["s" * 200] * 20), True),
        ("/".join(["s" * 200] * 21), False),
    ],
)
def test_segments_over_255_bytes_and_paths_over_4096_are_refused(path: str, ok: bool) -> None:
    assert len(path) <= 4096 or not ok
    if ok:
        assert trees.check_member_path(path) == path
    else:
        with pytest.raises(TreePathError, match="a filesystem allows"):
            trees.check_member_path(path)


_PATH_CHARS = "ab.Z09_-+=,@~/\\: \x00é\u0301"


@given(st.text(alphabet=_PATH_CHARS, max_size=12) | st.sampled_from(["a" * 256, "a/" * 130 + "b"]))
def test_the_one_match_fast_path_accepts_exactly_what_the_rules_accept(path: str) -> None:
    """Name.parse answers common paths with one regular expression; it must accept the very
    paths the rule-by-rule check accepts, as the same name, and refuse the rest."""

    def rules(p: str) -> str | None:
        try:
            return names._checked(p)
        except names.NameRefusedError:
            return None

    def fast(p: str) -> str | None:
        try:
            return str(names.parse(p))
        except names.NameRefusedError:
            return None

    assert fast(path) == rules(path)


def test_members_that_collide_under_case_or_normalisation_are_refused() -> None:
    with pytest.raises(TreePathError, match="differ only in case"):
        Tree({"Model.onnx": D, "model.onnx": D})
    with pytest.raises(TreePathError, match="differ only in case"):
        Tree({"caf\u00e9": D, "cafe\u0301": D})


def test_a_member_is_kept_in_nfc() -> None:
    assert list(Tree({"cafe\u0301/x": D}).members) == ["caf\u00e9/x"]
