"""``import --package NAME==VERSION`` alone: the installed distribution's own RECORD as the
manifest, package sources pinned at that version. A real installed wheel of this environment
(certifi, which ships a data file), and a distribution installed here by hand for the hostile
cases (a RECORD is the installer's to write; these tests write it as an installer does)."""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import metadata
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support.cli import run
from tests.support.importing import registered

CERTIFI = metadata.version("certifi")
PIN = f"certifi=={CERTIFI}"
WHEEL = f"certifi-{CERTIFI}-py3-none-any.whl"
DIST_DIGEST = "sha256:" + "ab" * 32
DATA = b"tiny data\n" * 30


def record_hash(data: bytes) -> str:
    """RECORD's form: sha256= and the digest in URL-safe base64 without padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def install(site: Path, files: dict[str, bytes], *, record_rows: list[str] | None = None) -> None:
    """Lay out tinydata 1.0.0 in ``site`` as an installer does: its files, its .dist-info and
    the RECORD listing each file with its hash and size (``record_rows``: instead)."""
    info = site / "tinydata-1.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinydata\nVersion: 1.0.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    (info / "INSTALLER").write_text("pip\n")
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(f"{rel},{record_hash(data)},{len(data)}")
    rows += [
        f"tinydata-1.0.0.dist-info/INSTALLER,{record_hash(b'pip' + bytes([10]))},4",
        "tinydata/__pycache__/x.cpython-311.pyc,,",
        f"../../../bin/tiny,{record_hash(b'#!')},2",
        "tinydata-1.0.0.dist-info/RECORD,,",
    ]
    (info / "RECORD").write_text("\n".join(record_rows or rows) + "\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    install(folder, {"tinydata/data/table.bin": DATA, "tinydata/data/b.txt": b"b\n"})
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_an_installed_wheels_record_imports_as_package_sources_and_verifies(
    project: Path, store: Store
) -> None:
    code, out, err = run(
        "import", "--package", PIN, "--family", "cert", "--include", "*.pem",
        "--dist-digest", DIST_DIGEST, "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "installed" and [a["path"] for a in doc["accepted"]] == [
        "certifi/cacert.pem"
    ]
    reg = registry_mod.load(project)
    record = reg.get("cert/certifi/cacert.pem")
    assert record.source.to_json() == {
        "type": "package",
        "requirement": PIN,
        "file": WHEEL,
        "file_digest": DIST_DIGEST,
        "path": "certifi/cacert.pem",
    }
    import certifi

    assert record.object.hex == hashlib.sha256(Path(certifi.where()).read_bytes()).hexdigest()
    [result] = verify_names(store, reg, ["cert/certifi/cacert.pem"])
    assert result.status is Status.VERIFIED


@pytest.mark.usefixtures("store")
def test_the_distribution_digest_is_read_from_the_projects_uv_lock(project: Path) -> None:
    (project / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "certifi"\n'
        f'version = "{CERTIFI}"\nwheels = [\n'
        f'    {{ url = "https://example.org/p/{WHEEL}", hash = "{DIST_DIGEST}", size = 1234 }},\n'
        "]\n"
    )
    code, _, err = run("import", "--package", PIN, "--family", "cert", "--include", "*.pem")
    assert code == 0, err
    source = registry_mod.load(project).get("cert/certifi/cacert.pem").source.to_json()
    assert (source["file"], source["file_digest"], source["file_size"]) == (
        WHEEL,
        DIST_DIGEST,
        1234,
    )


@pytest.mark.usefixtures("store", "project")
def test_an_unknown_distribution_digest_is_a_clear_error() -> None:
    code, _, err = run("import", "--package", PIN, "--family", "cert", "--include", "*.pem")
    assert code == 2 and f"the SHA-256 of {WHEEL}" in err and "--dist-digest" in err


@pytest.mark.usefixtures("store", "project")
def test_another_version_than_the_installed_one_is_refused() -> None:
    code, _, err = run("import", "--package", "certifi==0.0.1", "--family", "cert")
    assert code == 2 and f"certifi {CERTIFI} is installed, not 0.0.1" in err
    assert f"--package certifi=={CERTIFI}" in err and "Traceback" not in err
    code, _, err = run("import", "--package", "no-such-dist-here==1.0", "--family", "x")
    assert code == 2 and "is not installed" in err


@pytest.mark.usefixtures("store", "site", "project")
def test_rows_that_cannot_be_a_package_source_are_named_not_imported() -> None:
    args = ["import", "--package", "tinydata==1.0.0", "--family", "tiny"]
    code, out, err = run(*args, "--dist-digest", DIST_DIGEST)
    assert code == 0, err
    assert "imported 2 new record(s)" in out
    for path, why in (
        ("INSTALLER", "written by the installer"),
        ("x.cpython-311.pyc", "no hash"),
        ("../../../bin/tiny", "outside the distribution's folder"),
    ):
        assert any(path in line and why in line for line in err.splitlines()), (path, err)
    code, _, err = run(*args, "--dist-digest", DIST_DIGEST, "--strict", "--replace")
    assert code == 1 and "found but not verified" in err


@pytest.mark.usefixtures("store")
def test_a_record_with_a_wrong_hash_is_refused_naming_the_file(site: Path, project: Path) -> None:
    (site / "tinydata" / "data" / "table.bin").write_bytes(DATA[::-1])
    code, _, err = run(
        "import", "--package", "tinydata==1.0.0", "--family", "tiny", "--dist-digest", DIST_DIGEST
    )
    assert code == 1 and "tinydata/data/table.bin" in err and "sha256 of the bytes" in err
    assert "RECORD line" in err
    assert not [n for n in registered(project, "tiny") if n.endswith("table.bin")]


@pytest.mark.usefixtures("store", "project")
def test_a_malformed_record_row_is_an_error_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "site2"
    install(folder, {}, record_rows=["tinydata/a.bin,sha256=%%%,3"])
    monkeypatch.syspath_prepend(str(folder))
    code, _, err = run(
        "import", "--package", "tinydata==1.0.0", "--family", "t", "--dist-digest", DIST_DIGEST
    )
    assert code == 2 and "RECORD line 1" in err and "tinydata/a.bin" in err
