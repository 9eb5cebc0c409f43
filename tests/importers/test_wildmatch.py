"""git's wildmatch, case by case, each case checked against git itself (a ``.gitattributes``
line anchored at the top, so the pattern is matched as a path with git's ``WM_PATHNAME``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store.importers.wildmatch import wildmatch
from tests.support import gitoracle

CASES = [
    ("cat[[:space:]]1.png", "cat 1.png", True),  # git lfs track "cat 1.png"
    ("[[:digit:]][[:alpha:]]", "1a", True),
    ("a[!x]b", "a/b", False),  # no bracket matches a slash
    ("a[!x]b", "azb", True),  # [!x]: one character that is not x
    ("a[!x]b", "axb", False),
    ("a[^x]b", "azb", True),
    ("a/*.bin", "a/b/c.bin", False),  # one star stays in its folder
    ("a/**/c.bin", "a/c.bin", True),  # /**/ is zero or more folders
    ("a/**/c.bin", "a/b/d/c.bin", True),
    ("*a**/c.bin", "xab/d/c.bin", False),  # ** not between slashes is *
    ("data/**", "data/x/y", True),
    ("**/x.bin", "x.bin", True),
    ("a?c", "a/c", False),
    ("[]a]x", "]x", True),
    ("[a-]x", "-x", True),
    ("\\*x", "*x", True),
    ("\\*x", "ax", False),
    ("[[:bogus:]]", "b", False),  # an unknown class matches nothing
    ("[ab", "[ab", False),  # an unclosed bracket matches nothing
]


@pytest.mark.parametrize(("pattern", "path", "expected"), CASES)
def test_wildmatch_matches_as_git_does(
    tmp_path: Path, pattern: str, path: str, expected: bool
) -> None:
    gitoracle.init(tmp_path)
    (tmp_path / ".gitattributes").write_text(f"/{pattern} filter=lfs\n")
    assert (path in gitoracle.tracked(tmp_path, [path])) is expected
    assert wildmatch(pattern.encode(), path.encode()) is expected
