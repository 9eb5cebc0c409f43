"""``list``, ``show``, ``status`` through the CLI (``fixture_store.cli.registry``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import add_file_and_case, run


@pytest.mark.usefixtures("store")
def test_list_show_status_and_help(project: Path) -> None:
    add_file_and_case(project)
    code, out, _ = run("list", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["fam/a", "fam/case"]
    code, out, _ = run("show", "fam/case")
    assert code == 0 and "members: 1 files" in out and "verified" in out
    code, out, _ = run("status", "--json")
    assert json.loads(out)["families"]["fam"]["present"] == 2
    for cmd in ("init", "add", "verify", "list", "show", "gc", "status"):
        code, out, _ = run(cmd, "--help")
        assert code == 0 and "Usage:" in out
