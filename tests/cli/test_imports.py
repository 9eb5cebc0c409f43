"""``fixture-store import``: exit codes, the report, --dry-run, --json, format detection."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fixture_store.objects.store import Store
from tests.support.cli import run
from tests.support.importing import family_doc, write


def _project_with_sums(project: Path) -> None:
    write(project / "data", {"a.bin": b"a", "b.bin": b"b", "stray.bin": b"s"})
    lines = [
        f"{hashlib.sha256(d).hexdigest()}  {n}\n"
        for n, d in (("a.bin", b"a"), ("b.bin", b"b"), ("gone.bin", b"g"))
    ]
    (project / "data" / "SHA256SUMS").write_text("".join(lines))


@pytest.mark.usefixtures("store")
def test_import_registers_and_reports_absent_files_and_orphans(project: Path) -> None:
    _project_with_sums(project)
    code, out, err = run("import", "data/SHA256SUMS", "--family", "imp")
    assert code == 0, err
    assert "imported 2 new record(s), 0 unchanged, 0 gap(s) from data/SHA256SUMS (sha256sum)" in out
    assert "absent: 1 (gone.bin); not registered (--gaps declares them)" in err
    assert "orphans: 1 (stray.bin)" in err
    assert set(family_doc(project)["records"]) == {"imp/a.bin", "imp/b.bin"}


def test_dry_run_registers_nothing_and_json_lists_the_plan(store: Store, project: Path) -> None:
    _project_with_sums(project)
    code, out, _ = run(
        "import", "sha256sum", "data/SHA256SUMS", "--family", "imp", "--dry-run", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert [a["path"] for a in doc["accepted"]] == ["a.bin", "b.bin"]
    assert doc["absent"] == ["gone.bin"] and doc["orphans"] == ["stray.bin"]
    assert doc["imported"] is None
    assert family_doc(project) == {}
    assert list(store.iter_objects()) == []


@pytest.mark.usefixtures("store")
def test_gaps_flag_declares_the_absent_files(project: Path) -> None:
    _project_with_sums(project)
    code, out, _ = run("import", "data/SHA256SUMS", "--family", "imp", "--gaps", "--json")
    assert code == 0
    assert json.loads(out)["imported"]["gaps"] == ["imp/gone.bin"]
    assert "gap" in family_doc(project)["records"]["imp/gone.bin"]


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("gaps", [(), ("--gaps",)])
def test_the_dry_run_text_says_what_the_import_then_does(project: Path, gaps: tuple[str]) -> None:
    """``--dry-run`` says, in words, what the same import then does: how many files it
    imports, how many gaps it declares and what becomes of the absent files (as the --json
    plans agree)."""
    _project_with_sums(project)
    args = ("import", "data/SHA256SUMS", "--family", "imp", *gaps)
    code, dry, dry_err = run(*args, "--dry-run")
    assert code == 0, dry_err
    assert family_doc(project) == {}
    code, real, real_err = run(*args)
    assert code == 0, real_err
    declared = len(family_doc(project)["records"]) - 2
    assert declared == (1 if gaps else 0)
    assert "imported 2 new record(s), 0 unchanged" in real and f"{declared} gap(s)" in real
    assert f"would import 2 file(s) and declare {declared} gap(s) from data/SHA256SUMS" in dry
    fate = "declared as gaps" if gaps else "not registered (--gaps declares them)"
    assert f"absent: 1 (gone.bin); {fate}" in real_err
    would = "would be declared as gaps (--gaps)" if gaps else fate
    assert f"absent: 1 (gone.bin); {would}" in dry_err


@pytest.mark.usefixtures("store")
def test_a_mismatch_exits_1_and_registers_nothing(project: Path) -> None:
    _project_with_sums(project)
    (project / "data" / "b.bin").write_bytes(b"changed")
    code, _, err = run("import", "data/SHA256SUMS", "--family", "imp")
    assert code == 1
    assert "data/SHA256SUMS line 2: b.bin: sha256 of the bytes is" in err
    assert "nothing was stored or registered" in err
    assert "Traceback" not in err
    assert family_doc(project) == {}
    code, out, _ = run("import", "data/SHA256SUMS", "--family", "imp", "--json")
    assert code == 1
    assert [m["path"] for m in json.loads(out)["mismatched"]] == ["b.bin"]


@pytest.mark.usefixtures("store")
def test_a_malformed_manifest_exits_2_naming_the_line(project: Path) -> None:
    write(project / "data", {"a.bin": b"a"})
    (project / "data" / "SHA256SUMS").write_text(f"{'0' * 64}  ../a.bin\n")
    code, _, err = run("import", "sha256sum", "data/SHA256SUMS", "--family", "imp")
    assert code == 2
    assert "data/SHA256SUMS line 1: member path '../a.bin'" in err


@pytest.mark.usefixtures("store")
def test_an_unknown_format_and_a_bad_argument_count_are_usage_errors(project: Path) -> None:
    (project / "notes.txt").write_text("hello there\n")
    code, _, err = run("import", "notes.txt", "--family", "imp")
    assert code == 2 and "cannot tell the format" in err
    code, _, err = run("import", "a", "b", "c", "--family", "imp")
    assert code == 2 and "[FORMAT] MANIFEST" in err
    code, _, err = run("import", "yaml", "notes.txt", "--family", "imp")
    assert code == 2 and "unknown manifest format 'yaml'" in err


@pytest.mark.usefixtures("store", "project")
def test_package_needs_the_pinned_distribution() -> None:
    code, _, err = run(
        "import", "pooch", "pkg/_registry.py", "--family", "imp", "--package", "pkg==1.0"
    )
    assert code == 2 and "--dist FILE and --dist-digest" in err


@pytest.mark.parametrize("extra", [(), ("--dry-run",)])
def test_strict_fails_on_absent_files_and_orphans_and_registers_nothing(
    store: Store, project: Path, extra: tuple[str, ...]
) -> None:
    _project_with_sums(project)
    code, _, err = run("import", "data/SHA256SUMS", "--family", "imp", "--strict", *extra)
    assert code == 1, err
    assert "data/SHA256SUMS does not account for every file (--strict)" in err
    assert "1 listed but absent (gone.bin)" in err
    assert "1 orphan(s) present but not listed (stray.bin)" in err
    assert "nothing was stored or registered" in err and "fix:" in err
    assert "Traceback" not in err
    assert family_doc(project) == {}
    assert list(store.iter_objects()) == []


@pytest.mark.usefixtures("store")
def test_strict_json_prints_the_plan_it_refused(project: Path) -> None:
    _project_with_sums(project)
    (project / "data" / "gone.bin").write_bytes(b"g")
    code, out, _ = run("import", "data/SHA256SUMS", "--family", "imp", "--strict", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["absent"] == [] and doc["orphans"] == ["stray.bin"]
    assert doc["imported"] is None


@pytest.mark.usefixtures("store")
def test_strict_passes_when_every_file_is_accounted_for(project: Path) -> None:
    _project_with_sums(project)
    (project / "data" / "stray.bin").unlink()
    code, out, err = run("import", "data/SHA256SUMS", "--family", "imp", "--strict", "--gaps")
    assert code == 0, err
    assert "imported 2 new record(s), 0 unchanged, 1 gap(s)" in out
    assert set(family_doc(project)["records"]) == {"imp/a.bin", "imp/b.bin", "imp/gone.bin"}


@pytest.mark.usefixtures("store")
def test_orphans_ignore_and_the_imported_manifest_are_never_orphans(project: Path) -> None:
    """A README beside the data, matched by ``orphans-ignore`` in ``[tool.fixture-store]``, and
    the manifest the records were imported from are no orphans: not for ``import --strict``,
    ``status`` or ``--fixture-store-complete``; the key is known to the remote configuration."""
    _project_with_sums(project)
    (project / "data" / "stray.bin").unlink()
    (project / "data" / "README.md").write_text("where these files come from\n")
    code, _, err = run("import", "data/SHA256SUMS", "--family", "imp", "--strict", "--gaps")
    assert code == 1 and "(README.md)" in err
    (project / "pyproject.toml").write_text(
        '[tool.fixture-store]\norphans-ignore = ["*/README.md"]\n'
    )
    code, out, err = run("import", "data/SHA256SUMS", "--family", "imp", "--strict", "--gaps")
    assert code == 0, err
    code, out, err = run("status", "--json")
    assert code == 0 and json.loads(out)["orphans"] == [], out + err
    assert run("remote", "list")[0] == 0
    (project / "data" / "notes.txt").write_text("not ignored\n")
    assert [o["path"] for o in json.loads(run("status", "--json")[1])["orphans"]] == [
        "data/notes.txt"
    ]
    (project / "pyproject.toml").write_text('[tool.fixture-store]\norphans-ignore = "*.md"\n')
    code, _, err = run("status")
    assert code == 2 and "orphans-ignore must be a list of glob patterns" in err
    assert "pyproject.toml" in err


@pytest.mark.usefixtures("store")
def test_dry_run_builds_the_records_of_declared_gaps_too(project: Path) -> None:
    """A gap's record is built and read back by --dry-run as by the import: a tolerance that
    names no array of the entry is refused by both, naming the manifest and the entry."""
    entry = {
        "sha256": "ab" * 32,
        "arrays": {"x": {"dtype": "float32", "shape": [2]}},
        "tolerance": {"metric": "max_abs", "max": 1e-6, "per_array": {"nope": {"max": 1e-3}}},
    }
    (project / "data").mkdir()
    (project / "data" / "manifest.json").write_text(
        json.dumps({"format_version": 1, "files": {"gone.npz": entry}})
    )
    seen = set()
    for extra in (("--dry-run",), ()):
        code, _, err = run("import", "data/manifest.json", "--family", "imp", "--gaps", *extra)
        assert code == 2, err
        seen.add(err)
    (err,) = seen
    assert "data/manifest.json: 'gone.npz'" in err and "nope" in err
    assert "provenance/" not in err
    assert family_doc(project) == {}
