"""Every registered command over a corpus of broken registries, broken stores and hostile
objects: no traceback, exit 0, 1 or 2 as documented, and a failure names what is wrong and a fix.

Commands join by being registered in ``fixture_store.cli.app.COMMANDS``: the harness iterates
that table, and a command without an entry in :data:`INVOKE` (how to call it minimally) fails
the harness until one is added. Runs are in-process with click's runner; a few go through the
real entry point in a subprocess.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.cli.app import COMMANDS
from fixture_store.display import escape
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry import files as files_mod
from tests.support.hostile import manifest, regular_tar, tar_bytes, tar_info

DATA = b"alpha" * 100
GOOD_MEMBERS = {"data/a.bin": b"alpha" * 10, "b.txt": b"bravo\n"}

# How to call each command minimally, against the project a scenario builds (run from its
# root), and what else its own failures may name (a file it reads besides the registry). A new
# command in app.COMMANDS needs an entry here: the harness fails until it has one; a subcommand
# that reads the registry or a remote gets its own ("remote gc").
INVOKE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "add": (("add", "data/new.bin", "--name", "fam/new", "--kind", "fixture"), ("fam/new",)),
    "attest": (("attest", "fam/a", "data/out.npz", "-o", "out/cert.json"), ("--key",)),
    "check": (("check",), ()),
    "compare": (("compare",), ("onnx-case",)),
    # a project of the harness is no git repository: diff says so, naming git
    "diff": (("diff",), ("git",)),
    "expectations": (("expectations",), ()),
    "fetch": (("fetch", "--all"), ()),
    "gc": (("gc", "--yes"), ()),
    "import": (("import", "sha256sum", "data/SHA256SUMS", "--family", "imp"), ("SHA256SUMS",)),
    "init": (("init",), ()),
    "list": (("list",), ()),
    "migrate": (("migrate", "fam"), ("fam",)),
    "path": (("path", "fam/a"), ()),
    "provenance": (("provenance", "fam/a"), ()),
    "pull": (("pull", "--all", "--remote", "remote"), ("remote",)),
    "push": (("push", "--all", "--remote", "remote"), ("remote",)),
    "regenerate": (("regenerate", "fam/a"), ("params.yaml",)),
    "remote": (("remote", "list"), ()),
    "remote gc": (("remote", "gc", "remote", "--yes", "--min-age", "0"), ("remote",)),
    "regenerate-summary": (
        ("regenerate-summary", "--metrics", "out/metrics.json", "report.json"),
        ("report.json",),
    ),
    "rehash": (("rehash",), ()),
    "report": (("report", "--html", "out/site"), ()),
    "show": (("show", "fam/a"), ()),
    "status": (("status",), ()),
    "tolerance": (
        ("tolerance", "suggest", "fam/a", "--candidate", "data/out.npz"),
        ("data/out.npz", "fam/a"),
    ),
    "verify": (("verify",), ()),
    "verify-attestation": (
        ("verify-attestation", "data/cert.json", "--key", "keys/signer.pub"),
        ("keys/signer.pub", "data/cert.json"),
    ),
}


@dataclass(frozen=True)
class Case:
    """A project and store broken one way; ``names`` are the files or artifacts a failure
    message may name (one of them must appear)."""

    project: Path
    store: Path
    names: tuple[str, ...]


def _record(data: bytes, kind: str = "fixture", **extra: object) -> dict[str, object]:
    d = digests.of_bytes(data)
    return {
        "kind": kind,
        "digest": d.text,
        "size": d.size,
        "source": {"type": "local", "path": "data/a.bin"},
        **extra,
    }


def _base(root: Path) -> Case:
    """A healthy project: ``fam/a`` (a file) and ``fam/arc`` (an archive), both stored."""
    project, store_root = root / "project", root / "store"
    (project / "provenance").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "a.bin").write_bytes(DATA)
    (project / "data" / "new.bin").write_bytes(b"new bytes")
    (project / "report.json").write_text("{}\n")
    (project / "data" / "SHA256SUMS").write_text(f"{digests.of_bytes(DATA).hex}  a.bin\n")
    store = Store.at(store_root).ensure()
    store.put_bytes(DATA)
    archive = regular_tar(GOOD_MEMBERS)
    store.put_bytes(archive)
    members = {n: {"digest": d.text, "size": d.size} for n, d in manifest(GOOD_MEMBERS).items()}
    records = {
        "fam/a": _record(DATA),
        "fam/arc": _record(archive, "archive", members=members),
    }
    _write_family(project, records)
    return Case(project, store_root, (str(project / "provenance" / "fam.json"), "fam/a"))


def _write_family(project: Path, records: Mapping[str, object]) -> Path:
    path = project / "provenance" / "fam.json"
    path.write_text(files_mod.dumps({"format_version": 1, "records": records}))
    return path


def _family_text(case: Case, text: str) -> Case:
    path = case.project / "provenance" / "fam.json"
    path.unlink()
    path.write_text(text)
    return Case(case.project, case.store, (str(path),))


def _record_text(size: str = str(len(DATA)), metadata: str = "{}") -> str:
    d = digests.of_bytes(DATA)
    return (
        '{"format_version": 1, "records": {"fam/a": {"kind": "fixture", '
        f'"digest": "{d.text}", "size": {size}, "metadata": {metadata}, '
        '"source": {"type": "local", "path": "data/a.bin"}}}}'
    )


def bad_json(case: Case) -> Case:
    return _family_text(case, '{"format_version": 1, "records": {')


def wrong_types(case: Case) -> Case:
    return _family_text(case, _record_text(size='"big"'))


def duplicate_keys(case: Case) -> Case:
    text = _record_text()
    return _family_text(case, text.replace('"kind": "fixture"', '"kind": "fixture", "kind": "x"'))


def huge_number(case: Case) -> Case:
    return _family_text(case, _record_text(size="9" * 5000))


def deep_nesting(case: Case) -> Case:
    return _family_text(case, _record_text(metadata='{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"))


def not_regular_file(case: Case) -> Case:
    path = case.project / "provenance" / "fam.json"
    path.unlink()
    path.symlink_to("/dev/zero")
    return Case(case.project, case.store, (str(path),))


def fifo_registry(case: Case) -> Case:
    path = case.project / "provenance" / "fam.json"
    path.unlink()
    os.mkfifo(path)
    return Case(case.project, case.store, (str(path),))


def markup_in_names(case: Case) -> Case:
    """Rich markup in a record name (brackets are a name's characters like any other; this one is
    invalid by its '..' segment, and still listed) and in a valid record's fields."""
    records: dict[str, object] = {
        "fam/[bold]x[/x]/..": _record(DATA),
        "fam/a": _record(DATA, description="[/] [red]not markup[/x]"),
    }
    records["fam/a"]["source"] = {"type": "local", "path": "data/[red]a[/x].bin"}  # type: ignore[index]
    _write_family(case.project, records)
    return Case(case.project, case.store, ("fam/[bold]x[/x]/..", "fam/a"))


def control_characters_in_names(case: Case) -> Case:
    """Terminal escapes and a bidirectional override in a record name (invalid,
    still listed) and in a valid record's fields: every output shows them escaped."""
    records: dict[str, object] = {
        f"fam/{HOSTILE_TEXT}": _record(DATA),
        "fam/a": _record(DATA, description=HOSTILE_TEXT),
    }
    records["fam/a"]["source"] = {"type": "local", "path": f"data/{HOSTILE_TEXT}.bin"}  # type: ignore[index]
    _write_family(case.project, records)
    return Case(case.project, case.store, (f"fam/{escape(HOSTILE_TEXT)}", "fam/a"))


def objects_is_a_link(case: Case) -> Case:
    """``objects/`` a link to a copy of itself elsewhere (the store root itself may be a link:
    a cache folder moved to a bigger disk is an ordinary setup, and it stays allowed)."""
    objects = Store.at(case.store).objects_dir
    elsewhere = case.store.parent / "elsewhere"
    objects.rename(elsewhere)
    objects.symlink_to(elsewhere)
    return Case(case.project, case.store, (str(objects), "objects"))


def tmp_is_a_link(case: Case) -> Case:
    user = case.store.parent / "user-folder"
    user.mkdir()
    keep = user / "precious.txt"
    keep.write_text("mine")
    os.utime(keep, (0, 0))  # old enough for any sweep of stale temp files
    tmp = Store.at(case.store).tmp_dir
    _remove_tree(tmp)
    tmp.symlink_to(user)
    return Case(case.project, case.store, (str(tmp), "tmp"))


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
    path.rmdir()


def _object(case: Case) -> Path:
    path = Store.at(case.store).object_path(digests.of_bytes(DATA))
    path.chmod(0o644)
    return path


def _naming(case: Case, path: Path) -> Case:
    return Case(case.project, case.store, (*case.names, str(path)))


def object_missing(case: Case) -> Case:
    path = _object(case)
    path.unlink()
    return _naming(case, path)


def object_other_bytes(case: Case) -> Case:
    path = _object(case)
    path.write_bytes(b"beta!" * 100)
    return _naming(case, path)


def source_changed(case: Case) -> Case:
    """The object is gone and the file its record points at holds other bytes now: a fetch
    from the pinned source fails, for that artifact."""
    _object(case).unlink()
    (case.project / "data" / "a.bin").write_bytes(b"other" * 100)
    return case


def object_unreadable(case: Case) -> Case:
    """A folder where the object should be: unreadable as a file, even to root (the suite may
    run as root, for whom permission bits prove nothing)."""
    path = _object(case)
    path.unlink()
    path.mkdir()
    return _naming(case, path)


def hostile_archive(case: Case) -> Case:
    """``fam/arc``'s record lists the good members; its object has them plus ``../evil``."""
    evil = tar_bytes(
        [(tar_info(n, len(d)), d) for n, d in GOOD_MEMBERS.items()]
        + [(tar_info("../evil", 4), b"evil")]
    )
    Store.at(case.store).put_bytes(evil)
    members = {n: {"digest": d.text, "size": d.size} for n, d in manifest(GOOD_MEMBERS).items()}
    _write_family(
        case.project,
        {"fam/a": _record(evil, "archive", members=members)},
    )
    return Case(case.project, case.store, ("fam/a",))


SCENARIOS: dict[str, Callable[[Case], Case]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        bad_json,
        wrong_types,
        duplicate_keys,
        huge_number,
        deep_nesting,
        not_regular_file,
        fifo_registry,
        markup_in_names,
        control_characters_in_names,
        objects_is_a_link,
        tmp_is_a_link,
        object_missing,
        object_other_bytes,
        object_unreadable,
        source_changed,
        hostile_archive,
    )
}


# -- remote configuration: the project's [tool.fixture-store] and the user's file ----------------
# A secret planted in each broken configuration: no command may print it, whatever it refuses.
HARNESS_SECRET = "Zx9HARNESSsecret"


def _user_config(case: Case) -> Path:
    return case.project.parent / "user-config.toml"


def _configured(case: Case, path: Path, text: str) -> Case:
    path.write_text(text)
    return Case(case.project, case.store, (*case.names, str(path)))


def _pyproject(case: Case, text: str) -> Case:
    return _configured(case, case.project / "pyproject.toml", text)


def _team(remote: str, top: str = 'default-remote = "team"\n') -> str:
    return f"[tool.fixture-store]\n{top}\n[tool.fixture-store.remotes.team]\n{remote}"


def secret_in_remote_url(case: Case) -> Case:
    return _pyproject(case, _team(f'url = "s3://AKIA:{HARNESS_SECRET}@bucket/p?token=x"\n'))


def secret_in_query(case: Case) -> Case:
    return _pyproject(
        case, _team(f'url = "https://m.example/f?X-Amz-Signature={HARNESS_SECRET}"\n')
    )


def secret_in_endpoint(case: Case) -> Case:
    endpoint = f"https://me:{HARNESS_SECRET}@s3.example.org"
    return _pyproject(case, _team(f'url = "s3://b/p"\nendpoint_url = "{endpoint}"\n'))


def secret_key_at_the_top(case: Case) -> Case:
    return _pyproject(case, f'[tool.fixture-store]\naws_secret_access_key = "{HARNESS_SECRET}"\n')


def secret_key_in_a_remote(case: Case) -> Case:
    return _pyproject(case, _team(f'url = "s3://b/p"\ntoken = "{HARNESS_SECRET}"\n'))


def wrongly_typed_setting(case: Case) -> Case:
    return _pyproject(case, _team(f'url = ["{HARNESS_SECRET}"]\n'))


def wrongly_typed_default(case: Case) -> Case:
    return _pyproject(
        case, f"[tool.fixture-store]\ndefault-remote = {{ x = '{HARNESS_SECRET}' }}\n"
    )


def unsupported_scheme(case: Case) -> Case:
    return _pyproject(case, _team('url = "ftp://files.example/f"\n'))


def pyproject_not_toml(case: Case) -> Case:
    return _pyproject(case, f"[tool.fixture-store\nurl = {HARNESS_SECRET}\n")


def secret_in_the_user_file(case: Case) -> Case:
    text = f'default-remote = "team"\n[remotes.team]\nurl = "https://u:{HARNESS_SECRET}@h/f"\n'
    return _configured(case, _user_config(case), text)


def hub_url_not_a_repo(case: Case) -> Case:
    return _pyproject(case, _team('url = "hf://spaces/org/space"\n'))


def hub_url_with_a_token(case: Case) -> Case:
    return _pyproject(case, _team(f'url = "hf://datasets/org/x?token={HARNESS_SECRET}"\n'))


def hub_with_s3_settings(case: Case) -> Case:
    return _pyproject(case, _team(f'url = "hf://datasets/org/x"\nprofile = "{HARNESS_SECRET}"\n'))


REMOTE_SCENARIOS: dict[str, Callable[[Case], Case]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        secret_in_remote_url,
        secret_in_query,
        secret_in_endpoint,
        secret_key_at_the_top,
        secret_key_in_a_remote,
        wrongly_typed_setting,
        wrongly_typed_default,
        unsupported_scheme,
        pyproject_not_toml,
        secret_in_the_user_file,
        hub_url_not_a_repo,
        hub_url_with_a_token,
        hub_with_s3_settings,
    )
}


def test_every_registered_command_has_an_invocation() -> None:
    missing = sorted(set(COMMANDS) - set(INVOKE))
    assert not missing, (
        f"commands {missing} are registered in fixture_store/cli/app.py but the harness does "
        "not know how to call them: add an entry to INVOKE in tests/cli/test_harness.py"
    )
    called = {command.split()[0] for command in INVOKE}
    assert not called - set(COMMANDS), "INVOKE names commands that are not registered"


def _run(case: Case, args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(case.project)
    monkeypatch.setenv("COLUMNS", "1000")  # tables fold long cells; names must stay whole
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(case.store))
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    monkeypatch.setenv("FIXTURE_STORE_OFFLINE", "1")  # nothing in the harness may download
    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(_user_config(case)))  # never the machine's
    result = CliRunner().invoke(main, list(args), catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{' '.join(args)} raised {result.exception!r}") from result.exception
    return result.exit_code, result.stdout + result.stderr


# Text that must never reach a terminal as it is: the escape that starts a control sequence, a
# carriage return, a bell, a bidirectional override; a command prints it escaped.
HOSTILE_TEXT = "\x1b[2J\x1b]0;owned\x07\r\u202eevil"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

LOCATED_RECORD = re.compile(r"record '([^']+)'")


def _check(case: Case, command: str, code: int, output: str) -> None:
    where = f"{command!r}"
    names = (*case.names, *INVOKE[command][1])
    assert "Traceback" not in output, f"{where} printed a traceback:\n{output}"
    assert code in (0, 1, 2), f"{where} exited {code}:\n{output}"
    assert HARNESS_SECRET not in output, f"{where} printed a secret:\n{output}"
    raw = RAW_CONTROL.search(output)
    assert raw is None, f"{where} printed the control character {raw[0]!r} as it is:\n{output!r}"
    if code != 0:
        assert any(name in output for name in names), (
            f"{where} failed without naming any of {names}:\n{output}"
        )
        assert "fix:" in output or "Try '" in output, f"{where} failed without a fix:\n{output}"
    for name in names:
        assert f"{name}: {name}:" not in output, f"{where} named {name} twice in a row:\n{output}"
    for text in output.splitlines():
        for record in LOCATED_RECORD.findall(text):  # a registry error's location names it
            whole = re.compile(rf"(?<![\w/.-]){re.escape(record)}(?![\w/.-])")
            assert len(whole.findall(text)) == 1, (
                f"{where} named {record} on a line and again in its error's location:\n{text}"
            )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("command", sorted(INVOKE))
def test_a_command_over_a_broken_project_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, scenario: str
) -> None:
    case = SCENARIOS[scenario](_base(tmp_path))
    code, output = _run(case, INVOKE[command][0], monkeypatch)
    _check(case, command, code, output)
    if scenario == "tmp-is-a-link":
        assert (tmp_path / "user-folder" / "precious.txt").read_text() == "mine"


@pytest.mark.parametrize("scenario", sorted(REMOTE_SCENARIOS))
@pytest.mark.parametrize("command", sorted(INVOKE))
def test_a_command_over_a_broken_remote_configuration_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, scenario: str
) -> None:
    """A command that reads the remotes refuses the configuration naming its file, with a fix and
    without printing what it holds; the others go on as if it were not there."""
    case = REMOTE_SCENARIOS[scenario](_base(tmp_path))
    code, output = _run(case, INVOKE[command][0], monkeypatch)
    _check(case, command, code, output)
    if command in ("push", "pull", "remote", "remote gc"):
        assert code == 2, output
        assert case.names[-1] in output, output
    for path in tmp_path.rglob("*"):  # and nothing written holds the secret but where it was
        if path.is_file() and str(path) != case.names[-1]:
            assert HARNESS_SECRET.encode() not in path.read_bytes(), path


# -- the Hub remote: a Hub that is not there, refuses, or answers garbage -------------------------
HUB_COMMANDS = {
    "push": ("push", "--all", "--remote", "hub"),
    "push-pin": ("push", "--all", "--pin", "--remote", "hub"),
    "push-create": ("push", "--all", "--create-repo", "--remote", "hub"),
    "pull": ("pull", "--all", "--remote", "hub"),
    "fetch": ("fetch", "--all", "--remote", "hub"),
}


@pytest.mark.parametrize(
    "hub", ["unreachable", "no-such-branch", "no-such-repo", "garbage", "failing"]
)
@pytest.mark.parametrize("command", sorted(HUB_COMMANDS))
def test_the_hub_remote_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, hub: str
) -> None:
    """push, push --pin, push --create-repo, pull and fetch through a Hub remote whose Hub is
    down, lacks the branch or the repo, answers what is not JSON, or fails every request: no
    traceback, the remote named with a fix, the token never printed, and no record changed. A
    missing repo is a usage error (2) but to --create-repo, which creates it."""
    from tests.support.hubserver import hub_server

    case = object_missing(_base(tmp_path))  # so that pull and fetch ask the Hub for it
    (case.project / "pyproject.toml").write_text(
        '[tool.fixture-store.remotes.hub]\nurl = "hf://datasets/org/x"\n'
    )
    monkeypatch.setenv("HF_TOKEN", HARNESS_SECRET)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    family = (case.project / "provenance" / "fam.json").read_bytes()
    with hub_server("0" * 40) as (endpoint, state):
        state.branches.clear() if hub == "no-such-branch" else None
        state.missing = {("dataset", "org/x")} if hub == "no-such-repo" else set()
        state.garbage = hub == "garbage"
        state.failing = hub == "failing"
        url = "http://127.0.0.1:9" if hub == "unreachable" else endpoint
        monkeypatch.setenv("HF_ENDPOINT", url)
        code, output = _run(case, HUB_COMMANDS[command], monkeypatch)
    names = ("hf://datasets/org/x",)
    _check(Case(case.project, case.store, names), HUB_COMMANDS[command][0], code, output)
    if command != "fetch":  # fetch goes on to the pinned sources (here: local files)
        missing_repo = hub == "no-such-repo" and command in ("push", "push-pin")
        assert code == (2 if missing_repo else 1), output
    assert (case.project / "provenance" / "fam.json").read_bytes() == family


@pytest.mark.parametrize("command", sorted(INVOKE))
def test_no_command_drops_an_invalid_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """An invalid record is the reviewer's to fix: a command that writes its family (``add``,
    ``import``, ``rehash``, ...) keeps it as the file states it."""
    case = wrong_types(_base(tmp_path))
    path = case.project / "provenance" / "fam.json"
    stated = json.loads(path.read_text())["records"]["fam/a"]
    _run(case, INVOKE[command][0], monkeypatch)
    assert json.loads(path.read_text())["records"]["fam/a"] == stated


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - {"tmp-is-a-link"}))
def test_verify_fails_on_every_broken_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    """Whatever else a command may do, ``verify`` never passes a broken project."""
    case = SCENARIOS[scenario](_base(tmp_path))
    code, output = _run(case, ("verify",), monkeypatch)
    assert code in (1, 2), output


@pytest.mark.parametrize(
    "scenario", ["huge-number", "fifo-registry", "markup-in-names", "control-characters-in-names"]
)
@pytest.mark.parametrize("command", ["list", "verify", "status"])
def test_the_real_entry_point_fails_clearly(tmp_path: Path, command: str, scenario: str) -> None:
    case = SCENARIOS[scenario](_base(tmp_path))
    env = {
        **os.environ,
        "FIXTURE_STORE_DIR": str(case.store),
        "FIXTURE_STORE_OFFLINE": "1",
        "COLUMNS": "1000",
    }
    env.pop("FIXTURE_STORE_REGISTRY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "fixture_store.cli", *INVOKE[command][0]],
        cwd=case.project,
        env=env,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=120,
        check=False,
    )
    _check(case, command, proc.returncode, proc.stdout + proc.stderr)
    json.dumps(proc.returncode)  # a plain exit status, not a signal
    assert proc.returncode >= 0


# -- hostile manifests: every importer format, through the import command --------------------
# Each format's manifests built to break a reader: nesting and integers past what a parser
# survives, values no registry may hold, files that are not files. ``import`` must refuse each
# with an error naming the manifest (exit 1 or 2), never a traceback and never a written record.
# A format registered in fixture_store.importers.FORMATS fails the harness until it has some.
_SHA = digests.of_bytes(DATA).hex
_B64 = base64.urlsafe_b64encode(bytes.fromhex(_SHA)).rstrip(b"=").decode()
_DEEP = "[" * 5000 + "]" * 5000


def _json_manifest(value: str) -> str:
    return (
        '{"format_version": 1, "fixtures": {"a.bin": {"sha256": "' + _SHA + '", "x": ' + value
    ) + "}}}"


def _dvc_file(extra: str) -> str:
    return f"outs:\n- path: a.bin\n  md5: {'0' * 32}\n{extra}\n"


HOSTILE_MANIFESTS: dict[str, dict[str, tuple[str, str | None]]] = {
    # format -> case -> (file name, text; None: made by _special)
    "json": {
        "deep-5000": ("m.json", _json_manifest(_DEEP)),
        "deep-70": ("m.json", _json_manifest("[" * 70 + "]" * 70)),
        "digits-5000": ("m.json", _json_manifest("9" * 5000)),
        "digits-30": ("m.json", _json_manifest("9" * 30)),
        "infinity": ("m.json", _json_manifest("Infinity")),
        "surrogate": ("m.json", _json_manifest('"\\ud800"')),
        "duplicate-key": ("m.json", _json_manifest('1, "x": 2')),
        "not-json": ("m.json", '{"format_version": 1, '),
        "fifo": ("m.json", None),
    },
    "pooch": {
        "expression-60000": (
            "reg.py",
            f"registry = {{'a.bin': '{_SHA}'}}\nx = {'+'.join(['1'] * 60_000)}\n",
        ),
        "expression-in-registry": (
            "reg.py",
            f"registry = {{'a.bin': {'+'.join(['1'] * 60_000)}}}\n",
        ),
        "surrogate-url": (
            "reg.py",
            f"registry = {{'a.bin': '{_SHA}'}}\nregistry_urls = {{'a.bin': '\\udfff'}}\n",
        ),
        "not-python": ("reg.py", "registry = {'a.bin': \n"),
        "traversal": ("registry.txt", f"../a.bin {_SHA}\n"),
        "folder": ("registry.txt", None),
    },
    "sha256sum": {
        "traversal": ("SUMS", f"{_SHA}  ../../etc/passwd\n"),
        "control-character": ("SUMS", f"\\{_SHA}  a\\nb\n"),
        "not-utf8": ("SUMS", None),
        "fifo": ("SUMS", None),
    },
    "record": {
        "traversal": ("RECORD", f"../../etc/passwd,sha256={_B64},1\n"),
        "bad-digest": ("RECORD", "a.bin,sha256=!!!,1\n"),
        "not-csv": ("RECORD", 'a.bin,"sha256=x\n'),
        "not-utf8": ("RECORD", None),
        "fifo": ("RECORD", None),
    },
    "tfds": {
        "traversal": ("checksums.tsv", f"https://example.org/a\t1\t{_SHA}\t../../etc/passwd\n"),
        "size-not-a-count": ("checksums.tsv", f"https://example.org/a\tmany\t{_SHA}\ta.bin\n"),
        "fields": ("checksums.tsv", "https://example.org/a\t1\n"),
        "not-utf8": ("checksums.tsv", None),
        "fifo": ("checksums.tsv", None),
    },
    "dvc": {
        "deep-5000": ("a.dvc", _dvc_file("  meta: " + _DEEP)),
        "digits-5000": ("a.dvc", _dvc_file("  size: " + "9" * 5000)),
        "infinity": ("a.dvc", _dvc_file("  meta: .inf")),
        "surrogate": ("a.dvc", _dvc_file('  meta: "\\ud800"')),
        "alias": ("a.dvc", "x: &a [1]\ny: [*a, *a]\n" + _dvc_file("")),
        "not-yaml": ("a.dvc", "outs: [\n"),
    },
}


def _special(path: Path, case: str) -> None:
    if case == "fifo":
        os.mkfifo(path)
    elif case == "folder":
        path.mkdir()
    else:  # not-utf8
        path.write_bytes(b"\xff\xfe" + _SHA.encode() + b"  a.bin\n")


def test_every_importer_format_has_hostile_manifests() -> None:
    from fixture_store import importers

    assert set(HOSTILE_MANIFESTS) == set(importers.FORMATS), (
        "add hostile manifests of the new format to HOSTILE_MANIFESTS in tests/cli/test_harness.py"
    )


@pytest.mark.parametrize(
    ("fmt", "case"),
    [(fmt, case) for fmt, cases in sorted(HOSTILE_MANIFESTS.items()) for case in sorted(cases)],
)
def test_import_of_a_hostile_manifest_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, case: str
) -> None:
    base = _base(tmp_path)
    name, text = HOSTILE_MANIFESTS[fmt][case]
    path = base.project / "data" / name
    if text is None:
        _special(path, case)
    else:
        path.write_text(text, encoding="utf-8")
    family = base.project / "provenance" / "imp.json"
    code, output = _run(
        Case(base.project, base.store, ()),
        ("import", fmt, f"data/{name}", "--family", "imp"),
        monkeypatch,
    )
    _check(Case(base.project, base.store, (f"data/{name}",)), "import", code, output)
    if code == 0:  # what the format ignores (a pooch module's other statements): clean records
        registry = registry_mod.load(base.project)
        assert not list(registry.invalid()) and registry.families["imp"].records, output
    else:
        assert not family.exists(), f"{fmt} {case}: a record was written:\n{output}"
