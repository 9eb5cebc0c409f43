"""Links and rows the docs promise to report (issue 34 class 8): an LFS object folder that is a
link is refused, never followed; a RECORD row without a hash is reported; ``expectations add``
prints its diff as lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from tests.cli.test_expectations import NAME, _runs, fixtures  # noqa: F401 - the fixture
from tests.importers.test_gitlfs import WEIGHTS, repo  # noqa: F401 - the fixture
from tests.importers.test_wheelrecord import IMG, record_text
from tests.support.cli import run
from tests.support.importing import write


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("linked", [".git/lfs/objects", ".git/lfs"])
def test_an_lfs_object_folder_that_is_a_link_out_is_refused_not_followed(
    repo: Path,  # noqa: F811
    project: Path,
    tmp_path: Path,
    linked: str,
) -> None:
    outside = tmp_path / "outside"
    shutil.move(repo / linked, outside)  # the objects now live outside the repository
    (repo / linked).symlink_to(outside, target_is_directory=True)
    code, out, err = run("import", "lfsrepo", "--family", "lfs", "--json")
    assert code == 2, out + err
    assert f"{repo / linked} is a symbolic link" in err and "Traceback" not in err
    assert "lfs/data/model.bin" not in registry_mod.load(project).names()
    assert WEIGHTS  # the bytes were there to be read through the link


@pytest.mark.usefixtures("store")
def test_a_record_row_without_a_hash_is_reported_with_its_line(project: Path) -> None:
    files = {"tinydata/data/img.png": IMG, "tinydata/data/extra.txt": b"x"}
    write(project / "unpacked", files)
    info = project / "unpacked" / "tinydata-1.0.0.dist-info"
    info.mkdir()
    rows = record_text({"tinydata/data/img.png": IMG})
    rows += "tinydata/data/extra.txt,,\ntinydata/__pycache__/m.cpython-311.pyc,,\n"
    rows += "tinydata-1.0.0.dist-info/RECORD,,\n"
    (info / "RECORD").write_text(rows)
    code, out, err = run(
        "import", "unpacked/tinydata-1.0.0.dist-info/RECORD", "--family", "tiny", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    unverified = {u["path"]: u for u in doc["unverified"]}
    assert set(unverified) == {"tinydata/data/extra.txt", "tinydata/__pycache__/m.cpython-311.pyc"}
    assert all("no hash" in u["reason"] and "line" in u["where"] for u in unverified.values())
    assert doc["orphans"] == []  # said once, as unverified
    assert [a["path"] for a in doc["accepted"]] == ["tinydata/data/img.png"]


def test_expectations_add_prints_its_diff_as_lines(fixtures: object) -> None:  # noqa: F811
    _runs(fixtures)  # type: ignore[arg-type]
    code, out, _ = run("expectations", "add", NAME, "--env", "runtime:jax", "--from-run")
    assert code == 0, out
    assert "\\n" not in out
    lines = out.splitlines()
    assert any(line.startswith('+      "runtime:jax": {') for line in lines)
