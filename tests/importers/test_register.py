"""Registering a plan: all records in one transaction or none, merged as ``add`` merges."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import IntegrityError, UsageError
from fixture_store.importers.entry import ManifestError
from fixture_store.importers.plan import LocalOrigin
from fixture_store.importers.register import ImportRefusedError, refuse_unaccounted, register
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support.importing import family_doc, plan, run_import, write


def _sums(folder: Path, files: dict[str, bytes]) -> Path:
    write(folder, files)
    path = folder / "SHA256SUMS"
    path.write_text("".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in files.items()))
    return path


def _registered(store: Store, project: Path, name: str) -> None:
    write(project / "other", {"x.bin": b"x"})
    ingest.add(
        store, registry_mod.load(project), project / "other" / "x.bin", name=name, kind="fixture"
    )


def test_one_file_that_cannot_be_registered_is_refused_by_itself(
    store: Store, project: Path
) -> None:
    _registered(store, project, "imp/B.bin")
    manifest = _sums(project / "data", {"a.bin": b"a", "b.bin": b"b", "_hidden .bin": b"h"})
    with pytest.raises(ManifestError, match=r"SHA256SUMS line 2: 'b.bin': .*collides with"):
        run_import(store, project, manifest)  # all or nothing, as --strict
    assert sorted(family_doc(project)["records"]) == ["imp/B.bin"]
    origin = LocalOrigin(project, manifest.parent)
    done = register(
        store,
        registry_mod.load(project),
        plan(project, manifest),
        origin,
        family="imp",
        partial=True,
    )
    assert sorted(r.name for r in done.written) == ["imp/_hidden .bin", "imp/a.bin"]


def test_an_absent_file_that_cannot_be_named_matters_only_as_a_gap(
    store: Store, project: Path
) -> None:
    _registered(store, project, "imp/Gone.bin")
    manifest = _sums(project / "data", {"a.bin": b"a", "gone.bin": b"g"})
    (project / "data" / "gone.bin").unlink()
    with pytest.raises(ManifestError, match=r"collides with 'imp/Gone\.bin'"):
        run_import(store, project, manifest, gaps=True)
    _, done = run_import(store, project, manifest)
    assert [r.name for r in done.written] == ["imp/a.bin"]


def test_a_record_with_other_bytes_is_refused_unless_replace(store: Store, project: Path) -> None:
    write(project / "data", {"a.bin": b"old"})
    ingest.add(
        store,
        registry_mod.load(project),
        project / "data" / "a.bin",
        name="imp/a.bin",
        kind="fixture",
    )
    before = (project / "provenance" / "imp.json").read_text()
    manifest = _sums(project / "data", {"a.bin": b"new", "b.bin": b"b"})
    with pytest.raises(UsageError, match=r"imp/a\.bin is already registered.*\n    digest:"):
        run_import(store, project, manifest)
    assert (project / "provenance" / "imp.json").read_text() == before  # b.bin neither
    _, done = run_import(store, project, manifest, replace=True)
    assert sorted(r.name for r in done.written) == ["imp/a.bin", "imp/b.bin"]
    assert (
        registry_mod.load(project).get("imp/a.bin").object.hex == hashlib.sha256(b"new").hexdigest()
    )


def test_importing_again_keeps_the_reviewed_records_byte_for_byte(
    store: Store, project: Path
) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a"})
    run_import(store, project, manifest)
    first = (project / "provenance" / "imp.json").read_text()
    _, done = run_import(store, project, manifest)
    assert done.written == () and done.kept == ("imp/a.bin",)
    assert (project / "provenance" / "imp.json").read_text() == first


def test_gaps_are_declared_only_when_asked(store: Store, project: Path) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a", "b.bin": b"b"})
    (project / "data" / "b.bin").unlink()
    _, done = run_import(store, project, manifest)
    assert done.gaps == () and set(family_doc(project)["records"]) == {"imp/a.bin"}
    _, done = run_import(store, project, manifest, gaps=True)
    assert [g.name for g in done.gaps] == ["imp/b.bin"]
    (result,) = verify_names(store, registry_mod.load(project), ["imp/b.bin"])
    assert result.status is Status.GAP
    assert "listed in data/SHA256SUMS but absent" in result.message


def test_a_gap_never_replaces_a_registered_record(store: Store, project: Path) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a"})
    run_import(store, project, manifest)
    (project / "data" / "a.bin").unlink()
    _, done = run_import(store, project, manifest, gaps=True)
    assert done.gaps == ()
    assert registry_mod.load(project).get("imp/a.bin").gap is None


def _reviewed(store: Store, project: Path, data: bytes) -> None:
    """``imp/a.bin`` registered with ``add`` from ``data`` and a license, as a reviewer left it."""
    write(project / "data", {"a.bin": data})
    path = project / "data" / "a.bin"
    registry = registry_mod.load(project)
    ingest.add(store, registry, path, name="imp/a.bin", kind="fixture", extra={"license": "MIT"})


def test_a_reviewed_record_with_the_same_bytes_is_kept_as_it_is(
    store: Store, project: Path
) -> None:
    _reviewed(store, project, b"a")
    _, done = run_import(store, project, _sums(project / "data", {"a.bin": b"a"}))
    assert done.kept == ("imp/a.bin",)
    record = registry_mod.load(project).get("imp/a.bin")
    assert record.license == "MIT"
    assert record.metadata is None  # nothing of the manifest overwrote the reviewed record


def test_a_file_changed_since_it_was_planned_is_refused(store: Store, project: Path) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a"})
    planned = plan(project, manifest)
    (project / "data" / "a.bin").write_bytes(b"b")  # after the check, before registration
    with pytest.raises(IntegrityError, match="changed while it was registered"):
        register(
            store,
            registry_mod.load(project),
            planned,
            LocalOrigin(project, project / "data"),
            family="imp",
        )
    assert family_doc(project) == {}


def test_replace_rewrites_what_the_manifest_states_and_keeps_the_rest(
    store: Store, project: Path
) -> None:
    _reviewed(store, project, b"old")
    manifest = _sums(project / "data", {"a.bin": b"new"})
    _, done = run_import(store, project, manifest, replace=True)
    assert [r.name for r in done.written] == ["imp/a.bin"]
    record = registry_mod.load(project).get("imp/a.bin")
    assert record.license == "MIT"  # the manifest says nothing of it: the reviewed one stays
    assert record.object.hex == hashlib.sha256(b"new").hexdigest()
    assert record.metadata is not None and "imported_from" in record.metadata


def test_strict_refuses_an_absent_file_or_an_orphan(project: Path) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a", "gone.bin": b"g"})
    (project / "data" / "gone.bin").unlink()
    with pytest.raises(ImportRefusedError, match=r"1 listed but absent \(gone\.bin\)"):
        refuse_unaccounted(plan(project, manifest))
    refuse_unaccounted(plan(project, manifest), gaps=True)  # declared as gaps: accounted for
    (project / "data" / "gone.bin").write_bytes(b"g")
    (project / "data" / "stray.bin").write_bytes(b"s")
    with pytest.raises(ImportRefusedError, match=r"1 orphan\(s\) present but not listed"):
        refuse_unaccounted(plan(project, manifest), gaps=True)


def test_strict_names_a_few_files_and_counts_the_rest(project: Path) -> None:
    manifest = _sums(project / "data", {"a.bin": b"a"})
    write(project / "data", {f"stray{i}.bin": b"s" for i in range(7)})
    with pytest.raises(ImportRefusedError, match=r"7 orphan\(s\).*stray4\.bin, \.\.\. and 2 more"):
        refuse_unaccounted(plan(project, manifest))
