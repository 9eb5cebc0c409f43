"""Generator protocol 1: the runner refuses files that break their schema, naming the stage, the
file and the field, and the example generator of docs/generators.md runs as documented."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from fixture_store.cli import main
from fixture_store.objects.store import Store
from fixture_store.regenerate import Verdict, protocol, regenerate
from tests.support.regen_project import PYTHON, numpy_pin

DOCS = Path(__file__).resolve().parents[2] / "docs" / "generators.md"

GOOD_ENVIRONMENT = {
    "python": "3.11.9",
    "implementation": "CPython",
    "platform": "Linux",
    "machine": "x86_64",
    "packages": {"numpy": "2.4.6"},
    "packages_digest": "sha256:" + "0" * 64,
}
GOOD_OUTPUT = {"name": "raw/blob.bin", "kind": "fixture", "path": "blob.bin"}

# A generator that writes whatever documents the test gives it (as JSON text, verbatim).
RAW = textwrap.dedent('''
    """Writes the documents it is given as outputs.json and environment.json, verbatim."""
    import argparse, sys
    from pathlib import Path

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--require", action="append", default=[])
    parser.add_argument("--without", action="append", default=[])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "blob.bin").write_bytes(b"blob")
    here = Path(__file__).parent
    for name in ("outputs.json", "environment.json"):
        if (here / name).exists():
            (args.out / name).write_bytes((here / name).read_bytes())
''')


def raw_project(root: Path, *, outputs: str | None, environment: str | None) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "provenance").mkdir()
    (root / "models" / "raw.py").write_text(RAW)
    for name, text in (("outputs.json", outputs), ("environment.json", environment)):
        if text is not None:
            (root / "models" / name).write_text(text)
    params = {"regenerate": {"raw": {"generator": "models/raw.py", "requirements": []}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


def refusal(
    tmp_path: Path, *, outputs: Any = None, environment: Any = GOOD_ENVIRONMENT, text: str = ""
) -> protocol.ProtocolError:
    """The error the runner raises for these documents (``text``: outputs.json verbatim)."""
    outputs_text = text or (json.dumps(outputs) if outputs is not None else None)
    root = raw_project(
        tmp_path / "p",
        outputs=outputs_text,
        environment=json.dumps(environment) if environment is not None else None,
    )
    store = Store.at(tmp_path / "store").ensure()
    with pytest.raises(protocol.ProtocolError) as e:
        regenerate(root, store, "raw", scratch=tmp_path / "s", accept=True, python=PYTHON)
    assert not (root / "provenance" / "raw.json").exists()  # nothing was accepted
    assert list(store.iter_objects()) == []
    return e.value


@pytest.mark.parametrize(
    ("outputs", "field", "says"),
    [
        ({"outputs": [{**GOOD_OUTPUT, "kind": "vidoe"}]}, "outputs[0].kind", "'vidoe' is not one"),
        ({"outputs": [{"name": "raw/blob.bin", "kind": "fixture"}]}, "outputs[0].path", "'path'"),
        ({"outputs": [{**GOOD_OUTPUT, "tolerence": {}}]}, "outputs[0].tolerence", "Additional"),
        ({"outputs": [{**GOOD_OUTPUT, "parents": "raw/x"}]}, "outputs[0].parents", "not of type"),
        ({"protocol": 2, "outputs": [GOOD_OUTPUT]}, "protocol", "1 was expected"),
        ({"output": [GOOD_OUTPUT]}, "outputs", "'outputs' is a required property"),
        ({"outputs": [{**GOOD_OUTPUT, "name": "Raw/../x"}]}, "outputs[0].name", "invalid artifact"),
        ({"outputs": [{**GOOD_OUTPUT, "path": "../blob.bin"}]}, "outputs[0].path", "'..'"),
        ({"outputs": [{**GOOD_OUTPUT, "path": "nothere.bin"}]}, "outputs[0].path", "wrote nothing"),
        (
            {"outputs": [{**GOOD_OUTPUT, "tolerance": {"metric": "close"}}]},
            "outputs[0].tolerance",
            "",
        ),
    ],
)
def test_runner_refuses_outputs_that_break_the_protocol_naming_the_field(
    tmp_path: Path, outputs: Any, field: str, says: str
) -> None:
    error = refusal(tmp_path, outputs=outputs)
    assert error.stage == "raw" and error.file.name == "outputs.json"
    assert error.field is not None and error.field.startswith(field)
    assert says in error.reason
    assert f"stage 'raw': {error.file}: field {error.field}: " in str(error)
    assert "fixture_store/regenerate/schemas/outputs.json" in (error.fix or "")


@pytest.mark.parametrize(
    ("environment", "field"),
    [
        ({k: v for k, v in GOOD_ENVIRONMENT.items() if k != "packages"}, "packages"),
        ({**GOOD_ENVIRONMENT, "packages_digest": "md5:00"}, "packages_digest"),
        ({**GOOD_ENVIRONMENT, "packages": {"numpy": 2}}, "packages.numpy"),
        (["not", "an", "object"], None),
    ],
)
def test_runner_refuses_an_environment_that_breaks_the_protocol(
    tmp_path: Path, environment: Any, field: str | None
) -> None:
    error = refusal(tmp_path, outputs={"outputs": [GOOD_OUTPUT]}, environment=environment)
    assert error.file.name == "environment.json" and error.field == field


def test_missing_and_malformed_files_are_refused_by_name(tmp_path: Path) -> None:
    missing = refusal(tmp_path / "a", outputs={"outputs": [GOOD_OUTPUT]}, environment=None)
    assert missing.file.name == "environment.json" and "no readable" in missing.reason
    bad = refusal(tmp_path / "b", text='{"outputs": [')
    assert bad.file.name == "outputs.json" and "not JSON" in bad.reason
    twice = refusal(tmp_path / "c", text='{"outputs": [], "outputs": []}')
    assert "duplicate key 'outputs'" in twice.reason


def test_cli_reports_a_protocol_error_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    root = raw_project(
        tmp_path / "p",
        outputs=json.dumps({"outputs": [{**GOOD_OUTPUT, "kind": "vidoe"}]}),
        environment=json.dumps(GOOD_ENVIRONMENT),
    )
    result = CliRunner().invoke(
        main,
        [
            *("--store", str(tmp_path / "store"), "--registry", str(root)),
            *("regenerate", "raw", "--python", PYTHON, "--scratch", str(tmp_path / "s")),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "stage 'raw'" in result.output and "field outputs[0].kind" in result.output
    assert "Traceback" not in result.output


def test_a_well_formed_file_passes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "outputs.json").write_text(json.dumps({"protocol": 1, "outputs": [GOOD_OUTPUT]}))
    assert protocol.load(out, protocol.OUTPUTS_FILE, stage="s")["outputs"] == [GOOD_OUTPUT]


def test_the_inputs_file_the_runner_writes_follows_its_schema(tmp_path: Path) -> None:
    root = raw_project(
        tmp_path / "p",
        outputs=json.dumps({"outputs": [GOOD_OUTPUT]}),
        environment=json.dumps(GOOD_ENVIRONMENT),
    )
    (root / "in.bin").write_bytes(b"input")
    store = tmp_path / "store"
    added = CliRunner().invoke(
        main,
        [
            *("--store", str(store), "--registry", str(root)),
            *("add", str(root / "in.bin"), "--name", "src/in.bin", "--kind", "fixture"),
        ],
    )
    assert added.exit_code == 0, added.output
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["regenerate"]["raw"]["inputs"] = ["src/*"]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    regenerate(root, Store.at(store), "raw", scratch=tmp_path / "s", python=PYTHON)
    written = json.loads((tmp_path / "s" / protocol.INPUTS_FILE).read_text())
    jsonschema.Draft202012Validator(protocol.schema(protocol.INPUTS_FILE)).validate(written)
    assert [(i["name"], i["size"]) for i in written] == [("src/in.bin", 5)]
    assert Path(written[0]["path"]).read_bytes() == b"input"  # the verified object itself


def test_field_paths_read_like_the_documents() -> None:
    assert protocol.field_path(["outputs", 0, "kind"]) == "outputs[0].kind"
    assert protocol.field_path(["packages", "numpy"]) == "packages.numpy"
    assert protocol.field_path([]) == ""


def example(name: str) -> str:
    """The fenced block that follows ``<!-- example: NAME -->`` in docs/generators.md."""
    page = DOCS.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```\w+\n(.*?)```\n", page, re.S)
    assert found, f"docs/generators.md has no example {name}"
    return found.group(1)


def test_the_documented_example_generator_runs_as_documented(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "models").mkdir(parents=True)
    (root / "provenance").mkdir()
    (root / "models" / "ramp.py").write_text(example("models/ramp.py"))
    params = example("params.yaml").replace("numpy==2.4.6", numpy_pin())  # this interpreter's
    (root / "params.yaml").write_text(params)
    store = Store.at(tmp_path / "store").ensure()

    first = regenerate(root, store, "ramp", scratch=tmp_path / "s1", accept=True, python=PYTHON)
    assert [(c.name, c.verdict) for c in first.comparisons] == [("ramp/ramp.npy", Verdict.NEW)]
    record = json.loads((root / "provenance" / "ramp.json").read_text())["records"]
    ramp = record["ramp/ramp.npy"]
    assert ramp["metadata"] == {"seed": 0, "scale": 2.0}
    assert ramp["arrays"] == {"float32[16]": ["ramp"]}
    assert ramp["source"]["environment"]["stage"] == "ramp"
    again = regenerate(root, store, "ramp", scratch=tmp_path / "s2", python=PYTHON)
    assert [c.verdict for c in again.comparisons] == [Verdict.IDENTICAL]


def test_the_example_exits_3_outside_its_pins(tmp_path: Path) -> None:
    script = tmp_path / "ramp.py"
    script.write_text(example("models/ramp.py"))
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "o"), "--require", "numpy==0.0.1"],
        env={"PYTHONPATH": str(protocol.kit_folder())},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "numpy==0.0.1 is pinned but" in proc.stderr and "  fix: " in proc.stderr
    assert not (tmp_path / "o").exists()
