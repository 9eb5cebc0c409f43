from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.registry import Registry

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def no_user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The remotes of the machine's user never reach a test (fetch tries configured remotes)"""
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(tmp_path / "user-config.toml"))
    # nor its verify snapshots (platformdirs' user state folder)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "user-state"))


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
