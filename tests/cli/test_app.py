"""The root group: one table says where every command is; nothing is imported before it runs."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from fixture_store.cli import app
from tests.support.cli import run
from tests.support.imports import modules_loaded_by


@pytest.mark.parametrize("name", sorted(app.COMMANDS))
def test_every_command_of_the_table_loads_under_its_name(name: str) -> None:
    command = app.load_command(name)
    assert isinstance(command, click.Command) and command.name == name
    code, out, _ = run(name, "--help")
    assert code == 0 and f"Usage: main {name} " in out


def test_help_lists_every_command_once() -> None:
    code, out, _ = run("--help")
    listed = [line.split()[0] for line in out.split("Commands:", 1)[1].splitlines() if line]
    assert code == 0 and listed == sorted(app.COMMANDS)


def test_importing_the_cli_loads_no_command_module_and_no_console() -> None:
    loaded = modules_loaded_by("import fixture_store.cli")
    watched = (
        m for m in loaded if m.startswith("fixture_store.cli.") or m in ("rich.console", "numpy")
    )
    assert sorted(watched) == ["fixture_store.cli.app"]


@pytest.mark.parametrize("module", ["fixture_store", "fixture_store.cli"])
def test_python_dash_m_runs_the_same_group(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert f"Usage: python -m {module} [OPTIONS] COMMAND" in done.stdout


def _commands() -> list[tuple[str, click.Command]]:
    """Every command and subcommand, by its full name."""
    found: list[tuple[str, click.Command]] = []

    def walk(name: str, command: click.Command) -> None:
        found.append((name, command))
        if isinstance(command, click.Group):
            for sub, c in sorted(command.commands.items()):
                walk(f"{name} {sub}", c)

    for name in sorted(app.COMMANDS):
        walk(name, app.load_command(name))
    return found


def test_each_command_summary_is_its_whole_first_line() -> None:
    """``fixture-store --help`` lists each command with click's short help, which cuts a first
    sentence longer than 45 characters mid-sentence: every command opens its help with a short
    line of its own, a whole sentence."""
    for name, command in _commands():
        first = (command.help or "").split("\n", 1)[0]
        summary = command.get_short_help_str(limit=45)
        assert summary == first and first.endswith(".") and len(first) <= 45, (name, summary)
    code, listing, _ = run("--help")
    assert code == 0 and "..." not in listing.split("Commands:", 1)[1]
