"""Known failures excuse only what they name: bounded mismatches, globs with a case count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.registry import files
from fixture_store.registry.known_failures import (
    KnownFailure,
    check_counts,
    parse,
    suggest_bound,
)

PROJECT = Path(__file__).resolve().parents[2]
BASE = {"runtime": "ort", "pattern": "fam/x", "reason": "why"}


def write(project: Path, entries: list[dict[str, Any]]) -> Path:
    doc = {"format_version": 1, "records": {}, "known_failures": entries}
    path = project / "provenance" / "fam.json"
    path.write_text(json.dumps(doc))
    return path


def schema_accepts(entry: dict[str, Any]) -> bool:
    doc = {"format_version": 1, "records": {}, "known_failures": [entry]}
    return bool(jsonschema.Draft202012Validator(files.schema()).is_valid(doc))


@pytest.mark.parametrize(
    ("seen", "bound"),
    [
        (0.0, 0.0),
        (0.00034332275390625, 0.00069),
        (8.392586460104212e-05, 0.00017),
        (1.0480842590332031, 2.1),
        (0.27272730031289405, 0.55),
        (8.0, 16.0),
        (10.211958885192871, 21.0),
        (0.000345, 0.00069),  # 2x is exactly 6.9e-4: not rounded up past it
    ],
)
def test_a_suggested_bound_is_twice_the_error_rounded_up_to_two_digits(
    seen: float, bound: float
) -> None:
    assert suggest_bound(seen) == bound


GOOD = [
    {**BASE, "outcome": "not-implemented"},
    {**BASE, "pattern": "fam/x*", "expect": 3, "outcome": "error"},
    {**BASE, "expect": 1, "outcome": "error"},
    {**BASE, "outcome": "mismatch", "max_abs": 0},
    {**BASE, "outcome": "mismatch", "max_abs": 0.00069, "max_rel": 0.55},
    {**BASE, "outcome": "mismatch", "max_abs": 4.8e-07, "special_values": 84},
]


@pytest.mark.parametrize("entry", GOOD)
def test_valid_entries_load_round_trip_unchanged_and_pass_the_schema(
    project: Path, entry: dict[str, Any]
) -> None:
    path = write(project, [entry])
    reg = registry_mod.load(project)
    (kf,) = reg.known_failures()
    assert kf.to_json() == entry
    files.write_family(reg, "fam", [])
    assert json.loads(path.read_text())["known_failures"] == [entry]  # 0 stays 0, not 0.0
    assert schema_accepts(entry)


BAD = [
    ({**BASE, "pattern": "fam/x*", "outcome": "error"}, "expect", "needs 'expect'"),
    ({**BASE, "pattern": "fam/[xy]", "outcome": "error"}, "expect", "needs 'expect'"),
    ({**BASE, "expect": 2, "outcome": "error"}, "expect", "an exact name"),
    ({**BASE, "pattern": "fam/*", "expect": 0}, "expect", "1 or more"),
    ({**BASE, "pattern": "fam/*", "expect": True}, "expect", "whole number"),
    ({**BASE, "pattern": "fam/*", "expect": "3"}, "expect", "whole number"),
    ({**BASE, "outcome": "mismatch"}, "max_abs", "needs 'max_abs'"),
    ({**BASE, "outcome": "mismatch", "max_rel": 0.1}, "max_abs", "needs 'max_abs'"),
    ({**BASE, "outcome": "error", "max_abs": 1}, "max_abs", "apply to a mismatch"),
    ({**BASE, "max_rel": 1}, "max_rel", "apply to a mismatch"),
    ({**BASE, "outcome": "mismatch", "max_abs": -1}, "max_abs", "0 or more"),
    ({**BASE, "outcome": "mismatch", "max_abs": "1e-3"}, "max_abs", "a number"),
    ({**BASE, "outcome": "mismatch", "max_abs": True}, "max_abs", "a number"),
    ({**BASE, "outcome": "mismatch", "max_abs": 0, "special_values": -1}, "special_values", "0 or"),
    (
        {**BASE, "outcome": "mismatch", "max_abs": 0, "special_values": 1.5},
        "special_values",
        "whole",
    ),
    ({**BASE, "outcome": "error", "special_values": 3}, "special_values", "apply to a mismatch"),
]


@pytest.mark.parametrize(("entry", "key", "message"), BAD)
def test_an_entry_that_excuses_more_than_it_names_fails_the_file_and_the_schema(
    project: Path, entry: dict[str, Any], key: str, message: str
) -> None:
    write(project, [BASE | {"outcome": "error"}, entry])
    with pytest.raises(RegistryError, match=message) as e:
        registry_mod.load(project)
    assert e.value.field == f"known_failures[1].{key}"
    assert not schema_accepts(entry)


def test_an_unbounded_mismatch_says_how_to_measure_its_bound(project: Path) -> None:
    write(project, [{**BASE, "outcome": "mismatch"}])
    with pytest.raises(RegistryError) as e:
        registry_mod.load(project)
    assert e.value.fix is not None and '"max_abs": 0' in e.value.fix


def test_an_infinite_bound_is_refused() -> None:
    with pytest.raises(RegistryError, match="finite"):
        parse({**BASE, "outcome": "mismatch", "max_abs": float("inf")}, file="f", index=0)


NAMES = ["fam/a", "fam/ab", "fam/abc", "fam/b"]


def test_counts_that_agree_pass() -> None:
    check_counts(
        [
            KnownFailure("ort", "fam/a*", "r", expect=3),
            KnownFailure("*", "fam/b", "r"),
            KnownFailure("ort", "fam/?", "r", expect=2),
        ],
        NAMES,
    )


def test_a_glob_that_matches_another_count_names_the_entry_and_the_cases(project: Path) -> None:
    write(
        project,
        [
            {**BASE, "pattern": "fam/a", "outcome": "error"},
            {**BASE, "pattern": "fam/a*", "expect": 2, "outcome": "error"},
            {**BASE, "pattern": "fam/gone", "outcome": "error"},
        ],
    )
    known = list(registry_mod.load(project).known_failures())
    with pytest.raises(RegistryError) as e:
        check_counts(known, NAMES)
    message = str(e.value)
    assert "known_failures[1]: 'fam/a*' (ort) expects 2 case(s) and matches 3: " in message
    assert "fam/a, fam/ab, fam/abc" in message
    assert "known_failures[2]: 'fam/gone' (ort) expects 1 case(s) and matches 0: none" in message
    assert "known_failures[0]" not in message
    assert str(project / "provenance" / "fam.json") in message
    assert e.value.fix is not None and "expect" in e.value.fix


def test_the_projects_entries_match_the_cases_they_expect() -> None:
    """The stale-entry check that needs no data: each pattern against the committed registry."""
    registry = registry_mod.load(PROJECT)
    check_counts(registry.known_failures(), registry.names())


def test_the_projects_mismatch_entries_are_all_bounded() -> None:
    known = list(registry_mod.load(PROJECT).known_failures())
    mismatches = [k for k in known if k.outcome == "mismatch"]
    assert mismatches and all(k.max_abs is not None for k in mismatches)
