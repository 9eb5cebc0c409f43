"""The generator kit (fixture_store/regenerate/kit): stdlib only, alone in its folder, and
usable where fixture-store is not installed, as in a stage's pinned environment."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from fixture_store.regenerate import envs, protocol

sys.path.insert(0, str(protocol.kit_folder()))

import fixture_store_generator as kit

KIT_FILE = protocol.kit_folder() / f"{protocol.KIT_MODULE}.py"

# A generator using the kit and nothing else: it must run in a bare environment.
BARE = textwrap.dedent("""
    import sys
    import fixture_store_generator as kit

    parser = kit.parser(None, family="bare")
    args = kit.checked(parser, upstream=(), stage="bare")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "x.bin").write_bytes(b"x")
    kit.write_outputs(args.out, [{"name": "bare/x.bin", "kind": "fixture", "path": "x.bin"}])
    kit.write_environment(args.out, {"stage": "bare"})
    try:
        import fixture_store
    except ImportError:
        sys.stderr.write("no fixture_store here\\n")
""")


def test_the_kit_imports_the_standard_library_only() -> None:
    tree = ast.parse(KIT_FILE.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported


def test_the_kit_folder_puts_nothing_else_on_a_generators_path() -> None:
    entries = {p.name for p in protocol.kit_folder().iterdir() if p.name != "__pycache__"}
    assert entries == {KIT_FILE.name}


def test_the_kit_speaks_the_runners_protocol(tmp_path: Path) -> None:
    assert kit.PROTOCOL == protocol.PROTOCOL == 1
    assert protocol.schema(protocol.OUTPUTS_FILE)["properties"]["protocol"]["const"] == 1
    assert kit.EXIT_WRONG_ENVIRONMENT == 3
    assert (kit.OUTPUTS_FILE, kit.ENVIRONMENT_FILE) == (
        protocol.OUTPUTS_FILE,
        protocol.ENVIRONMENT_FILE,
    )
    (tmp_path / "x").write_bytes(b"x")
    kit.write_outputs(tmp_path, [{"name": "f/x", "kind": "fixture", "path": "x"}])
    kit.write_environment(tmp_path, {"stage": "s"})
    assert protocol.load(tmp_path, protocol.OUTPUTS_FILE, stage="s")["protocol"] == 1
    env = protocol.load(tmp_path, protocol.ENVIRONMENT_FILE, stage="s")
    lines = "\n".join(f"{k}=={v}" for k, v in env["packages"].items()).encode()
    assert env["packages_digest"] == "sha256:" + hashlib.sha256(lines).hexdigest()


def test_read_inputs_maps_names_to_paths(tmp_path: Path) -> None:
    doc = [{"name": "fam/a", "path": "/data/a", "digest": "sha256:" + "b" * 64, "size": 3}]
    jsonschema.Draft202012Validator(protocol.schema(protocol.INPUTS_FILE)).validate(doc)
    (tmp_path / "inputs.json").write_text(json.dumps(doc))
    assert kit.read_inputs(tmp_path / "inputs.json") == {"fam/a": Path("/data/a")}
    assert kit.read_inputs(None) == {}


def test_require_refuses_a_wrong_pin_with_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        kit.require(["pytest==0.0.1"], stage="s")
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert "pytest==0.0.1 is pinned but" in err and "fix: fixture-store regenerate s" in err
    with pytest.raises(SystemExit) as e:
        kit.absent(["pytest"], stage="s")
    assert e.value.code == 3


@pytest.mark.slow
def test_the_kit_works_in_a_bare_venv_without_fixture_store(tmp_path: Path) -> None:
    """What the runner gives a generator: a fresh venv with no packages at all, and the kit's
    folder as PYTHONPATH."""
    venv = tmp_path / "venv"
    subprocess.run(
        [envs.uv_binary(), "venv", "--quiet", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    script = tmp_path / "bare.py"
    script.write_text(BARE)
    out = tmp_path / "out"
    python = venv / "bin" / "python"
    run_env = {"PYTHONPATH": str(protocol.kit_folder()), "PATH": os.environ.get("PATH", "")}
    proc = subprocess.run(
        [str(python), str(script), "--out", str(out)],
        env=run_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no fixture_store here" in proc.stderr
    assert protocol.load(out, protocol.OUTPUTS_FILE, stage="bare")["outputs"][0]["name"] == (
        "bare/x.bin"
    )
    env = protocol.load(out, protocol.ENVIRONMENT_FILE, stage="bare")
    assert "fixture-store" not in env["packages"] and env["stage"] == "bare"
    refused = subprocess.run(
        [str(python), str(script), "--out", str(out), "--require", "numpy==2.4.6"],
        env=run_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 3
    assert "numpy==2.4.6 is pinned but nothing is installed" in refused.stderr
