"""``.gitattributes`` resolved as git resolves them, with git as the oracle: random attribute
files (wildcards, anchors, folder patterns, nested files, ``.git/info/attributes``,
set/unset/unspecified lines, macros, quoting) over random trees, and every file's ``filter``
state compared with ``git check-attr``, for the repository and for each folder imported alone."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store.importers import gitattributes, gitlfs
from tests.support import gitoracle

NAMES = ["a", "b", "ab", "a1", "x.bin", "y.txt", "data", "m.safetensors", "t b.bin", "[x].bin"]
TOKENS = [
    "*", "**", "?", "[a-z]", "[!a]", "[^x]", "[[:digit:]]", "[[:space:]]", "[[:alpha:]]",
    "a", "b", "x", "data", ".bin", "/", "\\*", "\\[", "[]ab]", "[a-]", " ", "1",
]  # fmt: skip
STATES = [
    "filter=lfs", "filter=lfs", "filter=lfs", "lfs", "-filter", "-filter", "!filter", "filter",
    "filter=other", "diff=lfs", "-text", "lfs", "-lfs", "binary", "-filter=lfs", "bad@name",
]  # fmt: skip
REAL = [
    "*.bin", "*.safetensors", "**/*.bin", "data/**", "saved_model/**/*", "*tfevents*", "/x.bin",
    "a/*.bin", "a/**/x.bin", "data", "data/", "a/", "**/data/**", "*.bin/", "t[[:space:]]b.bin",
    "[[]x].bin", "\\[x].bin", "b/**", "**", "*", "a**", "a**/x.bin", "**/a1",
]  # fmt: skip
INFO = ".git/info/attributes"  # the key of that file among the folders' texts
LFS_MACRO = "[attr]lfs filter=lfs diff=lfs merge=lfs -text"


def _render(state: gitattributes.State) -> str:
    """A state as ``git check-attr`` prints it."""
    if state is True:
        return "set"
    if state is False:
        return "unset"
    return "unspecified" if state is None else state.decode()


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        body = draw(st.sampled_from(REAL))
    else:
        body = "".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5)))
    lead = draw(st.sampled_from(["", "", "", "", "", "/", "/", "/", "!"]))
    trail = draw(st.sampled_from(["", "", "", "", "", "", "", "/"]))
    pattern = lead + body + trail
    if " " in pattern or draw(st.integers(0, 9)) == 0:
        escaped = pattern.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return pattern


@st.composite
def _attributes_file(draw: st.DrawFn, *, top: bool) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(LFS_MACRO if top else "[attr]lfs -filter")  # git ignores the nested one
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 20))
        if kind == 0:
            lines.append("# a comment filter=lfs")
        elif kind == 1:
            lines.append("")
        else:
            states = draw(st.lists(st.sampled_from(STATES), min_size=1, max_size=3))
            lines.append(" ".join([draw(_pattern()), *states]))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(lines) + end


@st.composite
def _tree(draw: st.DrawFn) -> tuple[list[str], dict[str, str]]:
    """Files (no path both a file and a folder) and ``.gitattributes`` texts by folder."""
    paths = draw(
        st.lists(
            st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
            min_size=1,
            max_size=12,
            unique=True,
        )
    )
    folders = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    prefixes = {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)}
    files = sorted(p for p in paths if p not in prefixes)
    chosen = draw(st.lists(st.sampled_from(sorted(folders)), unique=True)) if folders else []
    texts = {folder: draw(_attributes_file(top=False)) for folder in chosen}
    texts[""] = draw(_attributes_file(top=True))
    if draw(st.integers(0, 3)) == 0:
        texts[INFO] = draw(_attributes_file(top=True))
    return files, texts


def _write(repo: Path, files: list[str], texts: dict[str, str]) -> None:
    gitoracle.init(repo)
    for rel in files:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(b"bytes\n")
    for folder, text in texts.items():
        path = (
            repo / ".git" / "info" / "attributes"
            if folder == INFO
            else repo / folder / ".gitattributes"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_tree())
def test_every_file_s_filter_is_what_git_check_attr_says(
    tree: tuple[list[str], dict[str, str]],
) -> None:
    files, texts = tree
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        _write(repo, files, texts)
        expected = gitoracle.check_attr(repo, files)
        attributes = gitattributes.read(repo, repo)
        ours = {rel: _render(attributes.value(os.fsencode(rel), b"filter")) for rel in files}
        assert ours == expected, texts
        tracked = gitlfs.lfs_tracked(repo)
        git_tracked = gitoracle.tracked(repo, files)
        assert {rel for rel in files if tracked(rel)} == git_tracked, texts
        for folder in {rel.split("/")[0] for rel in files if "/" in rel}:
            # importing a folder of the repository: the attributes above it apply too
            inside = gitlfs.lfs_tracked(repo / folder)
            under = [rel for rel in files if rel.startswith(f"{folder}/")]
            ours_under = {rel for rel in under if inside(rel[len(folder) + 1 :])}
            assert ours_under == git_tracked & set(under), texts


@pytest.mark.parametrize(
    ("line", "path", "expected"),
    [
        # git compares the pattern's literal start first and wildmatches the rest on its own,
        # where a ** that now starts the pattern spans folders
        ("a**/c.bin filter=lfs", "ab/d/c.bin", "lfs"),
        ("*.bin filter=lfs -filter", "x.bin", "unset"),  # the last state of a line wins
        ('"a\\040b" filter=lfs', "a b", "lfs"),  # octal in a quoted pattern
        ("x.bin filter=lfs bad@name", "x.bin", "unspecified"),  # an invalid name drops the line
        ("[attr]f filter=lfs\n*.bin f -f", "x.bin", "unspecified"),  # an unset macro sets nothing
    ],
)
@pytest.mark.smoke
def test_git_s_own_readings(tmp_path: Path, line: str, path: str, expected: str) -> None:
    gitoracle.init(tmp_path)
    (tmp_path / ".gitattributes").write_text(line + "\n")
    assert gitoracle.check_attr(tmp_path, [path]) == {path: expected}
    attributes = gitattributes.read(tmp_path, tmp_path)
    assert _render(attributes.value(path.encode(), b"filter")) == expected
