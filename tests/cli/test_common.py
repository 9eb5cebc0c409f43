"""The parts every command shares: exit codes, outcome colours, failure lines, error handling."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.text import Text

from fixture_store.cli import _common
from fixture_store.cli._common import (
    Failure,
    exit_code,
    handle_errors,
    line,
    report_failures,
    styled,
)
from fixture_store.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from fixture_store.fetch import Outcome as FetchOutcome
from fixture_store.parity.results import Outcome as CaseOutcome
from fixture_store.regenerate import Verdict
from fixture_store.verify import Status
from tests.support.cli import add_file_and_case, run


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        ([], EXIT_OK),
        ([Status.VERIFIED, Status.GAP], EXIT_OK),
        ([Status.VERIFIED, Status.MISSING], EXIT_FAILED),
        ([Status.MISMATCH, Status.INVALID_RECORD], EXIT_USAGE),
        ([Status.UNKNOWN], EXIT_USAGE),
    ],
)
def test_exit_code_of_verify_results(outcomes: list[Status], code: int) -> None:
    assert exit_code(outcomes) == code


def test_exit_code_with_other_ok_outcomes() -> None:
    ok = (FetchOutcome.PRESENT, FetchOutcome.FETCHED, FetchOutcome.GAP)
    assert exit_code([FetchOutcome.PRESENT, FetchOutcome.FETCHED], ok=ok) == EXIT_OK
    assert exit_code([FetchOutcome.FAILED], ok=ok) == EXIT_FAILED
    assert exit_code([FetchOutcome.INVALID_RECORD, FetchOutcome.FAILED], ok=ok) == EXIT_USAGE


@pytest.mark.parametrize("enum", [Status, FetchOutcome, CaseOutcome, Verdict])
def test_one_style_table_colours_every_outcome_word(enum: type[StrEnum]) -> None:
    missing = [str(o) for o in enum if str(o) not in _common.STYLE]
    assert missing == []
    first = enum(next(iter(enum)))
    assert styled(first).style == _common.STYLE[str(first)]


def test_styled_keeps_the_outcome_colour_for_other_text() -> None:
    assert styled(Status.MISMATCH) == Text("mismatch", style="bold red")
    assert styled(CaseOutcome.PASS, "known failure now passes") == (
        Text("known failure now passes", style="green")
    )


def test_no_console_parses_markup_in_what_it_prints() -> None:
    """Brackets in a name or message print as they are: the consoles never parse markup, so
    colour can only come from Text (``styled``, ``line``)."""
    assert not _common.out._markup and not _common.err._markup
    text = line(("fam/[bold]x[/x]", "bold"), " [red]", styled(Status.MISMATCH, "[/]"))
    assert text.plain == "fam/[bold]x[/x] [red][/]"


def test_report_failures_prints_the_first_then_how_many_more(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report_failures(
        [Failure("missing", f"fam/f{i}", "no object", fix="fetch") for i in range(3)], limit=2
    )
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "missing: fam/f0: no object",
        "  fix: fetch",
        "missing: fam/f1: no object",
        "  fix: fetch",
        "… and 1 more failures (use --json for all)",
    ]


def test_handle_errors_prints_message_and_fix_and_exits_with_the_errors_code() -> None:
    @click.command()
    @handle_errors
    def boom() -> None:
        raise UsageError("bad [input]", fix="do [this]")

    result = CliRunner().invoke(boom, [])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == "error: bad [input]\n  fix: do [this]\n"


@pytest.mark.usefixtures("store", "project")
@pytest.mark.parametrize("verb", ["fetch", "push", "pull"])
def test_a_selection_of_nothing_or_all_and_names_is_a_usage_error(verb: str) -> None:
    code, _, err = run(verb)
    assert code == EXIT_USAGE
    assert f"say what to {verb}: NAMES, --family FAMILY or --all" in err
    assert f"fix: fixture-store {verb} --all" in err
    code, _, err = run(verb, "--all", "fam/a")
    assert code == EXIT_USAGE and "--all cannot be combined with NAMES or --family" in err


def test_leave_exits_with_the_code_the_heap_frozen_and_the_output_flushed() -> None:
    code = (
        "import atexit, gc, sys; from fixture_store.cli._common import leave, out; "
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0)); "
        "out.print('[table]', end=''); sys.stderr.write('no newline'); leave(3)"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stdout == "[table]frozen True\n" and done.stderr == "no newline"


@pytest.mark.usefixtures("store")
def test_json_is_indented_at_a_terminal_and_one_line_in_a_pipe(project: Path) -> None:
    """``--json`` reads well where a person reads it and writes fast where a program does: the
    same document, indented on a terminal, on one line through a pipe (as ``gh`` prints it)."""
    add_file_and_case(project)
    argv = [sys.executable, "-m", "fixture_store", "verify", "--json"]
    assert run("verify")[0] == 0  # both runs below are then served alike, from the snapshot
    piped = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
    main, replica = pty.openpty()
    with subprocess.Popen(argv, cwd=project, stdout=replica, stderr=subprocess.DEVNULL) as child:
        os.close(replica)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal closed with the child
                break
            if not chunk:
                break
            chunks.append(chunk)
    os.close(main)
    at_a_terminal = b"".join(chunks).decode().replace("\r\n", "\n")
    assert piped.returncode == child.returncode == 0
    assert json.loads(piped.stdout) == json.loads(at_a_terminal)
    assert piped.stdout.count("\n") == 1
    assert at_a_terminal.count("\n") > 10 and '\n  "results": [' in at_a_terminal


@pytest.mark.usefixtures("store")
def test_tables_through_a_pipe_are_as_wide_as_their_rows_and_never_split_a_name(
    project: Path,
) -> None:
    """Not at a terminal (``fixture-store list | cat``, a CI log), a table is printed at its full
    width: a long name stays on one line, whatever 80 columns would have made of it."""
    long_name = "fam/" + "a-rather-long-fixture-name-" * 4 + "end"
    (project / "long.bin").write_bytes(b"x" * 10)
    assert run("add", "long.bin", "--name", long_name, "--kind", "fixture")[0] == 0
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    piped = subprocess.run(
        [sys.executable, "-m", "fixture_store", "list"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    (row,) = [ln for ln in piped.stdout.splitlines() if long_name in ln]
    assert len(row) > 120


@pytest.mark.usefixtures("store")
def test_a_store_flag_that_is_a_file_or_missing_is_named_as_the_problem(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    code, _, err = run("--store", str(tmp_path / "a-file"), "list")
    assert code == EXIT_USAGE and "--store" in err and "not a folder" in err and "fix:" in err
    code, _, err = run("--store", str(tmp_path / "nowhere"), "verify")
    assert code == EXIT_USAGE and "no such folder" in err
    assert f"fixture-store --store {tmp_path / 'nowhere'} init" in err.replace("\n  ", " ")


def test_a_mistyped_command_gets_the_closest_names() -> None:
    code, _, err = run("verfy")
    assert code == EXIT_USAGE and "Did you mean 'verify'?" in err
    code, _, err = run("remote-gc-everything")
    assert code == EXIT_USAGE and "No such command" in err
