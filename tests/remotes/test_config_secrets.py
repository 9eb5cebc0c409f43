"""A credential in a remote's settings is refused at every entry point and never printed or
written (DESIGN decision 15): the project's pyproject, the user's file, ``remote add``,
``--remote`` on push, pull and fetch, ``remote list``, push and pull output, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_store.remotes import config
from tests.support.cli import add_file_and_case, run

SECRET = "Zx9SECRETqv7"

# Every way a credential may be written into a URL-like setting.
SECRET_URLS = {
    "userinfo": f"s3://AKIAEXAMPLE:{SECRET}@bucket/prefix",
    "user-only": f"https://{SECRET}@mirror.example/f",
    "password-with-slash": f"https://me:{SECRET}/x@mirror.example/f",
    "amz-signature": f"https://mirror.example/f?X-Amz-Signature={SECRET}",
    "token": f"https://mirror.example/f?a=1&token={SECRET}",
    "sas-sig": f"https://mirror.example/f?sv=2024&sig={SECRET}",
    "fragment-token": f"https://mirror.example/f#access_token={SECRET}",
    "unsupported-scheme": f"ftp://me:{SECRET}@files.example/f",
}
SECRET_ENDPOINTS = {
    "userinfo": f"https://me:{SECRET}@s3.example.org",
    "token": f"https://s3.example.org/?X-Amz-Security-Token={SECRET}",
}


def _no_secret_anywhere(root: Path, *outputs: str, written: tuple[Path, ...] = ()) -> None:
    """The secret is in no output and in no file under ``root`` but those the test wrote."""
    for text in outputs:
        assert SECRET not in text, text
    for path in root.rglob("*"):
        if path.is_file() and path not in written:
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.fixture
def project_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    project = tmp_path / "project"
    (project / "provenance").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    add_file_and_case(project)
    return project


def _pyproject(project: Path, remote: str) -> Path:
    path = project / "pyproject.toml"
    path.write_text(f'[tool.fixture-store]\ndefault-remote = "team"\n\n{remote}')
    return path


COMMANDS = {
    "push": ("push", "--all"),
    "pull": ("pull", "--all"),
    "fetch": ("fetch", "--all"),
    "remote-list": ("remote", "list"),
    "remote-list-json": ("remote", "list", "--json"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("form", sorted(SECRET_URLS))
def test_a_credential_in_a_pyproject_url_is_refused_unprinted(
    tmp_path: Path, project_files: Path, command: str, form: str
) -> None:
    written = _pyproject(
        project_files, f'[tool.fixture-store.remotes.team]\nurl = "{SECRET_URLS[form]}"\n'
    )
    code, out, err = run(*COMMANDS[command])
    assert code == 2, out + err
    assert "pyproject.toml" in err and "fix:" in err
    _no_secret_anywhere(tmp_path, out, err, written=(written,))


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("form", sorted(SECRET_ENDPOINTS))
def test_a_credential_in_an_endpoint_url_is_refused_unprinted(
    tmp_path: Path, project_files: Path, command: str, form: str
) -> None:
    written = _pyproject(
        project_files,
        '[tool.fixture-store.remotes.team]\nurl = "s3://bucket/p"\n'
        f'endpoint_url = "{SECRET_ENDPOINTS[form]}"\n',
    )
    code, out, err = run(*COMMANDS[command])
    assert code == 2, out + err
    assert "endpoint_url" in err and "carries a credential" in err
    _no_secret_anywhere(tmp_path, out, err, written=(written,))


@pytest.mark.parametrize("form", sorted(SECRET_URLS))
@pytest.mark.parametrize("project", [False, True])
def test_remote_add_refuses_a_credential_and_writes_nothing(
    tmp_path: Path, project_files: Path, form: str, project: bool
) -> None:
    before = (project_files / "pyproject.toml").exists()
    flags = ("--project",) if project else ()
    code, out, err = run("remote", "add", "team", SECRET_URLS[form], *flags)
    assert code == 2 and "fix:" in err, out + err
    _no_secret_anywhere(tmp_path, out, err)
    assert not config.user_config_file().exists()
    assert (project_files / "pyproject.toml").exists() == before


@pytest.mark.parametrize("form", sorted(SECRET_ENDPOINTS))
@pytest.mark.usefixtures("project_files")
def test_remote_add_refuses_a_credential_in_the_endpoint(tmp_path: Path, form: str) -> None:
    args = ("remote", "add", "team", "s3://bucket/p", "--endpoint-url", SECRET_ENDPOINTS[form])
    code, out, err = run(*args)
    assert code == 2 and "endpoint_url" in err, out + err
    _no_secret_anywhere(tmp_path, out, err)
    assert not config.user_config_file().exists()


@pytest.mark.parametrize("command", ["push", "pull", "fetch"])
@pytest.mark.parametrize("form", sorted(SECRET_URLS))
@pytest.mark.usefixtures("project_files")
def test_remote_on_the_command_line_refuses_a_credential_unprinted(
    tmp_path: Path, command: str, form: str
) -> None:
    code, out, err = run(command, "--all", "--remote", SECRET_URLS[form])
    assert code == 2 and "fix:" in err, out + err
    _no_secret_anywhere(tmp_path, out, err)


@pytest.mark.parametrize("command", ["push", "pull", "fetch"])
@pytest.mark.usefixtures("project_files")
def test_a_remote_name_that_holds_a_credential_is_not_echoed(tmp_path: Path, command: str) -> None:
    code, out, err = run(command, "--all", "--remote", f"AKIAEXAMPLE:{SECRET}@bucket")
    assert code == 2, out + err
    _no_secret_anywhere(tmp_path, out, err)


@pytest.mark.usefixtures("project_files")
def test_the_user_file_is_held_to_the_same_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user.toml"
    user.write_text(f'[remotes.team]\nurl = "{SECRET_URLS["token"]}"\n')
    monkeypatch.setenv(config.CONFIG_ENV, str(user))
    code, out, err = run("remote", "list", "--json")
    assert code == 2 and str(user) in err
    _no_secret_anywhere(tmp_path, out, err, written=(user,))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (f'[tool.fixture-store]\naws_secret_access_key = "{SECRET}"\n', "aws_secret_access_key"),
        (f'[tool.fixture-store]\ntoken = "{SECRET}"\n', "token"),
        (f'[tool.fixture-store]\ndefault-remotes = "{SECRET}"\n', "default-remotes"),
        (
            '[tool.fixture-store.remotes.team]\nurl = "s3://b/p"\n'
            f'aws_secret_access_key = "{SECRET}"\n',
            "aws_secret_access_key",
        ),
    ],
)
def test_an_unknown_key_at_any_level_is_refused_by_name(
    tmp_path: Path, project_files: Path, text: str, named: str
) -> None:
    written = project_files / "pyproject.toml"
    written.write_text(text)
    code, out, err = run("remote", "list")
    assert code == 2 and repr(named) in err and "fix:" in err, out + err
    if "secret" in named or "token" in named:
        assert "AWS chain" in err
    _no_secret_anywhere(tmp_path, out, err, written=(written,))


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (f'["{SECRET}"]', "an array"),
        (f'{{ key = "{SECRET}" }}', "a table"),
        ("123456789012", "a number"),
        ('""', "an empty string"),
    ],
)
@pytest.mark.parametrize("key", ["url", "endpoint_url", "profile", "region", "default-remote"])
def test_a_wrongly_typed_value_is_named_by_key_and_type_never_echoed(
    tmp_path: Path, project_files: Path, key: str, value: str, kind: str
) -> None:
    written = project_files / "pyproject.toml"
    if key == "default-remote":
        written.write_text(f"[tool.fixture-store]\ndefault-remote = {value}\n")
    else:
        url = "" if key == "url" else 'url = "s3://b/p"\n'
        written.write_text(f"[tool.fixture-store.remotes.team]\n{url}{key} = {value}\n")
    code, out, err = run("remote", "list")
    if kind == "an empty string" and key == "default-remote":
        return  # an empty name is a name that is not configured: refused by another rule
    assert code == 2 and key in err and kind in err, out + err
    _no_secret_anywhere(tmp_path, out, err, written=(written,))
    assert "123456789012" not in err


@pytest.mark.usefixtures("project_files")
def test_remote_list_and_its_json_show_urls_through_the_formatter() -> None:
    """A URL whose parameters carry nothing secret is shown as it is, in the table and JSON."""
    assert run("remote", "add", "team", "https://mirror.example/f", "--default")[0] == 0
    code, out, _ = run("remote", "list", "--json")
    assert code == 0
    assert json.loads(out)["remotes"][0]["url"] == "https://mirror.example/f"


@pytest.mark.parametrize("field", ["url", "upstream"])
def test_a_credential_in_a_registry_url_is_refused_unprinted(
    tmp_path: Path, project_files: Path, field: str
) -> None:
    """A registry is committed: a record whose source or upstream URL carries a credential is
    invalid, and every command that names it shows the URL redacted."""
    family = project_files / "provenance" / "fam.json"
    doc = json.loads(family.read_text())
    url = f"https://huggingface.co/o/r/resolve/{'a' * 40}/f.bin?token={SECRET}"
    if field == "url":
        doc["records"]["fam/a"]["source"] = {"type": "url", "url": url}
    else:
        doc["records"]["fam/a"]["upstream"] = [{"type": "url", "url": url}]
    family.write_text(json.dumps(doc))
    for args in (("verify",), ("show", "fam/a"), ("fetch", "--all"), ("list",), ("status",)):
        code, out, err = run(*args)
        if args[0] not in ("list", "status"):  # they show an invalid record, and exit 0
            assert code == 2 and "carries a credential" in out + err, (args, out + err)
        _no_secret_anywhere(tmp_path, out, err, written=(family,))


@pytest.mark.usefixtures("project_files")
@pytest.mark.parametrize("reachable", [True, False])
@pytest.mark.parametrize("verb", ["push", "pull"])
def test_push_and_pull_output_show_an_environment_endpoint_redacted(
    tmp_path: Path,
    s3_endpoint: str,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    verb: str,
    reachable: bool,
) -> None:
    """``$AWS_ENDPOINT_URL`` is the AWS chain's, not a setting this tool refuses: a user name and
    password in it still never reach push or pull output, tables or JSON, whether it names the
    remote (the remote's label) or the client's error quotes it (an endpoint that refuses)."""
    host = s3_endpoint.removeprefix("http://") if reachable else "127.0.0.1:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://me:{SECRET}@{host}")
    for args in ((), ("--json",)):
        code, out, err = run(verb, "--all", "--remote", f"s3://{bucket}/p", *args)
        assert code in (0, 1), out + err
        assert "***@" in out + err
        _no_secret_anywhere(tmp_path, out, err)
