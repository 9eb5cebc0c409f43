"""No data lost under concurrency (DESIGN decisions 4 and 10).

Registry writes re-read under the registry lock, so concurrent adds keep each other's records
and the same name with other bytes is refused; gc waits for writers between their first temp
file and their record. First writers paused at the worst moment (in-process, deterministic),
then the trials with real processes: a few rounds in every run, 50 when slow tests run
(``bench/trials.py`` runs more and prints the table).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fixture_store import gc, ingest, rehash
from fixture_store import registry as registry_mod
from fixture_store.errors import StoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.verify import verify_names
from tests.support import trials


class Background(threading.Thread):
    """A thread that keeps what its function returned or raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:
            self.error = e

    def finish(self) -> Any:
        self.join(30)
        assert not self.is_alive(), "did not finish"
        if self.error is not None:
            raise self.error
        return self.result


class Pause:
    """Stops the first call of a method (in the thread that makes it) right after it returned,
    until released: the writer is then between two of its steps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.thread: threading.Thread | None = None
        real = getattr(owner, method)

        def paused(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            if threading.current_thread() is self.thread and not self.reached.is_set():
                self.reached.set()
                assert self.release.wait(30)
            return out

        monkeypatch.setattr(owner, method, paused)

    def start(self, fn: Callable[[], Any]) -> Background:
        writer = Background(fn)
        self.thread = writer
        writer.start()
        assert self.reached.wait(30), "the writer never reached the pause"
        return writer


def _add(project: Path, store: Store, path: Path, name: str, **kw: Any) -> Callable[[], Any]:
    return lambda: ingest.add(
        store, registry_mod.load(project), path, name=name, kind="fixture", **kw
    )


@pytest.fixture
def files(project: Path) -> Path:
    data = project / "data"
    data.mkdir()
    for name in ("a", "b"):
        (data / f"{name}.bin").write_bytes(name.encode() * 5000)
    return data


# -- registry transactions ----------------------------------------------------------------------
def test_an_add_reads_the_family_again_so_a_concurrent_add_survives(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = Pause(monkeypatch, Store, "write_files")
    first = pause.start(_add(project, store, files / "a.bin", "fam/a"))  # registry read, paused
    _add(project, store, files / "b.bin", "fam/b")()
    pause.release.set()
    first.finish()
    assert sorted(registry_mod.load(project).families["fam"].records) == ["fam/a", "fam/b"]


def test_an_add_of_a_name_taken_meanwhile_by_other_bytes_is_refused(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = Pause(monkeypatch, Store, "write_files")
    first = pause.start(_add(project, store, files / "a.bin", "fam/x"))
    winner = _add(project, store, files / "b.bin", "fam/x")()
    pause.release.set()
    with pytest.raises(UsageError, match="fam/x is already registered") as info:
        first.finish()
    assert info.value.fix is not None and "--replace" in info.value.fix
    assert registry_mod.load(project).get("fam/x").digest == winner.digest


def test_an_add_of_a_name_taken_meanwhile_by_the_same_bytes_succeeds(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = Pause(monkeypatch, Store, "write_files")
    first = pause.start(_add(project, store, files / "a.bin", "fam/x"))
    _add(project, store, files / "a.bin", "fam/x")()
    pause.release.set()
    assert first.finish().digest == digests.of_file(files / "a.bin")
    assert list(registry_mod.load(project).families["fam"].records) == ["fam/x"]


def test_rehash_keeps_a_record_another_writer_added_meanwhile(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add(project, store, files / "a.bin", "fam/a")()
    registry = registry_mod.load(project)
    bare = [dataclasses.replace(r, blake3=None) for r in registry.records()]
    registry_mod.write_family(registry, "fam", bare)  # a record written without BLAKE3

    def verify_then_add(*args: Any, **kwargs: Any) -> Any:
        results = verify_names(*args, **kwargs)
        _add(project, store, files / "b.bin", "fam/b")()  # lands between verify and write
        return results

    monkeypatch.setattr("fixture_store.rehash.verify_names", verify_then_add)
    report = rehash.record_blake3(store, registry_mod.load(project), ["fam/a"])
    assert report.updated == ("fam/a",)
    after = registry_mod.load(project)
    assert sorted(after.families["fam"].records) == ["fam/a", "fam/b"]
    assert after.get("fam/a").blake3 is not None


def test_regenerate_accept_refuses_when_a_record_changed_since_it_was_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.regenerate import accepting, regenerate
    from tests.support.regen_project import PYTHON, make_project, set_scale

    project = make_project(tmp_path / "proj")
    store = Store.at(tmp_path / "store").ensure()
    regenerate(project, store, "toy", scratch=tmp_path / "s0", accept=True, python=PYTHON)
    set_scale(project, 2.0)
    real_put = accepting._put

    def put_then_edit(store: Store, o: Any, *rest: Any) -> Any:
        digest = real_put(store, o, *rest)
        now = registry_mod.load(project)  # a reviewer edits the record meanwhile
        case = dataclasses.replace(now.get("toy/case"), description="reviewed")
        others = [r for r in now.families["toy"].records.values() if r.name != case.name]
        registry_mod.write_family(now, "toy", [*others, case])
        return digest

    monkeypatch.setattr(accepting, "_put", put_then_edit)
    before = registry_mod.load(project)
    with pytest.raises(UsageError, match=r"toy/case changed in provenance/toy\.json"):
        regenerate(project, store, "toy", scratch=tmp_path / "s1", accept=True, python=PYTHON)
    after = registry_mod.load(project).get("toy/case")
    assert after.description == "reviewed"  # the edit stands, nothing was accepted over it
    assert after.digest == before.get("toy/case").digest


def test_rehash_leaves_a_record_rewritten_meanwhile_as_it_now_is(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add(project, store, files / "a.bin", "fam/a")()
    registry = registry_mod.load(project)
    bare = [dataclasses.replace(r, blake3=None) for r in registry.records()]
    registry_mod.write_family(registry, "fam", bare)

    def verify_then_replace(*args: Any, **kwargs: Any) -> Any:
        results = verify_names(*args, **kwargs)
        _add(project, store, files / "b.bin", "fam/a", replace=True)()  # other bytes now
        return results

    monkeypatch.setattr("fixture_store.rehash.verify_names", verify_then_replace)
    report = rehash.record_blake3(store, registry_mod.load(project), ["fam/a"])
    assert report.updated == ()
    assert registry_mod.load(project).get("fam/a").digest == digests.of_file(files / "b.bin")


# -- gc and writers -----------------------------------------------------------------------------
def test_gc_waits_for_an_add_between_its_object_and_its_record(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = Pause(monkeypatch, Store, "write_files")
    writer = pause.start(_add(project, store, files / "a.bin", "fam/a"))  # object in, no record
    collector = Background(lambda: gc.sweep(store, registry_mod.load(project), delete=True))
    collector.start()
    collector.join(0.5)
    waited = collector.is_alive()
    pause.release.set()
    record = writer.finish()
    swept = collector.finish()
    assert store.has(record.digest), "gc collected the object of an add in flight"
    assert waited and swept.removed == 0
    assert list(store.tmp_dir.iterdir()) == []


def test_gc_keeps_the_temp_link_of_a_live_add_link(
    project: Path, store: Store, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = files / "a.bin"
    old = time.time() - 3 * 3600
    os.utime(source, (old, old))  # a checkout of long ago: its hard link looks stale
    pause = Pause(monkeypatch, Store, "_link_temp")
    writer = pause.start(_add(project, store, source, "fam/a", link=True))
    (folder,) = store.tmp_dir.iterdir()  # the link sits in the writer's own folder
    assert folder.name.startswith("writer-") and [p.name[:5] for p in folder.iterdir()] == ["link-"]
    collector = Background(lambda: gc.sweep(store, registry_mod.load(project), delete=True))
    collector.start()
    collector.join(0.5)
    pause.release.set()
    record = writer.finish()
    collector.finish()
    assert os.path.samefile(source, store.object_path(record.digest))
    assert list(store.tmp_dir.iterdir()) == []


def test_gc_removes_a_dead_writers_folder_whatever_its_age(store: Store) -> None:
    dead = store.tmp_dir / "writer-999999-dead"
    dead.mkdir()
    (dead / "put-x").write_bytes(b"half")
    loose = store.tmp_dir / "put-loose"  # a caller that held no lock: judged by age
    loose.write_bytes(b"fresh")
    assert store.clean_tmp() == 1
    assert not dead.exists() and loose.exists()


def test_a_writer_does_not_wait_for_itself_and_gc_in_a_writer_is_refused(store: Store) -> None:
    with store.writing():
        with store.writing():  # re-entrant
            digest = store.put_bytes(b"inside")
            assert store.temp_folder().name.startswith("writer-")
        with pytest.raises(StoreError, match="wait for itself"), store.collecting():
            pass
    assert store.has(digest)
    assert store.temp_folder() == store.tmp_dir
    assert list(store.tmp_dir.iterdir()) == []


def test_a_store_that_cannot_take_the_lock_still_serves_a_writer_that_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(*_a: Any, **_k: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("fixture_store.objects.fsutil.flocked", read_only)
    with store.writing():  # a fetch that finds everything present writes nothing
        assert store.temp_folder() == store.tmp_dir


# -- trials with real processes -----------------------------------------------------------------
# Every run: one trial of each lock across real processes (the writer lock against gc, the
# registry lock between writers); the rest run when slow tests do.
FAST = {"gc-add-link": 4, "same-name-other-bytes": 2}
SLOW = {**dict.fromkeys(trials.TRIALS, 50), "concurrent-adds": 5}
del SLOW["sigkill-registry"]  # tests/registry/test_transaction.py runs it
del SLOW["sigkill-sharded"]  # tests/registry/test_shards.py runs it
REGENERATE_BUDGET = 60.0


@pytest.mark.parametrize("kind", sorted(FAST))
def test_trial(kind: str, tmp_path: Path) -> None:
    tally = trials.TRIALS[kind](tmp_path / "trial", FAST[kind])
    assert tally.rounds == FAST[kind]
    assert tally.clean, str(tally)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SLOW))
def test_trial_many_rounds(kind: str, tmp_path: Path, campaign_summary: list[str]) -> None:
    if kind == "gc-regenerate":
        tally = trials.gc_against_regenerate(
            tmp_path / "trial", SLOW[kind], budget=REGENERATE_BUDGET
        )
        assert tally.rounds >= 5
    else:
        tally = trials.TRIALS[kind](tmp_path / "trial", SLOW[kind])
        assert tally.rounds == SLOW[kind]
    campaign_summary.append(str(tally))
    assert tally.clean, str(tally)
