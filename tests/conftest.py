from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry

pytest_plugins = ["pytester"]

# The suite starts hundreds of interpreters (CLI runs, crash trials, generators, the mutation
# campaign's children); where PYTHONDONTWRITEBYTECODE is set, each of them would compile this
# package and its tests from source again. Bytecode goes to __pycache__/, which git ignores.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fixture-store suite")
    group.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (long by nature: crash and concurrency campaigns, "
        "fuzzing, whole pipelines); CI runs them with `uv run pytest -m slow`",
    )
    group.addoption(
        "--smoke",
        action="store_true",
        help="the inner loop: only the first test of every test module (tests mirror the "
        "package, so every module of every layer runs once), slow ones left out",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    """A machine without the differential tests' reference tools says so once, at the top, with
    the command that installs them (those tests skip, or fail under ``CI=true``, saying so); and
    which tests this run leaves out, with the option that brings them in."""
    from tests.support import reference

    missing = reference.missing_tools()
    lines = [reference.missing_message(missing)] if missing else []
    if config.getoption("--smoke"):
        lines.append(
            "smoke run: the first test of every test module (the full suite: uv run pytest)"
        )
    elif _slow_left_out(config):
        lines.append(
            "tests marked slow are left out: `uv run pytest -m slow` runs them (CI does), "
            "`--slow` runs everything"
        )
    return lines


def _slow_left_out(config: pytest.Config) -> bool:
    """Slow tests run when asked for: ``--slow``, a ``-m`` expression of the user's (which then
    decides alone), or ``--smoke`` (which leaves them out in its own way)."""
    return not (config.getoption("--slow") or config.option.markexpr)


def _named(config: pytest.Config) -> set[str]:
    """Node ids the command line names one by one (``path::test``): always run."""
    return {arg.replace(os.sep, "/") for arg in config.args if "::" in arg}


def _smoke_picks(items: list[pytest.Item]) -> set[str]:
    """One test per test module: the one it marks ``smoke``, else its first that is not slow."""
    picks: dict[str, str] = {}
    marked: dict[str, str] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        if item.get_closest_marker("slow") is not None:
            continue
        picks.setdefault(module, item.nodeid)
        if item.get_closest_marker("smoke") is not None:
            marked.setdefault(module, item.nodeid)
    return set((picks | marked).values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    smoke = config.getoption("--smoke")
    if not smoke and not _slow_left_out(config):
        return
    named = _named(config)
    picks = _smoke_picks(items) if smoke else set()
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        is_named = any(item.nodeid == n or item.nodeid.startswith(n + "[") for n in named)
        wanted = item.nodeid in picks if smoke else item.get_closest_marker("slow") is None
        (keep if is_named or wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (the default in pyproject) is one worker per core, except for a run of named
    test files or tests only (``path.py``, ``path.py::test``): that runs in this process, with no
    workers to start for a few tests."""
    named = [arg.split("::")[0] for arg in config.args]
    if named and all(arg.endswith(".py") for arg in named):
        return 0
    return None


@pytest.fixture
def campaign_summary(record_property: Callable[[str, object], None]) -> Iterator[list[str]]:
    """Lines a long campaign reports (trials run, kills by phase): printed once, in a section of
    the run's summary, never into the progress output (xdist carries them to the controller as
    user properties)."""
    lines: list[str] = []
    yield lines
    for line in lines:
        record_property("campaign", line)


_campaign_lines: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":
        _campaign_lines.extend(
            f"{report.nodeid}: {value}"
            for key, value in report.user_properties
            if key == "campaign"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _campaign_lines:
        terminalreporter.section("campaigns")
        for line in _campaign_lines:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def no_user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the machine's user reaches a test, nor does a test write there: its remotes
    (fetch tries configured remotes), its verify snapshots (platformdirs' user state folder) and
    its default store (a test that forgets the ``store`` fixture writes a store of its own)."""
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(tmp_path / "user-config.toml"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "user-state"))
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "default-store"))


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's consoles are made once per process and take their width from the terminal or
    ``COLUMNS`` then, so a table cell could fold a long path in one process (an xdist worker)
    and not in another: every in-process run gets the same wide consoles, and names stay whole."""
    from fixture_store.cli import _common

    for console in (_common.out, _common.err):
        monkeypatch.setattr(console, "width", 1000)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    root = tmp_path / "store"
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(root))
    return Store.at(root).ensure()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "provenance").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    return root


def load(project: Path) -> Registry:
    return registry_mod.load(project)
