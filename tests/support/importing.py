"""Running an import in-process: plan a manifest under a project folder, then register it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fixture_store import importers
from fixture_store import registry as registry_mod
from fixture_store.importers.entry import ManifestEntry, ManifestError
from fixture_store.importers.plan import LocalOrigin, Plan
from fixture_store.importers.register import Imported, register
from fixture_store.objects.store import Store


def plan(project: Path, manifest: Path, fmt: str | None = None, root: Path | None = None) -> Plan:
    origin = LocalOrigin(project, root or manifest.parent)
    return importers.plan_import(origin, str(manifest), fmt)


def run_import(
    store: Store,
    project: Path,
    manifest: Path,
    *,
    family: str = "imp",
    fmt: str | None = None,
    root: Path | None = None,
    gaps: bool = False,
    replace: bool = False,
) -> tuple[Plan, Imported]:
    origin = LocalOrigin(project, root or manifest.parent)
    planned = importers.plan_import(origin, str(manifest), fmt)
    registry = registry_mod.load(project)
    done = register(store, registry, planned, origin, family=family, gaps=gaps, replace=replace)
    return planned, done


def family_doc(project: Path, family: str = "imp") -> dict[str, Any]:
    path = project / "provenance" / f"{family}.json"
    doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return doc


def write(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def refusal(parse: Callable[[], tuple[ManifestEntry, ...]]) -> tuple[str, str]:
    """(where, message) of the one refusal of a manifest: raised, when a line cannot be read at
    all, or carried by the entry refused by itself (its neighbours stand; DESIGN 20)."""
    try:
        entries = parse()
    except ManifestError as e:
        return e.where, e.message
    (refused,) = [e for e in entries if e.refused is not None]
    return refused.where, f"{refused.where}: {refused.path!r}: {refused.refused}"


def registered(project: Path, family: str) -> dict[str, Any]:
    """The records of ``family`` in the project's registry file (none if it has no file)."""
    path = project / "provenance" / f"{family}.json"
    return json.loads(path.read_text())["records"] if path.exists() else {}
