"""Glob patterns over array names (``per_array`` keys, expectation keys, lists of arrays)."""

from __future__ import annotations

import pytest

from fixture_store.registry.patterns import matches, selects


@pytest.mark.parametrize(
    ("name", "expected"),
    [("dx", True), ("!x", True), ("ax", False), ("bx", False), ("cx", False)],
)
def test_a_bang_bracket_selects_the_complement_of_its_set(name: str, expected: bool) -> None:
    """``[!abc]`` is one character that is none of a, b, c (as in a shell), not one of them."""
    assert matches("[!abc]x", name) is expected
    assert selects("[!abc]x", name) is expected


def test_a_bracket_without_a_bang_selects_its_set() -> None:
    assert matches("[abc]x", "bx") and not matches("[abc]x", "dx")
    assert matches("[a!]x", "!x")  # a bang that does not open the set is one of it
