"""Pausing the cyclic collector (``fixture_store.objects.gcpause``): what the paused work made
leaves it in the oldest generation, not in the youngest for the next collections to walk."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.gcpause import cyclic_gc_paused
from tests.support.records import local_record


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.unfreeze()  # a command run in this process before froze its heap as it left (cli.leave)
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def _generation(obj: object) -> int | None:
    for generation in range(3):
        if any(o is obj for o in gc.get_objects(generation=generation)):
            return generation
    return None


def test_what_a_load_makes_is_in_the_oldest_generation(project: Path) -> None:
    records = [local_record(f"fam/case_{i}", i) for i in range(20)]
    registry_mod.write_family(registry_mod.load(project), "fam", records)
    parsed = registry_mod.load(project, cached=False)  # every record parsed while loading
    record = parsed.get("fam/case_7")
    assert gc.is_tracked(record) and _generation(record) == 2
    registry_mod.load(project)  # the cache remembers the file
    every = list(registry_mod.load(project).records())  # built in one pass, paused
    assert every == list(parsed.records()) and _generation(every[7]) == 2
    assert gc.isenabled()


def test_a_frozen_generation_of_the_process_is_left_alone() -> None:
    made: list[object] = []
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with cyclic_gc_paused():
            made.append(object.__new__(type("Made", (), {})))
        assert gc.get_freeze_count() == frozen  # not thawed
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_a_nested_pause_leaves_the_promotion_to_the_outer_one() -> None:
    with cyclic_gc_paused():
        with cyclic_gc_paused():
            inner: list[object] = [object.__new__(type("Inner", (), {}))]
        assert not gc.isenabled()
        assert _generation(inner) == 0
    assert gc.isenabled() and _generation(inner) == 2
