"""Git LFS: the pointers of a real git repository made here, imported without downloading
anything, the bytes from its LFS object folder.

git-lfs itself is not needed (nor assumed installed): the pointer files and the object folder
are written the way git-lfs lays them out (``.git/lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>``),
and the pointers are committed with plain git, as ``git lfs track`` + ``git add`` would."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.importers import gitlfs
from fixture_store.importers.entry import ManifestError
from fixture_store.objects.store import Store
from fixture_store.verify import Status, verify_names
from tests.support import gitoracle
from tests.support.cli import run

WEIGHTS = b"\x07weights" * 500
TABLE = b"col\n1\n2\n" * 40
MISSING = b"never fetched" * 10


def pointer(data: bytes) -> bytes:
    oid = hashlib.sha256(data).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n".encode()
    )


def put_object(repo: Path, data: bytes) -> Path:
    oid = hashlib.sha256(data).hexdigest()
    path = repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def repo(project: Path) -> Path:
    """A git repository inside the project: two pointers whose objects are fetched, one whose
    object is not, a plain file, all committed."""
    root = project / "lfsrepo"
    (root / "data" / "sub").mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitattributes").write_text(
        "*.bin filter=lfs diff=lfs merge=lfs -text\n"
        "data/sub/*.csv filter=lfs diff=lfs merge=lfs -text\n"
    )
    (root / "data" / "model.bin").write_bytes(pointer(WEIGHTS))
    (root / "data" / "sub" / "table.csv").write_bytes(pointer(TABLE))
    (root / "data" / "later.bin").write_bytes(pointer(MISSING))
    (root / "README.md").write_text("plain file\n")
    put_object(root, WEIGHTS)
    put_object(root, TABLE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "pointers")
    return root


@pytest.mark.usefixtures("store")
def test_pointers_import_with_bytes_from_the_object_folder_and_verify(
    repo: Path, project: Path, store: Store
) -> None:
    code, out, err = run("import", "lfsrepo", "--family", "lfs", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "git-lfs"
    assert sorted(a["path"] for a in doc["accepted"]) == ["data/model.bin", "data/sub/table.csv"]
    assert doc["absent"] == ["data/later.bin"]
    reg = registry_mod.load(project)
    record = reg.get("lfs/data/model.bin")
    assert (record.object.hex, record.object.size) == (
        hashlib.sha256(WEIGHTS).hexdigest(),
        len(WEIGHTS),
    )
    assert record.source.to_json() == {"type": "local", "path": "lfsrepo/data/model.bin"}
    names = ["lfs/data/model.bin", "lfs/data/sub/table.csv"]
    assert {r.status for r in verify_names(store, reg, names)} == {Status.VERIFIED}
    assert git(repo, "status", "--porcelain") == ""  # nothing in the repository changed


@pytest.mark.usefixtures("store")
def test_an_absent_object_is_a_gap_that_keeps_its_digest_and_size(
    repo: Path, project: Path, store: Store
) -> None:
    code, _, err = run("import", "lfsrepo", "--family", "lfs", "--gaps")
    assert code == 0, err
    raw = json.loads((project / "provenance" / "lfs.json").read_text())["records"][
        "lfs/data/later.bin"
    ]
    assert raw["digest"] == "sha256:" + hashlib.sha256(MISSING).hexdigest()
    assert raw["size"] == len(MISSING) and "gap" in raw
    [result] = verify_names(store, registry_mod.load(project), ["lfs/data/later.bin"])
    assert result.status is Status.GAP and result.expected is not None
    assert result.expected.size == len(MISSING)
    # git lfs fetch brings the object; importing again with --replace fills the gap
    put_object(repo, MISSING)
    code, _, err = run("import", "lfsrepo", "--family", "lfs", "--replace")
    assert code == 0, err
    [result] = verify_names(store, registry_mod.load(project), ["lfs/data/later.bin"])
    assert result.status is Status.VERIFIED


@pytest.mark.usefixtures("store")
def test_a_pointer_whose_object_has_another_size_is_refused(repo: Path, project: Path) -> None:
    text = (repo / "data" / "model.bin").read_text().replace(f"size {len(WEIGHTS)}", "size 7")
    (repo / "data" / "model.bin").write_text(text)
    code, _, err = run("import", "lfsrepo", "--family", "lfs")
    assert code == 1 and "data/model.bin" in err and "the manifest says 7" in err
    assert not (project / "provenance" / "lfs.json").exists()


@pytest.mark.usefixtures("store")
def test_an_object_whose_bytes_are_not_its_oid_is_refused(repo: Path) -> None:
    put_object(repo, WEIGHTS).write_bytes(WEIGHTS[::-1])
    code, _, err = run("import", "lfsrepo", "--family", "lfs")
    assert code == 1 and "data/model.bin" in err and "sha256 of the bytes" in err


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 3\n", "is not sha256:"),
        (
            "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize -3\n",
            "not a byte count",
        ),
        (
            "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 3",
            "newline",
        ),
        ("version 2\noid sha256:" + "a" * 64 + "\nsize 3\n", "first line"),
    ],
)
@pytest.mark.usefixtures("store")
def test_a_malformed_pointer_is_an_error_naming_the_file(repo: Path, text: str, why: str) -> None:
    (repo / "data" / "model.bin").write_text(text)
    code, _, err = run("import", "lfsrepo", "--family", "lfs")
    assert code == 2 and "model.bin" in err and why in err and "Traceback" not in err


def test_parse_pointer_reads_the_spec_form() -> None:
    oid, size = gitlfs.parse_pointer(pointer(b"abc"), "f")
    assert (oid, size) == (hashlib.sha256(b"abc").hexdigest(), 3)
    with pytest.raises(ManifestError, match="f line 2"):
        gitlfs.parse_pointer(b"version https://git-lfs.github.com/spec/v1\nnospace\n", "f")


@pytest.mark.parametrize(
    ("repeated", "line"),
    [
        ("oid sha256:" + "b" * 64, 3),  # which oid is the file's? refused, not the last taken
        ("size 4", 4),
        ("version https://git-lfs.github.com/spec/v1", 2),
    ],
    ids=["oid", "size", "version"],
)
def test_a_pointer_with_a_repeated_key_is_refused_naming_the_line(repeated: str, line: int) -> None:
    lines = pointer(b"abc").decode().splitlines()
    lines.insert(line - 1, repeated)
    data = ("\n".join(lines) + "\n").encode()
    with pytest.raises(ManifestError, match=rf"f line {line}") as caught:
        gitlfs.parse_pointer(data, "f")
    assert repeated in str(caught.value)


@pytest.mark.usefixtures("store")
def test_ls_files_output_imports_the_same_files(repo: Path) -> None:
    lines = [
        f"{hashlib.sha256(d).hexdigest()} - {p}\n"
        for p, d in (
            ("data/model.bin", WEIGHTS),
            ("data/sub/table.csv", TABLE),
            ("data/later.bin", MISSING),
        )
    ]
    (repo / "lfs-files.txt").write_text("".join(lines))
    code, out, err = run("import", "git-lfs", "lfsrepo/lfs-files.txt", "--family", "lfs", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert sorted(a["path"] for a in doc["accepted"]) == ["data/model.bin", "data/sub/table.csv"]
    assert doc["absent"] == ["data/later.bin"]
    (repo / "bad.txt").write_text("model.bin\n")
    code, _, err = run("import", "git-lfs", "lfsrepo/bad.txt", "--family", "lfs")
    assert code == 2 and "bad.txt line 1" in err and "ls-files --long" in err


@pytest.mark.usefixtures("store")
def test_a_checked_out_file_is_verified_by_its_object_or_named(repo: Path) -> None:
    (repo / "data" / "model.bin").write_bytes(WEIGHTS)  # git lfs checkout: the bytes, not a pointer
    (repo / "data" / "other.bin").write_bytes(b"tracked, never stored by git-lfs")
    code, out, err = run("import", "lfsrepo", "--family", "lfs", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "data/model.bin" in [a["path"] for a in doc["accepted"]]
    assert [u["path"] for u in doc["unverified"]] == ["data/other.bin"]


@pytest.mark.usefixtures("store")
def test_a_gitattributes_that_is_a_fifo_is_refused_not_waited_on(repo: Path) -> None:
    import os

    (repo / ".gitattributes").unlink()
    os.mkfifo(repo / ".gitattributes")
    code, _, err = run("import", "git-lfs", "lfsrepo", "--family", "lfs")
    assert code == 2 and ".gitattributes" in err and "not a regular file" in err
    (repo / ".gitattributes").unlink()
    (repo / ".gitattributes").write_text("*.bin filter=lfs\n")
    code, _, err = run("import", "lfsrepo", "--family", "lfs", "--root", "lfsrepo")
    assert code == 2 and "--root" in err


@pytest.mark.usefixtures("repo", "project", "store")
def test_fetch_from_a_pointer_says_to_pull_the_bytes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fresh store where the working tree holds pointers: fetch names the LFS command."""
    assert run("import", "lfsrepo", "--family", "lfs")[0] == 0
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "fresh-store"))
    code, _, err = run("fetch", "lfs/data/model.bin")
    assert code == 1, err
    assert "is a Git LFS pointer to these bytes" in err and "git lfs pull" in err


HF_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)  # fmt: skip
HF_DEFAULT = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in HF_PATTERNS)
"""The ``.gitattributes`` a new Hugging Face model repository starts with."""

ATTRIBUTE_CASES = {
    "hugging-face-default-and-a-tracked-name-with-a-space": (
        # git lfs track "images/cat 1.png" appends the [[:space:]] form
        {"": HF_DEFAULT + "images/cat[[:space:]]1.png filter=lfs diff=lfs merge=lfs -text\n"},
        [
            "model.safetensors",
            "pytorch_model.bin",
            "config.json",
            "saved_model/saved_model.pb",
            "saved_model/variables/variables.data-00000-of-00001",
            "runs/events.out.tfevents.1700000000.host",
            "images/cat 1.png",
            "images/cat 2.png",
            "sub/saved_model/keras.json",
        ],
        {
            "model.safetensors",
            "pytorch_model.bin",
            "saved_model/saved_model.pb",
            "saved_model/variables/variables.data-00000-of-00001",
            "runs/events.out.tfevents.1700000000.host",
            "images/cat 1.png",
        },
    ),
    "a-later-line-unsets-or-changes-the-filter": (
        {
            "": "*.bin filter=lfs diff=lfs merge=lfs -text\nsmall.bin -filter\n"
            "tiny.bin !filter\nother.bin filter=other\n"
        },
        ["big.bin", "small.bin", "tiny.bin", "other.bin"],
        {"big.bin"},
    ),
    "a-deeper-gitattributes-overrides-a-shallower-one": (
        {"": "*.bin filter=lfs\n", "data": "*.bin -filter\nkeep/*.bin filter=lfs\n"},
        ["a.bin", "data/b.bin", "data/keep/c.bin", "data/keep/deeper/d.bin"],
        {"a.bin", "data/keep/c.bin"},
    ),
    "dataset-rules-anchors-and-folder-patterns": (
        {
            "": "data/** filter=lfs\n**/*.parquet filter=lfs\n/top.csv filter=lfs\n"
            "docs filter=lfs\nlogs/ filter=lfs\n"
        },
        [
            "data/train/0000.parquet",
            "data/README.md",
            "other/x.parquet",
            "top.csv",
            "sub/top.csv",
            "docs/guide.md",
            "logs/run.txt",
        ],
        {"data/train/0000.parquet", "data/README.md", "other/x.parquet", "top.csv"},
    ),
    "a-macro-a-quoted-pattern-and-an-ignored-negative-one": (
        {
            "": "[attr]lfs filter=lfs diff=lfs merge=lfs -text\n*.ckpt lfs\n"
            '"weights v2.pt" filter=lfs\n!*.txt filter=lfs\n'
        },
        ["a.ckpt", "weights v2.pt", "notes.txt"],
        {"a.ckpt", "weights v2.pt"},
    ),
}


def _attribute_repo(root: Path, texts: dict[str, str], files: list[str]) -> None:
    """A repository whose files are checked out as their bytes, no LFS object fetched: the
    import names each file it takes for LFS-tracked as not verified, and no other."""
    gitoracle.init(root)
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(f"bytes of {rel}\n".encode())
    for folder, text in texts.items():
        (root / folder / ".gitattributes").write_text(text)


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("case", sorted(ATTRIBUTE_CASES))
def test_the_files_taken_for_lfs_tracked_are_those_git_tracks(project: Path, case: str) -> None:
    texts, files, expected = ATTRIBUTE_CASES[case]
    root = project / "lfsrepo"
    _attribute_repo(root, texts, files)
    assert gitoracle.tracked(root, files) == expected  # git agrees with what the case says
    code, out, err = run("import", "lfsrepo", "--family", "lfs", "--json")
    assert code == 0, err
    assert {u["path"] for u in json.loads(out)["unverified"]} == expected


@pytest.mark.usefixtures("store")
def test_a_folder_of_a_repository_reads_the_gitattributes_above_it(project: Path) -> None:
    root = project / "lfsrepo"
    _attribute_repo(root, {"": "*.bin filter=lfs\nmodels/keep.bin -filter\n"}, [
        "models/w.bin", "models/keep.bin", "models/notes.md"
    ])  # fmt: skip
    assert gitoracle.tracked(root, ["models/w.bin", "models/keep.bin"]) == {"models/w.bin"}
    code, out, err = run("import", "git-lfs", "lfsrepo/models", "--family", "lfs", "--json")
    assert code == 0, err
    assert [u["path"] for u in json.loads(out)["unverified"]] == ["w.bin"]


@pytest.mark.usefixtures("store")
def test_a_gitattributes_that_is_a_link_is_refused_by_name(project: Path) -> None:
    """git does not follow a linked ``.gitattributes``; reading it would misjudge every file."""
    root = project / "lfsrepo"
    _attribute_repo(root, {"": "*.bin filter=lfs\n"}, ["data/w.bin"])
    (root / "elsewhere").write_text("*.bin -filter\n")
    (root / "data" / ".gitattributes").symlink_to(root / "elsewhere")
    code, _, err = run("import", "lfsrepo", "--family", "lfs")
    assert code == 2, err
    assert "data/.gitattributes" in err and "symbolic link" in err and "Traceback" not in err
