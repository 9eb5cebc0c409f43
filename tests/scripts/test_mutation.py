"""The guard mutation campaign's list and runner (scripts/mutation): cheap checks, no campaign."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

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
            assert _names_a_test_that_exists(test), f"{g.id}: no test {test}"


def _names_a_test_that_exists(node: str) -> bool:
    """``path::name[...]`` names a function or class ``name`` of that file (a renamed test
    would make the campaign's baseline fail on a selection pytest cannot find)."""
    path, *rest = node.split("::")
    if not rest:
        return True
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    defined = {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    return rest[0].split("[")[0] in defined


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


def _mini_repository(root: Path) -> Path:
    """A repository of its own: a ``fixture_store`` package (the copy's, first on the path, as in
    the real campaign), a guard in it and the tests that hold it."""
    (root / "fixture_store").mkdir(parents=True)
    (root / "fixture_store" / "__init__.py").write_text("")
    (root / "fixture_store" / "pytest_plugin.py").write_text("")
    (root / "fixture_store" / "mod.py").write_text(
        "def positive(x: int) -> bool:\n    return x > 0\n\n\ndef double(x: int) -> int:\n"
        "    return 2 * x\n"
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text(
        "from fixture_store.mod import double, positive\n\n\n"
        "def test_positive():\n    assert positive(1) and not positive(0)\n\n\n"
        "def test_double_runs():\n    double(3)\n"
    )
    (root / "pkg").mkdir()
    (root / "pkg" / "none.py").write_text("nothing here\n")
    (root / "pkg" / "twice.py").write_text("x = 1\nx = 1\n")
    return root


@pytest.fixture(scope="module")
def worker(runner: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One worker for the module's tests, as in a campaign: each guard must leave it clean."""
    root = tmp_path_factory.mktemp("campaign")
    w = runner.Worker(_mini_repository(root / "template"), root / "worker")
    yield w
    w.close()


def test_a_worker_kills_a_guard_its_tests_hold_and_restores_the_file(
    runner: ModuleType, worker: Any
) -> None:
    module = worker.copy / "fixture_store" / "mod.py"
    before = module.read_bytes()
    held = runner.Guard(
        "held", "fixture_store/mod.py", "x > 0", "x >= 0", ("tests/test_mod.py",), "p"
    )
    unheld = runner.Guard(
        "unheld", "fixture_store/mod.py", "2 * x", "3 * x", ("tests/test_mod.py",), "p"
    )
    killed = runner.run_guard(held, worker, timeout=120)
    assert (killed.status, killed.detail) == ("killed", killed.detail)
    assert "test_positive" in killed.detail
    assert module.read_bytes() == before
    # The same worker, the next guard: the first break is gone, this one is not held.
    survived = runner.run_guard(unheld, worker, timeout=120)
    assert survived.status == "survived"
    assert module.read_bytes() == before


def test_a_guard_whose_tests_hang_is_killed_at_its_timeout(runner: ModuleType, worker: Any) -> None:
    hangs = runner.Guard(
        "hangs",
        "fixture_store/mod.py",
        "return x > 0",
        "import time; time.sleep(120); return x > 0",
        ("tests/test_mod.py",),
        "p",
    )
    outcome = runner.run_guard(hangs, worker, timeout=2)
    assert outcome.status == "killed"
    assert "timed out" in outcome.detail
    assert outcome.seconds < 60
    assert "sleep" not in (worker.copy / "fixture_store" / "mod.py").read_text()


@pytest.mark.parametrize(("file", "count"), [("pkg/none.py", 0), ("pkg/twice.py", 2)])
def test_a_snippet_not_found_exactly_once_is_an_error_naming_the_guard(
    runner: ModuleType, worker: Any, file: str, count: int
) -> None:
    before = (worker.copy / file).read_bytes()
    guard = runner.Guard("the-guard", file, "x = 1", "x = 2", ("t.py::t",), "p")
    outcome = runner.run_guard(guard, worker, timeout=60)
    assert (outcome.id, outcome.status) == ("the-guard", "error")
    assert f"found {count} times in {file}" in outcome.detail
    assert (worker.copy / file).read_bytes() == before
