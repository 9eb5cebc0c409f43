"""``fixture-store fetch NAME --tensor KEY``: one verified tensor, by range or from the store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from fixture_store.cli import main
from tests.sources.test_ranges import HEADER, WEIGHTS, Server, _project, https  # noqa: F401 - fixture
from tests.support.fetchutil import online_env  # noqa: F401 - autouse


def run(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["--store", str(tmp_path / "store"), "--registry", str(tmp_path / "p"), *args]
    )


def test_fetch_tensor_reads_the_range_verifies_and_writes_the_npy(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    base, server = https
    _fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    npy = tmp_path / "small.npy"
    result = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--output", str(npy))
    assert result.exit_code == 0, result.output
    assert "ckpt/big: tensor 'small'" in result.stdout and "nothing stored" in result.stdout
    np.testing.assert_array_equal(np.load(npy), WEIGHTS["small"])
    assert server.sent == [HEADER, WEIGHTS["small"].nbytes]
    as_json = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--json")
    assert json.loads(as_json.stdout)["from"] == "source-range"


def test_fetch_tensor_from_a_lying_server_is_an_error_on_stderr(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    base, server = https
    _fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body, server.mode = data, "lying"
    npy = tmp_path / "small.npy"
    result = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--output", str(npy))
    assert result.exit_code == 1
    assert (
        "ckpt/big: tensor 'small'" in result.stderr and "fix: fixture-store fetch" in result.stderr
    )
    assert "Traceback" not in result.output and not npy.exists()


def test_fetch_tensor_takes_one_artifact_and_no_report(tmp_path: Path) -> None:
    _project(tmp_path, {"type": "local", "path": "model.safetensors"})
    report = tmp_path / "r.json"
    both = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--report", str(report))
    assert both.exit_code == 2 and "--tensor" in both.stderr
    alone = run(tmp_path, "fetch", "ckpt/big", "--output", str(tmp_path / "x.npy"))
    assert alone.exit_code == 2 and "--tensor KEY" in alone.stderr
    local = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--no-remote")
    assert local.exit_code == 0, local.output


def test_fetch_rows_of_a_large_npy_reads_only_their_chunks(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    from tests.sources.test_ranges_arrays import BIG
    from tests.sources.test_ranges_arrays import _project as npy_project

    base, server = https
    _fixtures, data = npy_project(
        tmp_path, "npy", {"type": "url", "url": f"{base}/big.npy"}, {"big": BIG}
    )
    server.body = data
    npy = tmp_path / "rows.npy"
    args = ("fetch", "ref/big.npy", "--tensor", "big", "--rows", "100:164", "--output", str(npy))
    result = run(tmp_path, *args)
    assert result.exit_code == 0, result.output
    assert "ref/big.npy: tensor 'big' rows [100, 164)" in result.stdout
    np.testing.assert_array_equal(np.load(npy), BIG[100:164])
    assert server.sent == [4 * 1024 * 1024]  # the one chunk that covers them
    for bad in ("5", "9:2", "a:b"):
        refused = run(tmp_path, "fetch", "ref/big.npy", "--tensor", "big", "--rows", bad)
        assert refused.exit_code == 2 and "--rows" in refused.stderr, bad
    beyond = run(tmp_path, "fetch", "ref/big.npy", "--tensor", "big", "--rows", "0:99999")
    assert beyond.exit_code == 2 and "9216 rows" in beyond.stderr
    alone = run(tmp_path, "fetch", "ref/big.npy", "--rows", "0:1")
    assert alone.exit_code == 2 and "--tensor KEY" in alone.stderr
    assert "Traceback" not in beyond.output + alone.output


def test_fetch_tensor_reads_a_configured_remote_first_and_warns_of_one_that_lacks_it(
    https: tuple[str, Server],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fixture_store.remotes.base import object_key

    monkeypatch.setenv("FIXTURE_STORE_CONFIG", str(tmp_path / "user-config.toml"))
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    held = tmp_path / "team" / object_key(fixtures.record("ckpt/big").object)
    held.parent.mkdir(parents=True)
    held.write_bytes(data)
    (tmp_path / "empty").mkdir()
    for name, where in (("team", "team"), ("empty", "empty")):
        assert run(tmp_path, "remote", "add", name, str(tmp_path / where)).exit_code == 0
    got = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--remote", "team", "--json")
    assert got.exit_code == 0, got.output
    doc = json.loads(got.stdout)
    assert doc["from"] == "remote-range" and "team" in doc["where"]
    assert server.sent == []  # the remote served it: the source was not asked
    lacking = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--remote", "empty")
    assert lacking.exit_code == 0, lacking.output
    assert "warning: ckpt/big: tried first:" in lacking.stderr and "empty" in lacking.stderr
    assert server.sent == [HEADER, WEIGHTS["small"].nbytes]  # then the source, that tensor
    none = run(tmp_path, "fetch", "ckpt/big", "--tensor", "small", "--no-remote", "--json")
    assert json.loads(none.stdout)["from"] == "source-range"
