"""A wheel's RECORD as a manifest: ``path,sha256=<urlsafe base64>,size`` rows."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from fixture_store import importers
from fixture_store import registry as registry_mod
from fixture_store.importers import wheelrecord
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support.cli import run
from tests.support.importing import refusal, write

IMG = b"\x89PNG\r\n\x1a\n not quite"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def record_text(files: dict[str, bytes]) -> str:
    rows = [f"{p},sha256={b64(d)},{len(d)}" for p, d in files.items()]
    return "\n".join([*rows, "tinydata-1.0.0.dist-info/RECORD,,"]) + "\n"


def test_rows_read_as_hex_digests_and_sizes() -> None:
    entries = wheelrecord.parse(record_text({"pkg/a.bin": b"a"}), "RECORD")
    assert [(e.path, e.sha256, e.size) for e in entries] == [
        ("pkg/a.bin", hashlib.sha256(b"a").hexdigest(), 1)
    ]
    assert importers.detect("", "x-1.dist-info/RECORD") == "record"


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ("pkg/a.bin,sha256=***,1", "not URL-safe base64"),
        ("pkg/a.bin,sha256=YQ,1", "hex characters"),
        ("pkg/a.bin,md6=" + "A" * 22 + ",1", "unsupported digest algorithm 'md6'"),
        ("pkg/a.bin,sha256", "expected 3 fields"),
        (f"../bin/tool,sha256={b64(b'x')},1", ".."),
        (f"pkg/a.bin,sha256={b64(b'x')},many", "is not a number"),
    ],
)
def test_a_malformed_row_is_an_error_naming_the_line(row: str, why: str) -> None:
    where, said = refusal(
        lambda: wheelrecord.parse(f"ok/x,sha256={b64(b'x')},1\n{row}\n", "RECORD")
    )
    assert where.startswith("RECORD line 2") and why in said


@pytest.mark.usefixtures("store")
def test_an_unpacked_wheels_record_is_detected_and_its_paths_read_from_the_wheel_root(
    project: Path,
) -> None:
    """Before, a RECORD was read as none of the formats: the import could not start."""
    files = {"tinydata/data/img.png": IMG, "tinydata/data/extra.txt": b"x"}
    write(project / "unpacked", files)
    info = project / "unpacked" / "tinydata-1.0.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(record_text({"tinydata/data/img.png": IMG}))
    code, out, err = run(
        "import", "unpacked/tinydata-1.0.0.dist-info/RECORD", "--family", "tiny", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "record" and doc["orphans"] == ["tinydata/data/extra.txt"]
    source = registry_mod.load(project).get("tiny/tinydata/data/img.png").source
    assert source.to_json() == {"type": "local", "path": "unpacked/tinydata/data/img.png"}


def test_a_pinned_wheels_own_record_imports_with_package_sources(
    store: Store, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheel_name = "tinydata-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(house / wheel_name, "w") as z:
        z.writestr("tinydata/data/img.png", IMG)
        z.writestr(
            "tinydata-1.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: tinydata\nVersion: 1.0.0\n",
        )
        z.writestr(
            "tinydata-1.0.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("tinydata-1.0.0.dist-info/RECORD", record_text({"tinydata/data/img.png": IMG}))
    digest = hashlib.sha256((house / wheel_name).read_bytes()).hexdigest()
    for var, value in (
        ("PIP_CONFIG_FILE", os.devnull),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", str(house)),
    ):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("FIXTURE_STORE_PIP", raising=False)
    code, _, err = run(
        "import", "--package", "tinydata==1.0.0", "--dist", wheel_name,
        "--dist-digest", f"sha256:{digest}", "tinydata-1.0.0.dist-info/RECORD", "--family", "tiny",
    )  # fmt: skip
    assert code == 0, err
    reg = registry_mod.load(project)
    source = reg.get("tiny/tinydata/data/img.png").source.to_json()
    assert source["path"] == "tinydata/data/img.png" and source["file"] == wheel_name
    [result] = verify_names(store, reg, ["tiny/tinydata/data/img.png"])
    assert result.status is Status.VERIFIED
