"""``fixture-store expectations``: the matrix of rules per environment, verified from the run
log, and ``expectations add``, a registry diff that is written only when asked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity import runlog
from fixture_store.parity.assertion import ParityError, assert_parity
from fixture_store.registry.files import write_family
from tests.support.cli import run

NAME = "fam/out.npz"
OUT = np.linspace(-1, 1, 16, dtype=np.float32)
TOLERANCE = {
    "metric": "max_abs",
    "max": 1e-6,
    "expectations": {"device:cuda": {"max": 1e-3}, "device:tpu": {"max": 1e-2}},
}


@pytest.fixture
def fixtures(project: Path, store: Store) -> Fixtures:
    np.savez(project / "out.npz", y=OUT)
    ingest.add(store, registry_mod.load(project), project / "out.npz", name=NAME, kind="array")
    registry = registry_mod.load(project)
    records = dict(registry.families["fam"].records)
    raw = {**records[NAME].to_json(), "tolerance": TOLERANCE}
    records[NAME] = registry_mod.parse_record(NAME, raw, file="t")
    write_family(registry, "fam", records.values())
    return Fixtures(store, registry_mod.load(project))


def _runs(fixtures: Fixtures) -> None:
    assert_parity(NAME, {"y": OUT + np.float32(1e-4)}, fixtures=fixtures, environment="device:cuda")
    assert_parity(NAME, {"y": OUT}, fixtures=fixtures, environment="device:cpu,runtime:jax")
    with pytest.raises(ParityError):
        assert_parity(NAME, {"y": OUT + 1}, fixtures=fixtures, environment="device:tpu")
    with pytest.raises(ParityError):
        assert_parity(NAME, {"y": OUT + 1}, fixtures=fixtures, environment="device:mps")


def test_the_matrix_says_which_rules_were_verified_where_and_which_never(
    fixtures: Fixtures, store: Store
) -> None:
    code, out, _ = run("expectations", "--json")
    assert code == 0
    assert [(r["rule"], r["status"]) for r in json.loads(out)["rows"]] == [
        ("device:cuda", "never"),
        ("device:tpu", "never"),
    ]
    _runs(fixtures)
    code, out, _ = run("expectations", "--json")
    rows = {r["rule"]: r for r in json.loads(out)["rows"]}
    assert rows[""]["status"] == "verified" and rows[""]["environments"] == [
        "device:cpu,runtime:jax"
    ]
    assert rows["device:cuda"]["status"] == "verified" and rows["device:cuda"]["runs"] == 1
    assert rows["device:tpu"]["status"] == "failing"
    code, out, _ = run("expectations", "--record", NAME)
    assert code == 0 and "never" not in out and "failing" in out and "device:cpu,runtime:jax" in out
    assert str(store.state_dir) in out.replace("\n", "")


def test_a_new_reference_must_be_verified_again(fixtures: Fixtures, store: Store) -> None:
    _runs(fixtures)
    runs, _ = runlog.read(store)
    for r in runs:  # the same runs, against another reference
        runlog.append(store, runlog.Run(**{**r.__dict__, "digest": "sha256:" + "0" * 64}))
    (store.state_dir / runlog.LOG).write_text(
        "".join((store.state_dir / runlog.LOG).read_text().splitlines(True)[4:])
    )
    _, out, _ = run("expectations", "--json")
    assert {r["status"] for r in json.loads(out)["rows"]} == {"never"}


def test_add_from_a_verified_run_prints_the_diff_and_writes_only_when_asked(
    fixtures: Fixtures, project: Path
) -> None:
    _runs(fixtures)
    before = (project / "provenance" / "fam.json").read_text()
    code, out, _ = run("expectations", "add", NAME, "--env", "runtime:jax", "--from-run")
    assert code == 0, out
    assert '+      "runtime:jax": {' in out and '"metric": "max_abs"' in out
    assert "verified in device:cpu,runtime:jax" in out and "--write" in out
    assert (project / "provenance" / "fam.json").read_text() == before
    code, out, _ = run("expectations", "add", NAME, "--env", "runtime:jax", "--from-run", "--write")
    assert code == 0, out
    tolerance = registry_mod.load(project).get(NAME).tolerance
    assert tolerance is not None and tolerance.expectations is not None
    entry = {e.key: e.to_json() for e in tolerance.expectations}["runtime:jax"]
    assert entry["metric"] == "max_abs" and entry["max"] == 1e-6
    code, _, err = run("expectations", "add", NAME, "--env", "runtime:jax", "--from-run")
    assert code == 2 and "already has an expectation" in err


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ("device:mps", "no passing run"),  # ran, failed
        ("device:rocm", "no passing run"),  # never ran
        ("device:gpu", "none of"),
        ("colour:red", "unknown condition"),
    ],
)
def test_add_without_a_passing_run_there_is_refused(
    fixtures: Fixtures, env: str, says: str
) -> None:
    _runs(fixtures)
    code, _, err = run("expectations", "add", NAME, "--env", env, "--from-run", "--write")
    assert code == 2 and says in err and "fix:" in err


@pytest.mark.usefixtures("fixtures")
def test_an_unknown_record_is_refused_by_name() -> None:
    code, _, err = run("expectations", "--record", "fam/nope.npz")
    assert code == 2 and "fam/nope.npz" in err
