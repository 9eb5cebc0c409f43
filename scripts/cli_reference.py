"""Write docs/cli.md, the CLI reference, from the click commands themselves.

    uv run python scripts/cli_reference.py           # rewrite docs/cli.md
    uv run python scripts/cli_reference.py --check   # exit 1 if docs/cli.md is not what it writes

Every command in the CLI's lazy table (fixture_store/cli/app.py) gets its own section with the
help text click prints for ``--help``, at a fixed width, so the page says exactly what the
commands say and ``tests/scripts/test_cli_reference.py`` fails when the two drift apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

from fixture_store.cli.app import COMMANDS, load_command, main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = 100

INTRO = """\
# CLI reference

This page is generated from the commands themselves by `scripts/cli_reference.py`; do not edit it
by hand (`uv run python scripts/cli_reference.py` rewrites it, and a test fails when it is stale).

Global options come before the command: `fixture-store [--store DIR] [--registry DIR] COMMAND ...`.
Every command has `--help` (or `-h`). Exit codes: `0` everything asked for verified, `1` something
failed verification, `2` a usage or registry error. Tables go to stdout, errors to stderr, and
`--json` (where a command has it) gives machine output.
"""


def _help(command: click.Command, name: str, parent: click.Context | None) -> str:
    ctx = command.make_context(
        name,
        [],
        parent=parent,
        resilient_parsing=True,  # no required argument or option is checked
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    return command.get_help(ctx).rstrip()


def render() -> str:
    """The whole page, as it should be committed."""
    root = main.make_context(
        "fixture-store", [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH
    )
    parts = [INTRO, "## fixture-store\n", f"```text\n{main.get_help(root).rstrip()}\n```\n"]
    for name in sorted(COMMANDS):
        parts.append(f"## {name}\n")
        parts.append(f"```text\n{_help(load_command(name), name, root)}\n```\n")
    return "\n".join(parts)


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="Only check that the page is current.")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != text:
            sys.stderr.write(
                f"{PAGE.name} is stale\n  fix: uv run python scripts/cli_reference.py\n"
            )
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
