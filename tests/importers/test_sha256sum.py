"""sha256sum and shasum output, as the tools write it."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fixture_store.importers import sha256sum
from fixture_store.objects.store import Store
from tests.support.importing import refusal, run_import, write

FILES = {"a.bin": b"alpha" * 10, "sub/b.npy": b"not really npy"}
SHA_A = hashlib.sha256(FILES["a.bin"]).hexdigest()


def _tool(*cmd: str, cwd: Path) -> str:
    if shutil.which(cmd[0]) is None:
        pytest.fail(f"{cmd[0]} is not installed; these tests read its real output")
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize(
    "cmd",
    [
        ("sha256sum", "a.bin", "sub/b.npy"),
        ("sha256sum", "--binary", "a.bin", "sub/b.npy"),
        ("sha256sum", "--tag", "a.bin", "sub/b.npy"),
        ("shasum", "-a", "256", "a.bin", "sub/b.npy"),
        ("shasum", "-a", "256", "-b", "a.bin", "sub/b.npy"),
        ("find", ".", "-type", "f", "-name", "*.*", "-exec", "sha256sum", "{}", "+"),
    ],
)
def test_real_tool_output_imports(store: Store, project: Path, cmd: tuple[str, ...]) -> None:
    data = project / "data"
    write(data, FILES)
    listing = _tool(*cmd, cwd=data)
    manifest = project / "SHA256SUMS"
    manifest.write_text(listing)
    planned, done = run_import(store, project, manifest, root=data)
    assert planned.format == "sha256sum"
    assert sorted(r.name for r in done.written) == ["imp/a.bin", "imp/sub/b.npy"]
    assert {r.name: r.object.hex for r in done.written}["imp/a.bin"] == SHA_A


@pytest.mark.parametrize("name", ["back\\slash.bin", "new\nline.bin"])
def test_an_escaped_name_is_unescaped_then_refused_by_the_path_rules(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_bytes(b"x")
    listing = _tool("sha256sum", name, cwd=tmp_path)
    assert listing.startswith("\\")  # the tool escaped it
    where, said = refusal(lambda: sha256sum.parse(listing, "SHA256SUMS"))
    assert where == "SHA256SUMS line 1"
    assert repr(name) in said  # the name as it was meant, not as escaped


def test_the_escape_rules_give_back_the_name() -> None:
    # A name that passes the path rules once unescaped never needed escaping; check the rule.
    assert sha256sum._split(f"\\{SHA_A}  a\\\\b\\nc", "x") == ("a\\b\nc", "sha256", SHA_A)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f"{SHA_A[:-1]}g  a.bin", "not a 'HEX  name'"),
        (f"{SHA_A[:50]}  a.bin", "has 50 hex characters"),
        (f"{SHA_A}  ../a.bin", "'..' segment"),
        (f"{SHA_A}  /etc/passwd", "is absolute"),
        (f"{SHA_A} ^a.bin", "universal-newline"),
        (f"{SHA_A} Ua.bin", "bits"),
        (f"{SHA_A}  ok.bin", "listed twice"),
    ],
)
def test_hostile_lines_are_refused_naming_the_line(line: str, message: str) -> None:
    where, said = refusal(lambda: sha256sum.parse(f"{SHA_A}  ok.bin\n{line}\n", "SHA256SUMS"))
    assert re.search(message, said)
    assert where == "SHA256SUMS line 2"
