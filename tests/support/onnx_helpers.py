"""Real ONNX backend cases from the installed onnx distribution, registered in a temp project."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store

NODE_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"

CASES = (
    "test_abs",
    "test_add",
    "test_cast_FLOAT_to_BFLOAT16",
    "test_sequence_insert_at_back",
    "test_optional_get_element_sequence",
    "test_equal_string",
)


def register_case(
    project: Path,
    store: Store,
    case: str,
    *,
    name: str | None = None,
    source_dir: Path | None = None,
) -> str:
    """Copy a case into the project and register it as an onnx-case tree."""
    target = project / "cases" / (name or case).rsplit("/", 1)[-1]
    if not target.exists():
        shutil.copytree(source_dir or NODE_DATA / case, target)
    full = name or f"onnx-node/{case}"
    ingest.add(store, registry_mod.load(project), target, name=full, kind="onnx-case")
    return full


def make_project(project: Path, store: Store, cases: tuple[str, ...] = CASES) -> Fixtures:
    for case in cases:
        register_case(project, store, case)
    return Fixtures(store, registry_mod.load(project))


def tamper(store: Store, fixtures: Fixtures, name: str, member: str) -> Path:
    """Overwrite one member's object in the store (as disk damage or an edit would)."""
    record = fixtures.registry.get(name)
    assert record.members is not None
    path = store.object_path(record.members.members[member])
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    return path
