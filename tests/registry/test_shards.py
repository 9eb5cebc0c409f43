"""A family that grows large is written as shards, ``provenance/<family>/<ab>.json``, and read
back as one family (``fixture_store.registry.shards`` and the files module): only the shards a
write changes are rewritten, misplaced or unexplained shard files are refused, and a sharding
interrupted midway loses nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry import Record, shards, writing
from fixture_store.registry import files as files_mod
from tests.support.cli import run
from tests.support.records import local_record
from tests.support.trials import sigkill_registry_writes

_record = local_record


def _records(n: int, start: int = 0) -> list[Record]:
    return [_record(f"fam/r{i:04d}", i) for i in range(start, start + n)]


@pytest.fixture(autouse=True)
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard a family past 4 KiB instead of 8 MiB, so a test needs a few dozen records."""
    monkeypatch.setattr(shards, "SHARD_ABOVE", 4096)


def _write(project: Path, records: list[Record]) -> Path:
    return registry_mod.write_family(registry_mod.load(project), "fam", records)


def _shard_files(project: Path) -> dict[str, os.stat_result]:
    return {p.name: p.stat() for p in sorted((project / "provenance" / "fam").glob("*.json"))}


def test_shard_of_is_two_hex_digits_of_the_names_sha256() -> None:
    assert shards.shard_of("fam/r0001") == "0e"  # sha256("fam/r0001") starts 0e, for good
    assert all(shards.is_shard_name(shards.shard_of(f"f/{i}")) for i in range(100))
    assert not shards.is_shard_name("1") and not shards.is_shard_name("AB")


def test_a_small_family_stays_one_file(project: Path) -> None:
    path = _write(project, _records(3))
    assert "records" in json.loads(path.read_text())
    assert not (project / "provenance" / "fam").exists()
    assert registry_mod.load(project).families["fam"].sharded is False


def test_a_family_past_the_limit_is_written_as_shards_and_read_back_whole(project: Path) -> None:
    written = _records(60)
    path = _write(project, written)
    head = json.loads(path.read_text())
    assert head == {"format_version": 1, "shards": 256}
    for name, st in _shard_files(project).items():
        doc = json.loads((project / "provenance" / "fam" / name).read_text())
        assert set(doc) == {"format_version", "records"} and doc["records"]
        assert {shards.shard_of(n) for n in doc["records"]} == {name.removesuffix(".json")}
        assert st.st_size < shards.SHARD_ABOVE
    fam = registry_mod.load(project).families["fam"]
    assert fam.sharded and dict(fam.records) == {r.name: r for r in written}
    assert fam.file_of("fam/r0001") == project / "provenance" / "fam" / "0e.json"
    assert registry_mod.load_file(path) == fam


def test_a_write_rewrites_only_the_shards_whose_records_changed(project: Path) -> None:
    _write(project, _records(60))
    head = project / "provenance" / "fam.json"
    before, head_before = _shard_files(project), head.stat()
    added = _record("fam/new", 99)
    _write(project, [*registry_mod.load(project).records(), added])
    after = _shard_files(project)
    changed = {n for n in after if n not in before or after[n].st_ino != before[n].st_ino}
    assert changed == {f"{shards.shard_of('fam/new')}.json"}
    assert head.stat().st_ino == head_before.st_ino  # the family's file did not change
    assert registry_mod.load(project).get("fam/new") == added


def test_a_sharded_family_stays_sharded_and_drops_emptied_shards(project: Path) -> None:
    _write(project, _records(60))
    kept = _records(2)
    _write(project, kept)
    assert set(_shard_files(project)) == {f"{shards.shard_of(r.name)}.json" for r in kept}
    fam = registry_mod.load(project).families["fam"]
    assert fam.sharded and sorted(fam.records) == [r.name for r in kept]


def test_an_invalid_record_in_a_shard_is_kept_by_other_writes_and_named_with_its_file(
    project: Path,
) -> None:
    _write(project, _records(60))
    shard = project / "provenance" / "fam" / f"{shards.shard_of('fam/r0001')}.json"
    doc = json.loads(shard.read_text())
    doc["records"]["fam/r0001"]["size"] = -1
    shard.write_text(files_mod.dumps(doc))
    reg = registry_mod.load(project)
    assert dict(reg.invalid())["fam/r0001"].file == str(shard)
    _write(project, [*reg.records(), _record("fam/new", 99)])
    assert json.loads(shard.read_text())["records"]["fam/r0001"]["size"] == -1
    assert "fam/r0001" in dict(registry_mod.load(project).invalid())


def test_a_record_in_the_wrong_shard_is_refused_with_where_it_belongs(project: Path) -> None:
    _write(project, _records(60))
    folder = project / "provenance" / "fam"
    home = folder / f"{shards.shard_of('fam/r0001')}.json"
    wrong = next(p for p in sorted(folder.glob("*.json")) if p != home)
    doc = json.loads(wrong.read_text())
    doc["records"]["fam/r0001"] = json.loads(home.read_text())["records"]["fam/r0001"]
    wrong.write_text(files_mod.dumps(doc))
    error = dict(registry_mod.load(project).invalid())["fam/r0001"]
    assert f"belongs in shard {home.name}" in error.message
    assert error.fix == f"move it to {home}" and error.file == str(wrong)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d | {"description": "x"}, "a shard holds only format_version and records"),
        (lambda d: d | {"format_version": 2}, "unknown format_version"),
        (lambda _: {"format_version": 1}, "missing or not an object"),
    ],
    ids=["description", "version", "no-records"],
)
def test_a_shard_that_is_not_a_shard_document_is_refused(
    project: Path, change: object, expected: str
) -> None:
    _write(project, _records(60))
    shard = next((project / "provenance" / "fam").glob("*.json"))
    shard.write_text(files_mod.dumps(change(json.loads(shard.read_text()))))  # type: ignore[operator]
    with pytest.raises(RegistryError, match=expected) as caught:
        registry_mod.load(project)
    assert caught.value.file == str(shard)


def test_a_json_file_in_a_shard_folder_that_is_no_shard_is_refused(project: Path) -> None:
    _write(project, _records(60))
    stray = project / "provenance" / "fam" / "notes.json"
    stray.write_text("{}")
    with pytest.raises(RegistryError, match="is not a shard of family 'fam'") as caught:
        registry_mod.load(project)
    assert caught.value.file == str(stray) and caught.value.fix


@pytest.mark.parametrize(
    ("head", "field", "expected"),
    [
        ({"format_version": 1, "shards": 16}, "shards", "must be 256"),
        ({"format_version": 1, "shards": True}, "shards", "must be 256"),
        ({"format_version": 1, "shards": 256, "records": {}}, "records", "holds no records"),
    ],
    ids=["count", "bool", "records"],
)
def test_a_sharded_familys_file_says_256_shards_and_holds_no_records(
    project: Path, head: dict[str, object], field: str, expected: str
) -> None:
    path = _write(project, _records(60))
    path.write_text(files_mod.dumps(head))
    with pytest.raises(RegistryError, match=expected) as caught:
        registry_mod.load(project)
    assert (caught.value.file, caught.value.field) == (str(path), field)


def test_shards_without_their_familys_file_are_refused_by_reads_and_writes(project: Path) -> None:
    path = _write(project, _records(60))
    path.unlink()
    with pytest.raises(RegistryError, match=r"no fam\.json beside it") as caught:
        registry_mod.load(project)
    assert caught.value.file == str(project / "provenance" / "fam")
    with registry_mod.transaction(project) as tx, pytest.raises(RegistryError, match=r"fam\.json"):
        tx.write("fam", _records(1))
    assert not path.exists()  # nothing was written over the shards


class _Killed(BaseException):
    """A writer dying mid-write: nothing after it runs, no handler cleans up."""


def _die_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    real = writing.write_atomically
    done: list[Path] = []

    def write(directory: Path, path: Path, text: str) -> None:
        if len(done) == writes:
            raise _Killed
        done.append(path)
        real(directory, path, text)

    monkeypatch.setattr(writing, "write_atomically", write)


def _interrupt_sharding(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five records in one file, then a writer growing the family past the limit dies after
    copying two shards; the limit is 8 MiB again afterwards."""
    _write(project, _records(5))
    _die_after(monkeypatch, writes=2)
    with pytest.raises(_Killed):
        _write(project, _records(60))
    monkeypatch.undo()


def test_a_sharding_interrupted_midway_keeps_every_record_in_the_familys_file(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _records(5)  # one file, under the limit
    _write(project, small)
    grown = _records(60)
    _die_after(monkeypatch, writes=2)  # while copying the records into shards
    with pytest.raises(_Killed):
        _write(project, grown)
    monkeypatch.undo()
    monkeypatch.setattr(shards, "SHARD_ABOVE", 4096)
    assert len(_shard_files(project)) == 2  # the copies written before the writer died
    fam = registry_mod.load(project).families["fam"]
    assert not fam.sharded and dict(fam.records) == {r.name: r for r in small}
    _write(project, grown)  # the next write shards the family, the copies replaced
    fam = registry_mod.load(project).families["fam"]
    assert fam.sharded and dict(fam.records) == {r.name: r for r in grown}


def test_a_writer_dying_once_the_family_is_sharded_leaves_its_records_as_they_were(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _records(5)
    _write(project, small)
    copies = len(shards.grouped(r.name for r in small))
    _die_after(monkeypatch, writes=copies + 1)  # the copies and the family's new file
    with pytest.raises(_Killed):
        _write(project, _records(60))
    fam = registry_mod.load(project).families["fam"]
    assert fam.sharded and dict(fam.records) == {r.name: r for r in small}


def test_a_new_family_past_the_limit_gets_its_file_before_its_shards(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _die_after(monkeypatch, writes=4)
    with pytest.raises(_Killed):
        _write(project, _records(60))
    fam = registry_mod.load(project).families["fam"]  # no stray shards: a partial family
    assert fam.sharded and 0 < len(fam.records) < 60
    assert all(fam.records[n] == r for r in _records(60) if (n := r.name) in fam.records)


def test_shard_copies_left_beside_a_small_family_are_removed_by_its_next_write(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupt_sharding(project, monkeypatch)
    _write(project, _records(6))  # under the default limit: stays one file
    assert not (project / "provenance" / "fam").exists()
    assert len(registry_mod.load(project).families["fam"].records) == 6


def test_shards_beside_an_unsharded_family_that_are_not_its_copies_are_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupt_sharding(project, monkeypatch)
    shard = next((project / "provenance" / "fam").glob("*.json"))
    doc = json.loads(shard.read_text())
    name = next(iter(doc["records"]))
    doc["records"][name]["size"] = 12345  # no longer what fam.json says of it
    shard.write_text(files_mod.dumps(doc))
    with pytest.raises(RegistryError, match="would be read from two places") as caught:
        registry_mod.load(project)
    assert caught.value.file == str(shard) and "keep one layout" in (caught.value.fix or "")


def test_a_failed_shard_write_says_records_may_be_old_or_new(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(project, _records(60))
    real = writing.write_atomically
    calls: list[Path] = []

    def full_disk(directory: Path, path: Path, text: str) -> None:
        calls.append(path)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        real(directory, path, text)

    monkeypatch.setattr(writing, "write_atomically", full_disk)
    changed = [_record(r.name, 1000 + i) for i, r in enumerate(_records(60))]
    with pytest.raises(RegistryError, match="No space left") as caught:
        _write(project, changed)
    assert "each record is as it was or as written" in caught.value.message
    monkeypatch.undo()
    fam = registry_mod.load(project).families["fam"]
    assert len(fam.records) == 60 and not dict(registry_mod.load(project).invalid())


def test_a_transaction_reuses_an_unchanged_sharded_family_and_rereads_a_changed_shard(
    project: Path,
) -> None:
    _write(project, _records(60))
    before = registry_mod.load(project)
    with registry_mod.transaction(project) as tx:
        assert tx.family("fam", known=before.families["fam"]) is before.families["fam"]
    shard = next((project / "provenance" / "fam").glob("*.json"))
    shard.write_text(shard.read_text().replace('"kind": "fixture"', '"kind": "checkpoint"', 1))
    with registry_mod.transaction(project) as tx:
        now = tx.family("fam", known=before.families["fam"])
    assert now is not None and now != before.families["fam"]


def test_a_transaction_removes_a_dead_writers_temp_file_in_a_shard_folder(project: Path) -> None:
    _write(project, _records(60))
    dead = project / "provenance" / "fam" / ".ab.json.x1y2.tmp"
    dead.write_text('{"format_version": 1, "rec')
    _write(project, _records(61))
    assert not dead.exists()


def test_family_digests_cover_every_shard_and_stray_folder_without_parsing(project: Path) -> None:
    _write(project, _records(60))
    directory = project / "provenance"
    fam = registry_mod.load(project).families["fam"]
    assert files_mod.family_digests(directory) == [("fam", fam.text_digest)]
    shard = next((directory / "fam").glob("*.json"))
    shard.write_text(shard.read_text() + " ")
    changed = files_mod.family_digests(directory)
    assert changed != [("fam", fam.text_digest)]
    (directory / "other").mkdir()
    (directory / "other" / "00.json").write_text("{}")
    assert [f for f, _ in files_mod.family_digests(directory)] == ["fam", "other/"]


def test_a_team_imports_past_the_limit_and_every_command_sees_the_whole_family(
    project: Path,
) -> None:
    data = project / "refs"
    data.mkdir()
    lines = []
    for i in range(80):
        blob = f"reference {i}".encode()
        (data / f"out{i:03d}.npy").write_bytes(blob)
        lines.append(f"{digests.of_bytes(blob).hex}  out{i:03d}.npy\n")
    (data / "SHA256SUMS").write_text("".join(lines))
    code, _, err = run("import", "sha256sum", str(data / "SHA256SUMS"), "--family", "refs")
    assert code == 0, err
    fam = registry_mod.load(project).families["refs"]
    assert fam.sharded and len(fam.records) == 80
    code, out, err = run("verify", "--json")
    assert code == 0, err
    assert sum(r["status"] == "verified" for r in json.loads(out)["results"]) == 80
    code, out, err = run("gc", "--yes", "--json")
    assert code == 0 and json.loads(out)["removed"] == 0, out + err
    code, out, _ = run("list", "--family", "refs", "--json")
    assert code == 0 and len(json.loads(out)) == 80


def test_a_sharded_familys_file_and_its_shards_follow_the_schema(project: Path) -> None:
    import jsonschema

    path = _write(project, _records(60))
    for file in [path, *sorted((project / "provenance" / "fam").glob("*.json"))]:
        jsonschema.validate(json.loads(file.read_text()), files_mod.schema())
    both = {"format_version": 1, "shards": 256, "records": {}}
    assert not jsonschema.Draft202012Validator(files_mod.schema()).is_valid(both)


def test_a_writer_killed_mid_write_leaves_each_record_old_or_new(tmp_path: Path) -> None:
    tally = sigkill_registry_writes(tmp_path / "trial", rounds=3, sharded=True)
    assert tally.rounds == 3
    assert tally.clean, str(tally)


@pytest.mark.slow
def test_a_writer_killed_mid_write_leaves_each_record_old_or_new_50_times(
    tmp_path: Path, campaign_summary: list[str]
) -> None:
    tally = sigkill_registry_writes(tmp_path / "trial", rounds=50, sharded=True)
    assert tally.rounds == 50
    assert tally.clean, str(tally)
    campaign_summary.append(str(tally))


def test_a_shard_a_writer_removes_while_a_reader_lists_the_folder_is_not_an_error(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(project, _records(60))
    listed = shards.shard_files
    used = {p.stem for p in listed(project / "provenance" / "fam.json")}
    gone = next(f"{i:02x}" for i in range(256) if f"{i:02x}" not in used)

    def with_a_vanished_shard(head: Path) -> list[Path]:
        return sorted([*listed(head), shards.folder(head) / f"{gone}.json"])

    monkeypatch.setattr(shards, "shard_files", with_a_vanished_shard)
    fam = registry_mod.load(project).families["fam"]
    assert len(fam.records) == 60
    assert files_mod.family_digests(project / "provenance") == [("fam", fam.text_digest)]


@pytest.mark.parametrize("kind", ["folder", "fifo", "not-utf-8"])
def test_a_shard_that_cannot_be_read_is_refused_and_gc_deletes_nothing(
    project: Path, store: Store, kind: str
) -> None:
    """A file at a shard's name that cannot be read (a folder, a FIFO, bytes that are not UTF-8
    after a bad merge) is refused naming it, never skipped: its records would vanish, and gc
    would then collect their objects."""
    records = _records(60)
    for i in range(60):
        store.put_bytes(f"bytes {i}".encode())
    _write(project, records)
    victim = sorted((project / "provenance" / "fam").glob("*.json"))[0]
    victim.unlink()
    if kind == "folder":
        victim.mkdir()
    elif kind == "fifo":
        os.mkfifo(victim)  # no writer ever opens it: a blocking read would hang
    else:
        victim.write_bytes(b'{"format_version": 1, "records": {"\xff": 1}}\n')
    with pytest.raises(RegistryError) as info:
        registry_mod.load(project)
    assert info.value.file == str(victim)
    before = sorted(p.name for p in store.objects_dir.rglob("*") if p.is_file())
    code, _out, err = run("gc", "--yes")
    assert code != 0 and str(victim) in err and "Traceback" not in err
    assert sorted(p.name for p in store.objects_dir.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("command", ["load", "write"])
def test_a_shard_folder_that_is_a_link_out_of_the_project_is_refused(
    project: Path, tmp_path: Path, command: str
) -> None:
    """A shard folder linked to a folder outside the project was read, and written: ``add``
    created a shard file outside the project. It is refused by reads and writes alike."""
    _write(project, _records(60))
    folder = project / "provenance" / "fam"
    outside = tmp_path / "outside"
    folder.rename(outside)
    folder.symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}

    def attempt() -> None:
        if command == "load":
            registry_mod.load(project)
        else:
            with files_mod.transaction(project) as tx:
                tx.write("fam", [*_records(60), *_records(5, 1000)])

    with pytest.raises(RegistryError) as info:
        attempt()
    assert info.value.file == str(folder) and "symbolic link" in info.value.message
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
