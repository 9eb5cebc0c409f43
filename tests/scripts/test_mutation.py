"""The guard mutation campaign's list and runner (scripts/mutation): cheap checks, no campaign."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_run", ROOT / "scripts" / "mutation" / "run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_every_guard_names_a_snippet_found_exactly_once(runner: ModuleType) -> None:
    """A refactor that moves a guard fails here first: re-target the guard's snippet."""
    guards = runner.load_guards()
    assert len(guards) >= 30
    stale = {
        g.id: (ROOT / g.file).read_text(encoding="utf-8").count(g.original)
        for g in guards
        if not (ROOT / g.file).is_file()
        or (ROOT / g.file).read_text(encoding="utf-8").count(g.original) != 1
    }
    assert stale == {}, f"guards whose snippet is missing or ambiguous (id: count): {stale}"
    for g in guards:
        for test in g.tests:
            assert (ROOT / test.split("::")[0]).is_file(), f"{g.id}: no test file {test}"


def test_a_bad_guard_list_is_refused(runner: ModuleType, tmp_path: Path) -> None:
    entry = (
        '[[guard]]\nid = "a"\nfile = "f.py"\noriginal = "x"\nreplacement = "y"\n'
        'tests = ["t.py::t"]\npromise = "p"\n'
    )
    path = tmp_path / "guards.toml"
    path.write_text(entry * 2)
    with pytest.raises(runner.GuardListError, match="the id 'a' is used twice"):
        runner.load_guards(path)
    path.write_text(entry.replace('replacement = "y"', 'replacement = "x"'))
    with pytest.raises(runner.GuardListError, match="must change"):
        runner.load_guards(path)
    path.write_text(entry.replace('tests = ["t.py::t"]', 'tests = "t.py::t"'))
    with pytest.raises(runner.GuardListError, match="'tests' must be a non-empty list"):
        runner.load_guards(path)


@pytest.mark.parametrize(("text", "count"), [("nothing here\n", 0), ("x = 1\nx = 1\n", 2)])
def test_a_snippet_not_found_exactly_once_is_an_error_naming_the_guard(
    runner: ModuleType, tmp_path: Path, text: str, count: int
) -> None:
    template = tmp_path / "template"
    (template / "pkg").mkdir(parents=True)
    (template / "pkg" / "mod.py").write_text(text)
    guard = runner.Guard("the-guard", "pkg/mod.py", "x = 1", "x = 2", ("t.py::t",), "p")
    work = tmp_path / "work"
    work.mkdir()
    outcome = runner.run_guard(guard, template, work, timeout=60)
    assert (outcome.id, outcome.status) == ("the-guard", "error")
    assert f"found {count} times in pkg/mod.py" in outcome.detail
    assert (template / "pkg" / "mod.py").read_text() == text  # only the copy is ever edited
