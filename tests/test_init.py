"""The package facade (``fixture_store/__init__.py``): its names, loaded on first use."""

from __future__ import annotations

import importlib

import pytest

import fixture_store
from tests.support.imports import modules_loaded_by


@pytest.mark.parametrize("name", sorted(fixture_store.__all__))
def test_every_name_is_the_one_its_module_defines(name: str) -> None:
    value = getattr(fixture_store, name)
    home = fixture_store._LAZY.get(name)
    assert value is getattr(importlib.import_module(home), name) if home else value is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fixture_store.Nope  # noqa: B018 - the lookup is what is tested


def test_importing_the_package_loads_neither_the_registry_nor_the_store() -> None:
    loaded = modules_loaded_by("import fixture_store")
    ours = sorted(m for m in loaded if m.startswith("fixture_store."))
    assert ours == ["fixture_store._version", "fixture_store.display", "fixture_store.errors"]
