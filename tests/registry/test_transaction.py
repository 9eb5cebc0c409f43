"""Registry writes are transactions (DESIGN decision 10): a lock, a re-read under it, an atomic
replace; a stale read-modify-write is refused; a killed writer leaves a complete document."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import UsageError
from fixture_store.objects import digests
from fixture_store.objects.digests import Awaited
from fixture_store.registry import Record
from fixture_store.registry import files as files_mod
from tests.support.records import local_record
from tests.support.trials import sigkill_registry_writes

_record = local_record


def test_write_family_refuses_a_registry_that_changed_since_it_was_read(project: Path) -> None:
    registry_mod.write_family(registry_mod.load(project), "fam", [_record("fam/a")])
    stale = registry_mod.load(project)
    fresh = registry_mod.load(project)
    registry_mod.write_family(fresh, "fam", [*fresh.records(), _record("fam/b", 1)])
    with pytest.raises(UsageError, match="changed since this registry was read"):
        registry_mod.write_family(stale, "fam", [*stale.records(), _record("fam/c", 2)])
    assert sorted(registry_mod.load(project).families["fam"].records) == ["fam/a", "fam/b"]


def test_a_transaction_reads_the_family_as_it_is_under_the_lock(project: Path) -> None:
    before = registry_mod.load(project)
    registry_mod.write_family(before, "fam", [_record("fam/a")])
    with registry_mod.transaction(project) as tx:
        current = tx.family("fam")
        assert current is not None and list(current.records) == ["fam/a"]
        tx.write("fam", [*current.records.values(), _record("fam/b", 1)])
        again = tx.family("fam")  # read again after the write
        assert again is not None and len(again.records) == 2
        assert tx.family("other") is None
    assert sorted(registry_mod.load(project).families["fam"].records) == ["fam/a", "fam/b"]


def test_a_transaction_reuses_a_family_read_before_only_while_its_file_is_unchanged(
    project: Path,
) -> None:
    registry_mod.write_family(registry_mod.load(project), "fam", [_record("fam/a")])
    before = registry_mod.load(project)
    with registry_mod.transaction(project) as tx:
        assert tx.family("fam", known=before.families["fam"]) is before.families["fam"]
        assert tx.registry(known=before).families == before.families
    registry_mod.write_family(before, "fam", [_record("fam/a"), _record("fam/b", 1)])
    with registry_mod.transaction(project) as tx:
        now = tx.family("fam", known=before.families["fam"])
        assert now is not None and sorted(now.records) == ["fam/a", "fam/b"]
        assert sorted(tx.registry(known=before).families["fam"].records) == ["fam/a", "fam/b"]


def test_transactions_exclude_each_other_and_nest_on_one_thread(project: Path) -> None:
    inside = threading.Event()
    order: list[str] = []

    def second() -> None:
        inside.wait(10)
        with registry_mod.transaction(project):
            order.append("second")

    other = threading.Thread(target=second)
    other.start()
    with registry_mod.transaction(project):
        inside.set()
        time.sleep(0.3)
        with registry_mod.transaction(project) as nested:  # joins, does not wait for itself
            nested.write("fam", [_record("fam/a")])
        order.append("first")
    other.join(10)
    assert order == ["first", "second"]


def test_the_lock_folder_ignores_itself_and_is_no_family(project: Path) -> None:
    with registry_mod.transaction(project):
        pass
    locks = project / "provenance" / files_mod.LOCKS_DIRNAME
    assert (locks / ".gitignore").read_text() == "*\n"
    assert registry_mod.load(project).families == {}


def test_a_transaction_removes_the_temp_file_of_a_writer_that_died(project: Path) -> None:
    dead = project / "provenance" / ".fam.json.k1ll3d_x.tmp"
    dead.write_text('{"format_version": 1, "rec')
    unrelated = project / "provenance" / "notes.tmp"
    unrelated.write_text("mine")
    registry_mod.write_family(registry_mod.load(project), "fam", [_record("fam/a")])
    assert not dead.exists() and unrelated.exists()


def test_a_writer_killed_mid_write_leaves_the_old_or_the_new_document(tmp_path: Path) -> None:
    tally = sigkill_registry_writes(tmp_path / "trial", rounds=3)
    assert tally.rounds == 3
    assert tally.clean, str(tally)


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_the_old_or_the_new_document_50_times(
    tmp_path: Path,
) -> None:
    tally = sigkill_registry_writes(tmp_path / "trial", rounds=50)
    assert tally.rounds == 50
    assert tally.clean, str(tally)


def test_fills_are_recorded_in_one_write_and_a_record_changed_since_is_left_as_it_is(
    project: Path,
) -> None:
    """:func:`record_fills` records each filled gap's SHA-256 under the lock, against the
    family as it is then: a gap that no longer awaits the digest its bytes were checked
    against (another writer changed it) is left as that writer left it."""
    data = b"the bytes awaited"
    sha, md5 = digests.of_bytes(data), Awaited("md5", hashlib.md5(data).hexdigest())

    def gap(name: str, awaited: Awaited) -> Record:
        raw = {"kind": "fixture", "gap": {"reason": "absent"}, "digest": str(awaited)}
        source = {"source": {"type": "url", "url": "https://example.org/x"}}
        return registry_mod.parse_record(name, {**raw, **source}, file="<test>")

    other = Awaited("md5", "00" * 16)
    registry_mod.write_family(
        registry_mod.load(project), "fam", [gap("fam/a", md5), gap("fam/b", md5), _record("fam/c")]
    )
    read = registry_mod.load(project)  # what the fetch read
    now = registry_mod.load(project)
    registry_mod.write_family(
        now, "fam", [*(r for r in now.records() if r.name != "fam/b"), gap("fam/b", other)]
    )
    fills = [registry_mod.Fill(n, md5, sha, "b3" * 32) for n in ("fam/a", "fam/b", "fam/gone")]
    assert registry_mod.record_fills(read, fills) == {"fam/a"}
    after = registry_mod.load(project)
    a, b = after.get("fam/a"), after.get("fam/b")
    assert a.gap is None and a.digest == sha and a.blake3 == "b3" * 32
    assert b.gap is not None and b.gap.expected == other and b.digest is None
    assert after.get("fam/c") == _record("fam/c")


def test_a_fill_lifts_a_gap_that_kept_its_digest_only_if_it_has_a_source(project: Path) -> None:
    """A gap that kept its digest and size keeps it, only the gap goes; one with no source
    stays a gap (lifted, it would be a record with nowhere to come from, which the rules
    refuse), and a fill of other bytes lifts nothing. A fill another writer recorded first is
    counted, and nothing is written again."""
    data = b"the bytes awaited"
    sha = digests.of_bytes(data)
    raw = {"kind": "fixture", "gap": {"reason": "absent"}, "digest": sha.text, "size": sha.size}
    source = {"source": {"type": "url", "url": "https://example.org/x"}}
    sourced = registry_mod.parse_record("fam/a", {**raw, **source}, file="<test>")
    bare = registry_mod.parse_record("fam/b", raw, file="<test>")
    other = registry_mod.parse_record("fam/c", {**raw, **source}, file="<test>")
    registry_mod.write_family(registry_mod.load(project), "fam", [sourced, bare, other])
    other_bytes = digests.of_bytes(b"other bytes")
    fills = [registry_mod.Fill("fam/a", None, sha), registry_mod.Fill("fam/b", None, sha)]
    fills.append(registry_mod.Fill("fam/c", None, other_bytes))
    read = registry_mod.load(project)
    assert registry_mod.record_fills(read, fills) == {"fam/a"}
    after = registry_mod.load(project)
    assert after.get("fam/a") == dataclasses.replace(sourced, gap=None)
    assert after.get("fam/b") == bare and after.get("fam/c") == other
    # Another fetch that read the gap before this one lifted it: its fill is already there.
    written = (project / "provenance" / "fam.json").read_bytes()
    assert registry_mod.record_fills(read, fills[:1]) == {"fam/a"}
    assert (project / "provenance" / "fam.json").read_bytes() == written
