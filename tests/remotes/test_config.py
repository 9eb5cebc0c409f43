"""Remote configuration: the project's pyproject.toml, the user's file, the default, edits."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fixture_store.errors import UsageError
from fixture_store.remotes import config

PYPROJECT = """\
[project]
name = "downstream"  # a comment that must survive edits

[tool.fixture-store]
default-remote = "team"

[tool.fixture-store.remotes.team]
url = "s3://bucket/fixtures"
endpoint_url = "http://127.0.0.1:9000"

[tool.fixture-store.remotes.nfs]
url = "shared"

[tool.other]
keep = true
"""


def _project(tmp_path: Path, text: str = PYPROJECT) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text(text)
    return root


def test_project_remotes_the_default_and_relative_folders(tmp_path: Path) -> None:
    root = _project(tmp_path)
    conf = config.load(root)
    assert conf.resolve(None).url == "s3://bucket/fixtures"
    assert conf.resolve(None).endpoint_url == "http://127.0.0.1:9000"
    assert conf.resolve("nfs").url == str(root / "shared")
    assert [s.name for s in conf.mirrors()] == ["team", "nfs"]
    assert conf.resolve("s3://other/x").name == "s3://other/x"


def test_the_user_file_overrides_the_project(tmp_path: Path, isolated_config: Path) -> None:
    root = _project(tmp_path)
    isolated_config.write_text('default-remote = "nfs"\n[remotes.team]\nurl = "s3://mine/prefix"\n')
    conf = config.load(root)
    assert conf.default == "nfs"
    assert conf.resolve("team").url == "s3://mine/prefix"
    assert [s.name for s in conf.mirrors()] == ["nfs", "team"]


def test_an_unknown_remote_names_the_configured_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no remote named 'nope' \(configured: team, nfs\)"):
        config.load(_project(tmp_path)).resolve("nope")


def test_no_default_says_how_to_add_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        config.load(_project(tmp_path, "[project]\nname = 'x'\n")).resolve(None)
    assert info.value.fix is not None and "remote add" in info.value.fix


@pytest.mark.parametrize("key", ["aws_secret_access_key", "secret", "token"])
def test_credentials_in_the_configuration_are_refused(tmp_path: Path, key: str) -> None:
    root = _project(tmp_path, f'[tool.fixture-store.remotes.x]\nurl = "s3://b"\n{key} = "v"\n')
    with pytest.raises(UsageError) as info:
        config.load(root)
    assert info.value.fix is not None and "AWS chain" in info.value.fix
    assert '"v"' not in info.value.message and "'v'" not in info.value.message


def test_credentials_in_a_url_are_refused() -> None:
    with pytest.raises(UsageError, match="carries a credential") as info:
        config.check_url("https://user:pw@mirror.example/fixtures")
    assert "pw" not in str(info.value) and "***@mirror.example" in str(info.value)


@pytest.mark.parametrize(
    "url", ["http://mirror.example/f", "ftp://files.example/f", "HTTPS://h/f", "gopher://h"]
)
def test_an_unsupported_scheme_is_refused_never_taken_for_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="unsupported remote URL") as info:
        config.RemoteConfig().resolve(url)
    assert info.value.fix is not None and "s3://" in info.value.fix
    with pytest.raises(UsageError, match="unsupported"):
        config.RemoteSpec.from_json("x", {"url": url}, "pyproject.toml")
    assert list(tmp_path.iterdir()) == []  # no folder named after the URL


def test_add_and_remove_in_the_project_keep_everything_else(tmp_path: Path) -> None:
    root = _project(tmp_path)
    path = root / "pyproject.toml"
    spec = config.RemoteSpec.from_json("ci", {"url": "https://mirror.example/f"}, str(path))
    config.add(path, spec, project=True, default=True)
    doc = tomllib.loads(path.read_text())
    assert doc["tool"]["fixture-store"]["remotes"]["ci"] == {"url": "https://mirror.example/f"}
    assert doc["tool"]["fixture-store"]["default-remote"] == "ci"
    assert "# a comment that must survive edits" in path.read_text()
    config.remove(path, "ci", project=True)
    after = tomllib.loads(path.read_text())
    assert after["tool"]["fixture-store"]["remotes"].keys() == {"team", "nfs"}
    assert "default-remote" not in after["tool"]["fixture-store"]
    assert after["tool"]["other"] == {"keep": True}


def test_add_to_the_user_file_creates_it(isolated_config: Path) -> None:
    spec = config.RemoteSpec.from_json("mine", {"url": "/srv/fixtures"}, str(isolated_config))
    config.add(isolated_config, spec, project=False, default=True)
    doc = tomllib.loads(isolated_config.read_text())
    assert doc == {"default-remote": "mine", "remotes": {"mine": {"url": "/srv/fixtures"}}}
    with pytest.raises(UsageError, match="already declares"):
        config.add(isolated_config, spec, project=False, default=False)


def test_an_edit_that_would_change_more_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    # remotes as an inline table: appending a [..remotes.x] table would redefine it
    text = '[tool.fixture-store]\nremotes = { team = { url = "s3://b" } }\n'
    root = _project(tmp_path, text)
    path = root / "pyproject.toml"
    spec = config.RemoteSpec.from_json("x", {"url": "s3://c"}, str(path))
    with pytest.raises(UsageError, match="cannot edit"):
        config.add(path, spec, project=True, default=False)
    assert path.read_text() == text


def test_removing_the_only_remote_leaves_the_file_as_it_was_before_the_add(
    tmp_path: Path,
) -> None:
    text = '[project]\nname = "downstream"  # kept\n\n[tool.other]\nkeep = true\n'
    path = _project(tmp_path, text) / "pyproject.toml"
    spec = config.RemoteSpec.from_json("team", {"url": "s3://bucket/f"}, str(path))
    config.add(path, spec, project=True, default=True)
    assert "[tool.fixture-store]" in path.read_text()
    config.remove(path, "team", project=True)
    assert path.read_text() == text


def test_removing_the_last_remote_drops_the_empty_tables_and_keeps_every_other_line(
    tmp_path: Path,
) -> None:
    text = (
        "# the project's tools\n"
        "[tool.fixture-store]\n"
        'default-remote = "team"\n'
        "\n"
        "[tool.fixture-store.remotes]\n"
        "\n"
        "[tool.fixture-store.remotes.team]\n"
        'url = "s3://bucket/f"\n'
        "\n"
        "[tool.other]\n"
        "keep = true  # stays\n"
    )
    path = _project(tmp_path, text) / "pyproject.toml"
    config.remove(path, "team", project=True)
    assert path.read_text() == "# the project's tools\n[tool.other]\nkeep = true  # stays\n"


def test_a_table_left_with_a_comment_keeps_its_header(tmp_path: Path) -> None:
    text = (
        "[tool.fixture-store]\n"
        "# remotes are declared per team\n"
        "\n"
        "[tool.fixture-store.remotes.team]\n"
        'url = "s3://bucket/f"\n'
    )
    path = _project(tmp_path, text) / "pyproject.toml"
    config.remove(path, "team", project=True)
    assert path.read_text() == "[tool.fixture-store]\n# remotes are declared per team\n"
    user = tmp_path / "config.toml"
    user.write_text('default-remote = "a"\n\n[remotes]\n\n[remotes.a]\nurl = "/srv/f"\n')
    config.remove(user, "a", project=False)
    assert "[remotes]" not in user.read_text() and not tomllib.loads(user.read_text())


def test_a_remove_keeps_another_tables_key_named_default_remote(tmp_path: Path) -> None:
    text = PYPROJECT.replace("keep = true\n", 'keep = true\ndefault-remote = "team"\n')
    path = _project(tmp_path, text) / "pyproject.toml"
    config.remove(path, "team", project=True)
    after = path.read_text()
    team = (
        '[tool.fixture-store.remotes.team]\nurl = "s3://bucket/fixtures"\n'
        'endpoint_url = "http://127.0.0.1:9000"\n\n'
    )
    assert after == text.replace('default-remote = "team"\n', "", 1).replace(team, "")
    assert tomllib.loads(after)["tool"]["other"] == {"keep": True, "default-remote": "team"}


def test_a_remove_that_would_leave_part_of_the_remote_is_refused_and_the_file_kept(
    tmp_path: Path,
) -> None:
    # a sub-table of the remote's table: dropping the table's lines would leave it behind
    text = PYPROJECT + '\n[tool.fixture-store.remotes.team.extra]\nnote = "x"\n'
    path = _project(tmp_path, text) / "pyproject.toml"
    with pytest.raises(UsageError, match="cannot edit"):
        config.remove(path, "team", project=True)
    assert path.read_text() == text


def test_a_remote_sets_its_pack_threshold_and_a_wrong_one_is_refused(tmp_path: Path) -> None:
    from fixture_store.remotes.packs import PACK_THRESHOLD, packing_of

    text = PYPROJECT.replace('url = "shared"', 'url = "shared"\npack_threshold = 0')
    conf = config.load(_project(tmp_path, text))
    assert packing_of(conf.resolve("nfs")).threshold == 0
    assert packing_of(conf.resolve("team")).threshold == PACK_THRESHOLD
    for i, wrong in enumerate(("-1", "true", '"1MiB"', "1.5")):
        bad = PYPROJECT.replace('url = "shared"', f'url = "shared"\npack_threshold = {wrong}')
        (tmp_path / str(i)).mkdir()
        with pytest.raises(UsageError, match="pack_threshold must be a number of bytes") as e:
            config.load(_project(tmp_path / str(i), bad))
        assert e.value.fix is not None and "pyproject.toml" in e.value.fix
