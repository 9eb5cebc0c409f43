"""Every file a command writes at a path a user names goes through the one output primitive
(DESIGN 18, ``fixture_store.objects.outputs``): never inside the store, never through a link at
its last component, written under a temporary name and renamed.

The breaks of issue 34 (class 1): ``fetch NAME --tensor KEY --output FILE`` opened FILE with a
plain ``open("wb")``, so a link to a store object, or the object's own path, was overwritten and
a new file could be made anywhere inside the store. The walk at the end holds every path option
of every command: it is written by the primitive (its type is ``OutputPath``) or only read."""

from __future__ import annotations

import os
from pathlib import Path

import click
import numpy as np
import pytest

from fixture_store.cli._common import OutputPath
from fixture_store.cli.app import COMMANDS, load_command
from fixture_store.errors import UsageError
from fixture_store.objects import outputs
from fixture_store.objects.store import Store
from tests.support.cli import run

ARRAY = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.fixture
def stored(project: Path, store: Store) -> Path:  # noqa: ARG001 - the store the CLI uses
    """``fam/a``, an NPZ reference in the store; returns its object's path."""
    np.savez(project / "a.npz", w=ARRAY)
    assert run("add", "a.npz", "--name", "fam/a", "--kind", "fixture")[0] == 0
    code, out, _ = run("path", "fam/a")
    assert code == 0
    return Path(out.strip())


def _intact(obj: Path, before: bytes) -> None:
    assert obj.read_bytes() == before
    code, _, err = run("verify", "--full")
    assert code == 0, err


def test_a_link_to_a_store_object_is_replaced_never_written_through(
    project: Path, stored: Path
) -> None:
    before = stored.read_bytes()
    link = project / "w.npy"
    link.symlink_to(stored)
    code, _, err = run("fetch", "fam/a", "--tensor", "w", "--output", str(link))
    assert code == 0, err
    assert not link.is_symlink()
    np.testing.assert_array_equal(np.load(link), ARRAY)
    _intact(stored, before)


def test_a_hard_link_to_a_store_object_keeps_the_object_bytes(project: Path, stored: Path) -> None:
    before = stored.read_bytes()
    hard = project / "w.npy"
    try:
        os.link(stored, hard)
    except OSError:
        pytest.skip("no hard links on this file system")
    assert run("fetch", "fam/a", "--tensor", "w", "--output", str(hard))[0] == 0
    _intact(stored, before)


@pytest.mark.parametrize("where", ["the-object", "new-in-store", "through-a-folder-link"])
def test_a_path_inside_the_store_is_refused_in_one_line(
    project: Path, store: Store, stored: Path, where: str
) -> None:
    before = stored.read_bytes()
    if where == "the-object":
        target = stored
    elif where == "new-in-store":
        target = store.root / "objects" / "new" / "w.npy"
    else:
        (project / "out").symlink_to(stored.parent)
        target = project / "out" / "w.npy"
    code, _, err = run("fetch", "fam/a", "--tensor", "w", "--output", str(target))
    assert code == 2, err
    assert "is inside the store" in err and "fix:" in err and "Traceback" not in err
    assert not (store.root / "objects" / "new").exists()
    assert not (stored.parent / "w.npy").exists()
    _intact(stored, before)


@pytest.mark.parametrize(
    "args",
    [
        ("fetch", "fam/a", "--report", "{}"),
        ("report", "--html", "{}"),
    ],
)
@pytest.mark.usefixtures("stored")
def test_every_written_option_refuses_the_store(store: Store, args: tuple[str, ...]) -> None:
    inside = store.root / "objects" / "report-here"
    code, _, err = run(*(a.replace("{}", str(inside)) for a in args))
    assert code == 2, err
    assert "is inside the store" in err and not inside.exists()


@pytest.mark.usefixtures("project")
@pytest.mark.parametrize("where", ["the-store", "inside", "above"])
def test_a_scratch_folder_is_never_the_store_nor_holds_it(store: Store, where: str) -> None:
    """regenerate empties its --scratch folder first: the store, a folder in it or one above
    it would be deleted."""
    scratch = {
        "the-store": store.root,
        "inside": store.root / "objects",
        "above": store.root.parent,
    }[where]
    before = sorted(p.name for p in store.root.iterdir())
    code, _, err = run("regenerate", "any-stage", "--scratch", str(scratch))
    assert code == 2, err
    assert "the store" in err and "fix:" in err and "Traceback" not in err
    assert sorted(p.name for p in store.root.iterdir()) == before


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = outputs.Target(tmp_path / "out.json", (tmp_path / "store",))
    target.write_text("old")

    def fail() -> None:
        with target.writing() as out:
            out.write(b"half")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail()
    assert (tmp_path / "out.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_the_check_walks_up_from_the_opened_folder(tmp_path: Path) -> None:
    """A folder reached through a link that lands below the store is inside it."""
    store = tmp_path / "store"
    (store / "a" / "b").mkdir(parents=True)
    (tmp_path / "elsewhere").symlink_to(store / "a")
    with pytest.raises(UsageError, match="is inside the store"):
        outputs.Target(tmp_path / "elsewhere" / "b" / "x", (store,)).write_bytes(b"x")
    outputs.Target(tmp_path / "beside" / "x", (store,)).write_bytes(b"x")
    assert (tmp_path / "beside" / "x").read_bytes() == b"x"


# -- the walk: every path option of every command ------------------------------------------------
# Path options a command only reads (or, for init, the project it makes): (command, parameter).
READ_ONLY: dict[tuple[str, str], str] = {
    ("add", "paths"): "the files to register, read",
    ("add", "metadata_file"): "a metadata file, read",
    ("attest", "outputs"): "the candidate's outputs, read",
    ("attest", "subjects"): "the candidate files, hashed",
    ("verify-attestation", "envelope"): "the certificate, read",
    ("verify-attestation", "candidates"): "the candidate files, hashed",
    ("regenerate-summary", "reports"): "the stage reports, read",
    ("remote gc", "keep_registries"): "other projects' registries, read",
    ("init", "project"): "the project folder: init writes the registry there, through the "
    "registry's own writer",
}


def _path_params() -> dict[tuple[str, str], click.Parameter]:
    found: dict[tuple[str, str], click.Parameter] = {}

    def walk(cmd: click.Command, name: str) -> None:
        if isinstance(cmd, click.Group):
            for sub, command in cmd.commands.items():
                walk(command, f"{name} {sub}")
            return
        for param in cmd.params:
            if isinstance(param.type, click.Path):
                found[(name, param.name or "")] = param

    for name in COMMANDS:
        walk(load_command(name), name)
    return found


def test_every_path_option_is_written_by_the_primitive_or_only_read() -> None:
    params = _path_params()
    unclaimed = sorted(
        f"{cmd} {p.opts}"
        for (cmd, name), p in params.items()
        if not isinstance(p.type, OutputPath) and (cmd, name) not in READ_ONLY
    )
    assert not unclaimed, (
        "these path options are neither an OutputPath (written by the output primitive, "
        f"fixture_store.objects.outputs) nor listed as read-only: {unclaimed}"
    )
    stale = sorted(set(READ_ONLY) - set(params))
    assert not stale, f"READ_ONLY names options that are gone: {stale}"
    written = {k for k, p in params.items() if isinstance(p.type, OutputPath)}
    assert {("fetch", "output"), ("attest", "output"), ("report", "html_dir")} <= written
    assert ("regenerate", "scratch") in written  # emptied first: never the store, nor above it
    assert not written & set(READ_ONLY)


def test_an_output_option_hands_the_command_a_target_that_stays_out_of_the_store(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    @click.command()
    @click.option("--out", type=OutputPath())
    def cmd(out: outputs.Target) -> None:
        click.echo(f"{type(out).__name__} {[str(p) for p in out.outside]}")

    result = CliRunner().invoke(cmd, ["--out", str(tmp_path / "x")])
    default_store = str((tmp_path / "default-store").resolve())  # conftest's FIXTURE_STORE_DIR
    assert result.output.strip() == f"Target {[default_store]}"
