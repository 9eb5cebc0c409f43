"""``fixture-store tolerance suggest``: observed errors, proposed bounds, and --accept writing
them with a why and the evidence (``fixture_store.cli.tolerance``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import ParityError, assert_parity
from tests.support.cli import run

NAME = "m/ref.npz"
RNG = np.random.default_rng(3)
LOGITS = RNG.standard_normal((4, 8)).astype(np.float32)
HIDDEN = RNG.standard_normal(16)


@pytest.fixture
def runs(project: Path, store: Store) -> list[str]:  # noqa: ARG001
    """A registered reference and three runs of a port, each a little off."""
    np.savez(project / "ref.npz", logits=LOGITS, hidden=HIDDEN)
    assert run("add", "ref.npz", "--name", NAME, "--kind", "array")[0] == 0
    names = []
    for i in (1, 2, 3):
        np.savez(project / f"run{i}.npz", logits=LOGITS + np.float32(1.2e-4 * i), hidden=HIDDEN)
        names.append(f"run{i}.npz")
    return names


def _candidates(names: list[str]) -> list[str]:
    return [arg for n in names for arg in ("--candidate", n)]


def test_suggest_reports_the_largest_errors_and_proposes_twice_them_rounded_up(
    project: Path, runs: list[str]
) -> None:
    before = (project / "provenance" / "m.json").read_text()
    code, out, err = run("tolerance", "suggest", NAME, *_candidates(runs), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["runs"] == 3 and doc["environments"] == []
    logits = next(a for a in doc["arrays"] if a["name"] == "logits")
    assert logits["observed"]["max_abs"] == pytest.approx(3.6e-4, rel=1e-3)
    assert logits["proposed"] == {"rms": 0.0008, "max_abs": 0.0008}  # 2 x 3.6e-4, rounded up
    hidden = next(a for a in doc["arrays"] if a["name"] == "hidden")
    assert hidden["observed"] == {"rms": 0.0, "max_abs": 0.0}
    assert hidden["proposed"] == {"rms": 1e-7, "max_abs": 1e-7}  # float64's default atol
    assert doc["proposed"] == {"rms": 0.0008, "max_abs": 0.0008}
    code, out, _ = run("tolerance", "suggest", NAME, *_candidates(runs))
    assert code == 0
    assert "proposed, the record's rule: rms <= 0.0008 and max_abs <= 0.0008" in out
    assert "add --accept" in out
    assert (project / "provenance" / "m.json").read_text() == before  # nothing written


def test_accept_writes_the_bounds_with_a_why_and_the_evidence_and_parity_judges_by_them(
    project: Path, store: Store, runs: list[str]
) -> None:
    envs = ["device:cpu,runtime:numpy", "device:cpu,runtime:jax", "device:cuda,runtime:torch"]
    args = [arg for e in envs for arg in ("--environment", e)]
    why = "the port's own run-to-run spread"
    code, out, err = run(
        "tolerance", "suggest", NAME, *_candidates(runs), *args, "--why", why, "--accept"
    )
    assert code == 0, err
    assert '+    "evidence": {' in out and "--- m/ref.npz (before)" in out
    record = registry_mod.load(project).get(NAME)
    assert record.tolerance is not None
    written = record.tolerance.to_json()
    assert written["checks"] == [
        {"metric": "rms", "max": 0.0008},
        {"metric": "max_abs", "max": 0.0008},
    ]
    assert written["evidence"]["runs"] == 3
    assert written["evidence"]["environments"] == envs
    assert written["evidence"]["observed"]["max_abs"] == pytest.approx(3.6e-4, rel=1e-3)
    assert written["why"].startswith(f"{why}; calibrated over 3 runs (device:cpu,runtime:numpy")
    fixtures = Fixtures(store, registry_mod.load(project))
    assert assert_parity(
        NAME, {"logits": LOGITS + np.float32(3.6e-4), "hidden": HIDDEN}, fixtures=fixtures
    ).ok
    with pytest.raises(ParityError) as info:
        assert_parity(
            NAME, {"logits": LOGITS + np.float32(3e-3), "hidden": HIDDEN}, fixtures=fixtures
        )
    assert f"(why this rule: {why}; calibrated over 3 runs" in str(info.value)


def test_accept_per_array_writes_an_entry_for_each_array(project: Path, runs: list[str]) -> None:
    code, _, err = run(
        "tolerance",
        "suggest",
        NAME,
        *_candidates(runs[:1]),
        "--metric",
        "ulp",
        "--scope",
        "array",
        "--accept",
    )
    assert code == 0, err
    written = registry_mod.load(project).get(NAME).tolerance
    assert written is not None
    per_array = written.to_json()["per_array"]
    assert set(per_array) == {"logits", "hidden"}
    assert per_array["hidden"]["max"] == 1 and per_array["hidden"]["metric"] == "ulp"
    assert per_array["hidden"]["evidence"]["runs"] == 1
    assert isinstance(per_array["logits"]["max"], int) and per_array["logits"]["max"] >= 2


def test_an_infinite_error_has_no_bound_and_accept_writes_nothing(
    project: Path, runs: list[str]
) -> None:
    hidden = HIDDEN.copy()
    hidden[3] = np.nan
    np.savez(project / "bad.npz", logits=LOGITS, hidden=hidden)
    code, out, _ = run(
        "tolerance", "suggest", NAME, "--candidate", runs[0], "--candidate", "bad.npz"
    )
    assert code == 1
    assert "no bound: hidden shows an infinite rms error" in out
    before = (project / "provenance" / "m.json").read_text()
    code, _, err = run("tolerance", "suggest", NAME, "--candidate", "bad.npz", "--accept")
    assert code == 2
    assert "array 'hidden' shows an infinite rms error" in err and "nothing was written" in err
    assert (project / "provenance" / "m.json").read_text() == before


@pytest.mark.parametrize(
    ("make", "args", "says"),
    [
        ("missing", [], "candidate missing.npz has no array 'hidden'"),
        ("text", [], "is no NPZ, NPY or safetensors file"),
        ("npy", [], "is one NPY array where the reference holds 2 arrays"),
        ("shape", [], "cannot be measured against the reference float32[4, 8]"),
        (None, ["--environment", "device:gpu"], "device 'gpu' is none of"),
        (
            None,
            ["--environment", "device:cpu", "--environment", "device:cuda"],
            "2 environments for 1 candidates",
        ),
    ],
)
def test_a_candidate_or_an_option_that_cannot_calibrate_is_refused_naming_it(
    project: Path, runs: list[str], make: str | None, args: list[str], says: str
) -> None:
    candidate = runs[0]
    if make == "missing":
        np.savez(project / "missing.npz", logits=LOGITS)
        candidate = "missing.npz"
    elif make == "text":
        (project / "notes.txt").write_text("not arrays")
        candidate = "notes.txt"
    elif make == "npy":
        np.save(project / "one.npy", LOGITS)
        candidate = "one.npy"
    elif make == "shape":
        np.savez(project / "shape.npz", logits=LOGITS.T, hidden=HIDDEN)
        candidate = "shape.npz"
    code, _, err = run("tolerance", "suggest", NAME, "--candidate", candidate, *args, "--accept")
    assert code == 2
    assert says in err and "Traceback" not in err


def test_an_ordered_record_gets_a_rule_for_its_outputs_and_one_for_its_intermediates(
    project: Path, store: Store
) -> None:
    acts = {f"blocks.{i}": RNG.standard_normal(8) for i in range(3)}
    np.savez(project / "acts.npz", logits=HIDDEN, **acts)  # type: ignore[arg-type]
    assert run("add", "acts.npz", "--name", "m/acts.npz", "--kind", "array")[0] == 0
    registry = registry_mod.load(project)
    record = registry.get("m/acts.npz")
    raw = {
        **record.to_json(),
        "tolerance": {"metric": "max_abs", "max": 1.0, "intermediates": {"order": ["blocks.*"]}},
    }
    registry_mod.write_family(
        registry, "m", [registry_mod.parse_record("m/acts.npz", raw, file="t")]
    )
    np.savez(
        project / "run.npz",
        logits=HIDDEN + 1e-3,
        **{n: a + 0.05 for n, a in acts.items()},  # type: ignore[arg-type]
    )
    code, _, err = run("tolerance", "suggest", "m/acts.npz", "--candidate", "run.npz", "--accept")
    assert code == 0, err
    written = registry_mod.load(project).get("m/acts.npz").tolerance
    assert written is not None
    doc = written.to_json()
    assert (doc["metric"], doc["max"]) == ("max_abs", 0.002)  # the output: 2 x 1e-3
    steps = doc["intermediates"]
    assert steps["order"] == ["blocks.*"]
    assert (steps["metric"], steps["max"]) == ("max_abs", 0.1)  # the activations: 2 x 0.05
    assert steps["evidence"]["observed"]["max_abs"] == pytest.approx(0.05)
    fixtures = Fixtures(store, registry_mod.load(project))
    assert assert_parity(
        "m/acts.npz",
        {"logits": HIDDEN + 1e-3, **{n: a + 0.05 for n, a in acts.items()}},
        fixtures=fixtures,
    ).ok


def test_a_candidate_is_read_by_its_bytes_as_a_dump_or_a_kept_regeneration_names_it(
    project: Path, runs: list[str]
) -> None:
    (project / "inspect").mkdir()
    (project / "inspect" / "candidate").write_bytes((project / runs[1]).read_bytes())  # no suffix
    code, out, err = run("tolerance", "suggest", NAME, "--candidate", "inspect/candidate", "--json")
    assert code == 0, err
    assert json.loads(out)["proposed"] == {"rms": 0.0005, "max_abs": 0.0005}  # 2 x 2.4e-4


@pytest.mark.usefixtures("store")
def test_calibration_measures_the_outputs_and_needs_no_input_from_the_candidates(
    project: Path,
) -> None:
    """A record naming ``hidden`` an input: candidates without it calibrate, ``--scope array``
    proposes no rule for it (one would be refused), and a candidate carrying other input values
    is refused, nothing written."""
    np.savez(project / "ref.npz", logits=LOGITS, hidden=HIDDEN)
    args = ("add", "ref.npz", "--name", NAME, "--kind", "array")
    assert run(*args, "--tolerance", "max_abs:1", "--inputs", "hidden")[0] == 0
    np.savez(project / "run1.npz", logits=LOGITS + np.float32(1e-4))
    np.savez(project / "run2.npz", logits=LOGITS, hidden=HIDDEN)
    code, _, err = run(
        "tolerance", "suggest", NAME, "--candidate", "run1.npz", "--candidate", "run2.npz",
        "--scope", "array", "--accept",
    )  # fmt: skip
    assert code == 0, err
    written = registry_mod.load(project).get(NAME).tolerance
    assert written is not None and written.inputs is not None
    assert sorted(written.to_json()["per_array"]) == ["logits"]
    before = (project / "provenance" / "m.json").read_text()
    np.savez(project / "run3.npz", logits=LOGITS, hidden=HIDDEN + 1)
    code, _, err = run("tolerance", "suggest", NAME, "--candidate", "run3.npz", "--accept")
    assert code == 2 and "carries input 'hidden' with other values" in err
    assert (project / "provenance" / "m.json").read_text() == before
