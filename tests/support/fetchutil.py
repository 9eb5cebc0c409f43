"""Helpers for source and fetch tests: a project with a registry written from raw records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.registry import Registry
from fixture_store.sources import OFFLINE_ENV_VARS


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_record(source: dict[str, Any], data: bytes, kind: str = "fixture") -> dict[str, Any]:
    return {"kind": kind, "source": source, "digest": sha(data), "size": len(data)}


def make_registry(root: Path, records: dict[str, dict[str, Any]]) -> Registry:
    """Write one provenance file per family and load the registry."""
    directory = root / "provenance"
    directory.mkdir(parents=True, exist_ok=True)
    families: dict[str, dict[str, Any]] = {}
    for name, raw in records.items():
        families.setdefault(name.split("/", 1)[0], {})[name] = raw
    for family, recs in families.items():
        doc = {"format_version": 1, "records": recs}
        (directory / f"{family}.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    return registry_mod.load(root)


@pytest.fixture(autouse=True)
def online_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that fetch decide offline mode themselves, whatever the caller's environment."""
    for var in OFFLINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
