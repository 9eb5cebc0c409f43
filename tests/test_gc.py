"""Garbage collection: a dry run by default, refused while a record is invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store import gc, ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store


def test_sweep_is_a_dry_run_unless_asked_to_delete(project: Path, store: Store) -> None:
    (project / "a.bin").write_bytes(b"kept")
    ingest.add(store, registry_mod.load(project), project / "a.bin", name="fam/a", kind="fixture")
    orphan = store.put_bytes(b"orphan")
    reg = registry_mod.load(project)
    dry = gc.sweep(store, reg, delete=False)
    assert [g.hex for g in dry.garbage] == [orphan.hex] and dry.size == 6 and dry.removed == 0
    assert store.has(orphan)
    done = gc.sweep(store, reg, delete=True)
    assert done.removed == 1 and not store.has(orphan)
    assert gc.sweep(store, reg, delete=True).garbage == []


def test_sweep_refuses_to_delete_while_a_record_is_invalid(project: Path, store: Store) -> None:
    (project / "provenance" / "fam.json").write_text(
        '{"format_version": 1, "records": {"fam/x": {"kind": "fixture"}}}'
    )
    orphan = store.put_bytes(b"orphan")
    reg = registry_mod.load(project)
    assert dict(reg.invalid())
    assert gc.sweep(store, reg, delete=False).garbage  # a dry run still lists
    with pytest.raises(UsageError, match="refusing to delete"):
        gc.sweep(store, reg, delete=True)
    assert store.has(orphan)
