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


def _parse(line: str) -> None:
    """Parse an example as the CLI would, down to its (sub)command, running nothing; a path
    argument that must exist is the only error let through (examples name the user's files)."""
    import shlex

    import click

    from fixture_store.cli.app import load_command

    words = shlex.split(line)
    assert words[0] == "fixture-store", line
    name, args = words[1], words[2:]
    command = load_command(name)
    if isinstance(command, click.Group) and (args or not command.invoke_without_command):
        found = command.get_command(click.Context(command), args[0])
        assert found is not None, line
        command, name, args = found, args[0], args[1:]
    try:
        command.make_context(name, args)
    except click.BadParameter as e:
        if "does not exist" not in e.format_message():
            raise


def test_every_command_has_an_example_that_parses_against_its_options(
    reference: ModuleType,
) -> None:
    assert set(reference.EXAMPLES) == set(COMMANDS)
    for name, examples in reference.EXAMPLES.items():
        assert examples, name
        for line, what in examples:
            assert line.split()[1] == name.split()[0] and what, line
            _parse(line)
    page = reference.render()
    assert page.count("```console\n") == len(COMMANDS)


def test_an_example_with_an_option_the_command_lacks_is_caught() -> None:
    import click

    with pytest.raises(click.NoSuchOption):
        _parse("fixture-store verify --no-such-option")
