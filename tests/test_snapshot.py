"""Verify snapshots (``fixture_store.snapshot``): a passed verify of every record, remembered,
used only while the registry's bytes and every object's stat are as they were."""

from __future__ import annotations

import array
import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store import snapshot
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.digests import Algorithm
from fixture_store.objects.store import Store
from fixture_store.registry import Registry, shards
from fixture_store.verify import Result, Status
from tests.support.cli import add_file_and_case, run


class Loads:
    """The ``load`` verify_project calls for a full verify, counting the calls."""

    def __init__(self, project: Path) -> None:
        self.project, self.calls = project, 0

    def __call__(self) -> Registry:
        self.calls += 1
        return registry_mod.load(self.project)


def verify(store: Store, project: Path, **options: object) -> tuple[list[Result], Loads]:
    load = Loads(project)
    results = list(snapshot.verify_project(store, load, project, **options))  # type: ignore[arg-type]
    return results, load


def slots() -> list[Path]:
    return sorted(snapshot.folder().glob("*.snapshot"))


def object_of(project: Path, store: Store, name: str) -> Path:
    digest = registry_mod.load(project).get(name).digest
    assert digest is not None
    return store.object_path(digest)


def rewrite(path: Path, data: bytes) -> None:
    """Other bytes of the same size, with the old mtime put back: only ctime tells."""
    st = path.stat()
    os.chmod(path, 0o644)
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_passed_verify_of_everything_is_served_again_without_parsing_the_registry(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    first, load = verify(store, project)
    assert load.calls == 1 and [r.status for r in first] == [Status.VERIFIED] * 2
    assert len(slots()) == 1
    again, load = verify(store, project)
    assert load.calls == 0
    assert [r.to_json() for r in again] == [{**r.to_json(), "cached": True} for r in first]


def test_an_edited_registry_file_is_parsed_again(project: Path, store: Store) -> None:
    add_file_and_case(project)
    verify(store, project)
    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    doc["description"] = "one byte of review changes the key"
    path.write_text(json.dumps(doc, indent=2))
    _, load = verify(store, project)
    assert load.calls == 1


def test_a_new_registry_file_is_parsed_again(project: Path, store: Store) -> None:
    add_file_and_case(project)
    verify(store, project)
    (project / "provenance" / "other.json").write_text('{"format_version": 1, "records": {}}')
    _, load = verify(store, project)
    assert load.calls == 1


def test_a_sharded_family_is_served_until_one_of_its_shards_changes(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "SHARD_ABOVE", 256)  # the two records shard the family
    add_file_and_case(project)
    assert registry_mod.load(project).families["fam"].sharded
    verify(store, project)
    assert verify(store, project)[1].calls == 0
    shard = next((project / "provenance" / "fam").glob("*.json"))
    shard.write_text(shard.read_text() + "\n")
    assert verify(store, project)[1].calls == 1
    verify(store, project)
    (project / "provenance" / "fam" / "notes.json").write_text("{}")  # refused by the load
    with pytest.raises(RegistryError, match="is not a shard"):
        verify(store, project)


def test_an_object_with_other_bytes_of_the_same_size_and_mtime_is_caught(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    verify(store, project)
    rewrite(object_of(project, store, "fam/a"), b"alphA" + b"alpha" * 99)
    results, load = verify(store, project)
    assert load.calls == 1
    assert {r.name: r.status for r in results}["fam/a"] is Status.MISMATCH
    assert slots() == []  # a failed verify of everything drops the project's snapshot
    assert verify(store, project)[1].calls == 1


def test_a_removed_object_is_reported_missing(project: Path, store: Store) -> None:
    add_file_and_case(project)
    verify(store, project)
    object_of(project, store, "fam/a").unlink()
    results, load = verify(store, project)
    assert load.calls == 1
    assert {r.name: r.status for r in results}["fam/a"] is Status.MISSING


def test_full_never_reads_a_snapshot(project: Path, store: Store) -> None:
    add_file_and_case(project)
    verify(store, project)
    results, load = verify(store, project, full=True)
    assert load.calls == 1 and all(not r.cached for r in results)


def test_explicit_names_are_verified_in_full_and_leave_the_snapshot(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    verify(store, project)
    before = slots()
    results, load = verify(store, project, names=["fam/a"])
    assert load.calls == 1 and [r.name for r in results] == ["fam/a"]
    assert slots() == before
    assert verify(store, project)[1].calls == 0


def test_a_family_is_served_from_the_snapshot_and_an_unknown_one_gets_the_registrys_error(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    verify(store, project)
    results, load = verify(store, project, families=["fam"])
    assert load.calls == 0 and [r.name for r in results] == ["fam/a", "fam/case"]
    with pytest.raises(UsageError, match="no family 'nope'"):
        verify(store, project, families=["nope"])


def test_a_verify_of_every_family_saves_a_snapshot_and_one_of_some_keeps_it(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    assert run("add", "data/a.bin", "--name", "other/a", "--kind", "fixture")[0] == 0
    verify(store, project, families=["fam"])
    assert slots() == []  # some records only: nothing to remember
    verify(store, project, families=["fam", "other"])
    [saved] = slots()
    assert verify(store, project)[1].calls == 0
    verify(store, project, names=["fam/a"])
    assert slots() == [saved]


def test_each_hash_has_its_own_snapshot(project: Path, store: Store) -> None:
    add_file_and_case(project)
    verify(store, project)
    _, load = verify(store, project, algorithm=Algorithm.SHA256)
    assert load.calls == 1 and len(slots()) == 2
    assert verify(store, project, algorithm=Algorithm.SHA256)[1].calls == 0


def test_another_store_does_not_use_this_stores_snapshot(
    project: Path, store: Store, tmp_path: Path
) -> None:
    add_file_and_case(project)
    verify(store, project)
    other = Store.at(tmp_path / "other-store").ensure()
    results, load = verify(other, project)
    assert load.calls == 1 and {r.status for r in results} == {Status.MISSING}


def test_a_declared_gap_round_trips(project: Path, store: Store) -> None:
    add_file_and_case(project)
    assert (
        run(
            "add",
            "--gap",
            "upstream has not published it",
            "--name",
            "fam/later",
            "--kind",
            "fixture",
        )[0]
        == 0
    )
    first, _ = verify(store, project)
    again, load = verify(store, project)
    assert load.calls == 0
    assert [r.to_json() for r in again] == [
        {**r.to_json(), "cached": r.cached or r.status is Status.VERIFIED} for r in first
    ]
    assert {r.name: r.status for r in again}["fam/later"] is Status.GAP


def test_an_invalid_record_saves_no_snapshot(project: Path, store: Store) -> None:
    add_file_and_case(project)
    path = project / "provenance" / "fam.json"
    doc = json.loads(path.read_text())
    doc["records"]["fam/bad"] = {"kind": "fixture", "digest": "sha256:nope", "size": 1}
    path.write_text(json.dumps(doc, indent=2))
    results, _ = verify(store, project)
    assert Status.INVALID_RECORD in {r.status for r in results}
    assert slots() == []


def _edit(path: Path, **fields: object) -> None:
    """Put ``fields`` into the snapshot's columns, written back as the code writes them."""
    snap = snapshot.Snapshot.from_bytes(path.read_bytes())
    path.write_bytes(dataclasses.replace(snap, **fields).to_bytes())  # type: ignore[arg-type]


def _edit_header(path: Path, **fields: object) -> None:
    """Put ``fields`` into the JSON header, the columns left as they are."""
    data = path.read_bytes()
    magic, header, columns = data.split(b"\n", 2)
    doc = {**json.loads(header), **fields}
    path.write_bytes(b"\n".join((magic, json.dumps(doc).encode(), columns)))


def _give_away(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(path, os.geteuid() + 4242, -1)


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: os.chmod(p, 0o666), id="writable-by-others"),
        pytest.param(lambda p: os.chmod(p.parent, 0o777), id="folder-writable-by-others"),
        pytest.param(
            lambda p: (p.rename(p.with_suffix(".real")), p.symlink_to(p.with_suffix(".real"))),
            id="a-link",
        ),
        pytest.param(_give_away, id="owned-by-someone-else"),
        pytest.param(lambda p: p.write_text("{not json"), id="damaged"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-5]), id="cut-short"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes() + b"\0" * 8), id="bytes-added"),
        pytest.param(
            lambda p: p.write_bytes(p.read_bytes().replace(b"snapshot 3", b"snapshot 2", 1)),
            id="another-format",
        ),
        pytest.param(lambda p: _edit_header(p, records=1), id="a-count-that-is-wrong"),
        pytest.param(lambda p: _edit_header(p, records=-2), id="a-count-that-is-not-one"),
        pytest.param(lambda p: _edit_header(p, others=[]), id="others-not-a-mapping"),
        pytest.param(lambda p: _edit_header(p, kinds=[[]]), id="a-kind-that-is-not-text"),
        pytest.param(
            lambda p: _edit(p, sizes=[-1, -1], others={0: {"status": "?"}, 1: {}}),
            id="a-result-that-is-not-one",
        ),
        # Results are built when asked for, after the lookup: a row with no result behind it,
        # or a kind the header does not have, must fail the lookup, never the printing.
        pytest.param(lambda p: _edit(p, sizes=[-1, -1], others={}), id="a-row-of-nothing"),
        pytest.param(lambda p: _edit(p, kind_rows=b"\x07\x07"), id="a-kind-not-in-the-header"),
    ],
)
def test_a_snapshot_someone_else_could_have_written_or_a_damaged_one_is_ignored(
    project: Path, store: Store, spoil: object
) -> None:
    add_file_and_case(project)
    verify(store, project)
    [path] = slots()
    spoil(path)  # type: ignore[operator]
    results, load = verify(store, project)
    assert load.calls == 1 and {r.status for r in results} == {Status.VERIFIED}


def test_a_snapshot_with_other_stats_is_not_trusted(project: Path, store: Store) -> None:
    """A snapshot whose stats do not match the files is a miss, whatever it claims."""
    add_file_and_case(project)
    verify(store, project)
    [path] = slots()
    stats = array.array("q", snapshot.Snapshot.from_bytes(path.read_bytes()).stats)
    stats[0] += 1
    _edit(path, stats=stats)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    assert verify(store, project)[1].calls == 1


@pytest.mark.parametrize("module", ["m.py", "sub/deeper/m.py"])
def test_a_changed_module_of_fixture_store_changes_the_key(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    package = tmp_path / "package"
    (package / module).parent.mkdir(parents=True)
    (package / module).write_text("x = 1\n")
    (package / "data.txt").write_text("not a module")
    monkeypatch.setattr(snapshot, "_PACKAGE", package)
    before = snapshot.key(store, project, Algorithm.AUTO, [("fam", "0" * 64)])
    (package / "data.txt").write_text("not a module, edited")
    assert snapshot.key(store, project, Algorithm.AUTO, [("fam", "0" * 64)]) == before
    (package / module).write_text("x = 22\n")
    assert snapshot.key(store, project, Algorithm.AUTO, [("fam", "0" * 64)]) != before


def test_the_cli_prints_the_same_table_and_json_from_a_snapshot(
    project: Path, store: Store
) -> None:
    add_file_and_case(project)
    code, first, _ = run("verify", "--json")
    assert code == 0 and slots()
    code, again, _ = run("verify", "--json")
    assert code == 0
    assert json.loads(again)["results"] == [
        {**r, "cached": True} for r in json.loads(first)["results"]
    ]
    code, table, _ = run("verify", "--verbose")
    assert code == 0 and "2 verified" in table and "fam/case" in table
    assert store.root.is_dir()


def test_a_stat_past_64_bits_saves_no_snapshot_and_fails_nothing(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some file systems give inode numbers past 2**63: the packed stats cannot hold them, so
    that store gets no shortcut, and the verify still passes."""
    add_file_and_case(project)
    proved = snapshot._proved

    def huge_inodes(*args: object) -> object:
        found = proved(*args)  # type: ignore[arg-type]
        return found and tuple((h, (1 << 63, *e[1:])) for h, e in found)

    monkeypatch.setattr(snapshot, "_proved", huge_inodes)
    results, _ = verify(store, project)
    assert {r.status for r in results} == {Status.VERIFIED} and slots() == []
