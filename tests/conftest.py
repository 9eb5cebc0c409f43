from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry

pytest_plugins = ["pytester"]


def pytest_report_header() -> list[str]:
    """A machine without the differential tests' reference tools says so once, at the top, with
    the command that installs them (those tests skip, or fail under ``CI=true``, saying so)."""
    from tests.support import reference

    missing = reference.missing_tools()
    return [reference.missing_message(missing)] if missing else []


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
