"""The one name grammar: accepted names parse and print themselves, and are escaped for each
place they go; near misses are refused, each for the rule it breaks."""

from __future__ import annotations

import html
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_store.objects import names
from tests.support.names import ACCEPTED, FLAWS, MISSES, near_miss, nfd, reason


@settings(max_examples=100)
@given(ACCEPTED)
def test_an_accepted_name_parses_and_prints_itself(name: str) -> None:
    parsed = names.parse(name)
    assert str(parsed) == name and names.parse(str(parsed)) == parsed
    assert names.parse(nfd(name)) == name  # another spelling reads as its NFC form


@settings(max_examples=100)
@given(ACCEPTED)
def test_an_accepted_name_is_escaped_for_each_place(name: str) -> None:
    assert shlex.split(f"fixture-store fetch {names.shell(name)}") == [
        "fixture-store",
        "fetch",
        name,
    ]
    shown = names.html(name)
    assert not set("<>\"'") & set(shown) and html.unescape(shown) == name
    pointer = names.pointer(name)
    assert "/" not in pointer
    assert pointer.replace("~1", "/").replace("~0", "~") == name  # RFC 6901, in that order


@settings(max_examples=100)
@given(MISSES)
def test_a_near_miss_is_refused_for_the_rule_it_breaks(miss: tuple[str, str]) -> None:
    name, rule = miss
    assert rule in reason(name)


@pytest.mark.parametrize(
    "name",
    ["pkg/__init__.py", ".gitattributes", "a b/(c).ogg", "@scope/x~1+2", "données/çà.npy"],
)
def test_names_real_projects_ship_are_accepted(name: str) -> None:
    assert names.parse(name) == name


@pytest.mark.parametrize("flaw", sorted(FLAWS))
def test_every_rule_has_its_own_reason(flaw: str) -> None:
    assert FLAWS[flaw] in reason(near_miss("a", flaw))


@pytest.mark.parametrize("raw", ["", None, 3])
def test_nothing_that_is_no_text_or_empty_is_a_name(raw: object) -> None:
    with pytest.raises(names.NameRefusedError):
        names.parse(raw)


def test_a_path_over_4096_bytes_is_refused() -> None:
    assert "a filesystem allows 4096" in reason("/".join(["s" * 200] * 21))


@given(st.lists(ACCEPTED, max_size=6).map(lambda b: [*b, *(n.upper() for n in b)]))
def test_each_later_spelling_of_one_name_collides_with_the_first(batch: list[str]) -> None:
    found = names.collisions(batch)
    assert len(found) == len(batch) - len({names.key(n) for n in batch})
    assert all(names.key(first) == names.key(other) for first, other in found)


def test_case_and_normalisation_collide() -> None:
    assert names.collisions(["A", "a", "\u00e9", "e\u0301", "b"]) == [
        ("A", "a"),
        ("\u00e9", "e\u0301"),
    ]
