"""``fixture-store tolerance set NAME RULE``: one rule changes, nothing else does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run


def _record(project: Path) -> dict[str, object]:
    doc = json.loads((project / "provenance" / "fam.json").read_text())
    record: dict[str, object] = doc["records"]["fam/a"]
    return record


@pytest.mark.usefixtures("store")
def test_one_rule_changes_and_every_other_field_is_kept(project: Path) -> None:
    (project / "a.bin").write_bytes(b"x" * 10)
    tolerance = '{"metric": "max_abs", "max": 0.001, "per_array": {"y": {"metric": "exact"}}}'
    code, _, err = run(
        "add",
        "a.bin",
        "--name",
        "fam/a",
        "--kind",
        "fixture",
        "--tolerance",
        tolerance,
        "--license",
        "MIT",
    )
    assert code == 0, err
    before = _record(project)
    code, out, err = run("tolerance", "set", "fam/a", "rms<=1e-4", "--why", "measured on cpu")
    assert code == 0, err
    assert '+    "metric": "rms"' in out
    after = _record(project)
    assert after["tolerance"] == {
        "metric": "rms",
        "max": 1e-4,
        "why": "measured on cpu",
        "per_array": {"y": {"metric": "exact"}},
    }
    assert {k: v for k, v in after.items() if k != "tolerance"} == {
        k: v for k, v in before.items() if k != "tolerance"
    }
    code, _, err = run(
        "tolerance", "set", "fam/a", '{"metric": "max_abs", "max": 0.5}', "--array", "z"
    )
    assert code == 0, err
    assert _record(project)["tolerance"]["per_array"]["z"] == {"metric": "max_abs", "max": 0.5}  # type: ignore[index]


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize(
    ("name", "rule", "message"),
    [
        ("fam/a", "bogus<=1", "unknown metric 'bogus'"),
        ("fam/a", "rms<1", "neither METRIC<=BOUND nor a JSON object"),
        ("fam/a", "[1]", "neither METRIC<=BOUND"),
        ("fam/zz", "rms<=1", "fam/zz is not a record"),
    ],
)
def test_a_bad_rule_or_name_writes_nothing_and_says_so_in_one_line(
    project: Path, name: str, rule: str, message: str
) -> None:
    (project / "a.bin").write_bytes(b"x" * 10)
    assert run("add", "a.bin", "--name", "fam/a", "--kind", "fixture")[0] == 0
    before = (project / "provenance" / "fam.json").read_text()
    code, _, err = run("tolerance", "set", name, rule)
    assert code == 2 and message in err and "Traceback" not in err
    assert (project / "provenance" / "fam.json").read_text() == before
