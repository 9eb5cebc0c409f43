"""What a generator declares it produced: ``outputs.json`` (each output's name, kind, path,
parents and descriptive fields, checked as its record will have them) and ``details.json``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixture_store import bounded_json
from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects import trees
from fixture_store.regenerate import protocol
from fixture_store.registry import Annotations, Kind, Where, parse_kind

# What a generator may add to its report beyond the comparisons (JSON, carried verbatim).
DETAILS_FILE = "details.json"


@dataclass(frozen=True)
class Output:
    """One artifact a generator produced, as it declares it in ``outputs.json``."""

    name: str
    kind: Kind
    path: Path
    parents: tuple[str, ...] = ()
    # What the generator says about the artifact (tolerance, arrays, metadata, ...).
    annotations: Annotations = field(default_factory=Annotations)


def read_details(out: Path) -> dict[str, Any]:
    """What the generator wrote to ``details.json`` (nothing when it wrote none)."""
    path = out / DETAILS_FILE
    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as f:
            doc = bounded_json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"generator wrote an unreadable {path}: {e}") from e
    if not isinstance(doc, dict):
        raise UsageError(f"generator wrote {path} holding no JSON object")
    return doc


def read_outputs(out: Path, *, stage: str) -> list[Output]:
    """The outputs the generator declares in ``outputs.json``, checked against the protocol's
    schema, then each name, path and descriptive field as its record will have it."""
    path = out / protocol.OUTPUTS_FILE
    rows = protocol.load(out, protocol.OUTPUTS_FILE, stage=stage)["outputs"]
    outs = []
    for i, row in enumerate(rows):
        try:
            outs.append(_output(out, path, row))
        except RegistryError as e:
            field = f"outputs[{i}].{e.field}" if e.field else f"outputs[{i}]"
            raise protocol.ProtocolError(e.reason, stage=stage, file=path, field=field) from e
        except UsageError as e:
            field = f"outputs[{i}]"
            raise protocol.ProtocolError(e.message, stage=stage, file=path, field=field) from e
    return sorted(outs, key=lambda o: o.name)


def _output(out: Path, path: Path, row: Mapping[str, Any]) -> Output:
    where = Where(str(path), row["name"])
    try:
        registry_mod.check_name(row["name"])
        rel = trees.check_member_path(row["path"])
    except UsageError as e:
        raise where.fail("path" if isinstance(e, trees.TreePathError) else "name", e.message) from e
    p = out / rel
    if not p.exists():
        raise where.fail("path", f"the generator declared {rel!r} but wrote nothing there")
    given = {
        k: v
        for k, v in row.items()
        if k not in ("name", "kind", "path", "parents") and v is not None
    }
    return Output(
        row["name"],
        parse_kind(row["kind"], where),
        p,
        tuple(row.get("parents") or ()),
        Annotations.from_json(given, where),
    )
