"""The package facade (``fixture_store/__init__.py``): its names, loaded on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fixture_store


@pytest.mark.parametrize("name", sorted(fixture_store.__all__))
def test_every_name_is_the_one_its_module_defines(name: str) -> None:
    value = getattr(fixture_store, name)
    home = fixture_store._LAZY.get(name)
    assert value is getattr(importlib.import_module(home), name) if home else value is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fixture_store.Nope  # noqa: B018 - the lookup is what is tested


def test_importing_the_package_loads_neither_the_registry_nor_the_store() -> None:
    code = (
        "import sys, fixture_store; "
        "print(sorted(m for m in sys.modules if m.startswith('fixture_store.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert loaded.strip() == "['fixture_store._version', 'fixture_store.errors']"
