"""docs/cli.md is the CLI's own help, so the reference cannot drift from the commands."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fixture_store.cli.app import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_committed_page_is_the_generated_one(reference: ModuleType) -> None:
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == reference.render(), (
        "docs/cli.md is stale: run uv run python scripts/cli_reference.py"
    )


def test_every_command_has_its_section_with_its_usage(reference: ModuleType) -> None:
    page = reference.render()
    for name in COMMANDS:
        assert f"\n## {name}\n" in page
        assert f"Usage: fixture-store {name} [OPTIONS]" in page


def test_check_mode_fails_on_a_stale_page(
    reference: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "cli.md"
    page.write_text("# stale\n")
    monkeypatch.setattr(reference, "PAGE", page)
    assert reference.main_(["--check"]) == 1
    assert reference.main_([]) == 0
    assert reference.main_(["--check"]) == 0
