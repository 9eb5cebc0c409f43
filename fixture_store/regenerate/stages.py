"""Regeneration stages as declared in the project's ``params.yaml`` (section ``regenerate``).

Each stage names its generator script, the exact pins of its environment, the artifacts it
consumes (verified before the generator sees them) and its default tolerance. DVC tracks the same
section as the stage's params, so changing a pin makes exactly that stage stale.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fixture_store._extras import require
from fixture_store.errors import UsageError
from fixture_store.regenerate.envs import PinnedEnv
from fixture_store.registry import Tolerance, Where

PARAMS_FILE = "params.yaml"
SECTION = "regenerate"


@dataclass(frozen=True)
class Stage:
    name: str
    family: str
    generator: str
    env: PinnedEnv
    inputs: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    tolerance: Tolerance | None = None
    description: str = ""
    outputs: tuple[str, ...] = ()

    @property
    def families(self) -> tuple[str, ...]:
        """Families this stage writes: its own and any declared under ``outputs``."""
        return (self.family, *self.outputs)

    def script(self, root: Path) -> Path:
        return root / self.generator

    def params_json(self) -> dict[str, Any]:
        return {k: v for k, v in sorted(self.args.items())}


def load(root: Path) -> dict[str, Stage]:
    path = root / PARAMS_FILE
    if not path.is_file():
        raise UsageError(
            f"{path} does not exist; stages are declared in its '{SECTION}' section",
            fix=f"declare the stage under '{SECTION}' in {PARAMS_FILE} at the project root",
        )
    require("regenerate", for_what=f"reading the stages in {PARAMS_FILE}")
    import yaml  # only commands that read params.yaml pay for it

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise UsageError(f"{path} is not valid YAML: {e}") from e
    section = doc.get(SECTION) if isinstance(doc, dict) else None
    if not isinstance(section, dict):
        raise UsageError(f"{path} has no '{SECTION}' section of stages")
    return {name: _parse(name, spec, path) for name, spec in section.items()}


def _parse(name: str, spec: Any, path: Path) -> Stage:
    where = f"{path}: {SECTION}.{name}"
    if not isinstance(spec, dict):
        raise UsageError(f"{where} must be a mapping")
    for key in ("generator", "requirements"):
        if key not in spec:
            raise UsageError(f"{where} needs '{key}'")
    reqs = spec["requirements"]
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        raise UsageError(f"{where}.requirements must be a list of 'name==version' pins")
    python = str(spec.get("python") or ".".join(platform.python_version_tuple()[:2]))
    env = PinnedEnv(tuple(reqs), python, tuple(spec.get("without") or ()))
    return Stage(
        name=name,
        family=str(spec.get("family") or name),
        generator=str(spec["generator"]),
        env=env,
        inputs=tuple(spec.get("inputs") or ()),
        args=MappingProxyType(dict(spec.get("args") or {})),
        tolerance=(
            Tolerance.from_json(spec["tolerance"], Where(str(path)), f"{SECTION}.{name}.tolerance")
            if spec.get("tolerance")
            else None
        ),
        description=str(spec.get("description") or ""),
        outputs=tuple(spec.get("outputs") or ()),
    )


def get(root: Path, name: str) -> Stage:
    stages = load(root)
    if name not in stages:
        raise UsageError(
            f"no stage {name!r} in {root / PARAMS_FILE}",
            fix=f"one of: {', '.join(sorted(stages)) or '(none)'}",
        )
    return stages[name]
