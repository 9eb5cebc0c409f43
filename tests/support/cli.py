"""Running the CLI in-process, and a project with one file and one folder registered."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fixture_store.cli import main


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def add_file_and_case(project: Path) -> None:
    """``fam/a`` (a fixture file) and ``fam/case`` (an onnx-case folder), added through the CLI."""
    (project / "data").mkdir()
    (project / "data" / "a.bin").write_bytes(b"alpha" * 100)
    (project / "data" / "case").mkdir()
    (project / "data" / "case" / "model.onnx").write_bytes(b"m")
    assert run("add", "data/a.bin", "--name", "fam/a", "--kind", "fixture")[0] == 0
    assert run("add", "data/case", "--name", "fam/case", "--kind", "onnx-case")[0] == 0
