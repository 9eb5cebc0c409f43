from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.cli import main
from fixture_store.errors import RegistryError, UsageError
from fixture_store.objects.store import Store
from fixture_store.parity import runtimes as comparators
from fixture_store.parity.cases import Report, apply_known_failures, compare, select_cases
from fixture_store.parity.results import FAILING, CaseResult, KnownError, Outcome
from fixture_store.parity.runtimes.ort import from_ortvalue, to_ortvalue
from fixture_store.registry import conditions
from fixture_store.registry.files import write_family
from fixture_store.registry.known_failures import KnownFailure
from tests.support.onnx_helpers import NODE_DATA, make_project, register_case, tamper
from tests.support.spy_runtimes import spy_log


def _rewrite_output(folder: Path, change: Callable[[np.ndarray], np.ndarray]) -> None:
    pb = folder / "test_data_set_0" / "output_0.pb"
    tensor = onnx.TensorProto()
    tensor.ParseFromString(pb.read_bytes())
    array = numpy_helper.to_array(tensor)
    pb.write_bytes(numpy_helper.from_array(change(array), tensor.name).SerializeToString())


def _variant(
    project: Path, store: Store, case: str, suffix: str, change: Callable[[np.ndarray], np.ndarray]
) -> str:
    source = project / "variants" / f"{case}_{suffix}"
    shutil.copytree(NODE_DATA / case, source)
    _rewrite_output(source, change)
    return register_case(project, store, case, name=f"onnx-node/{case}_{suffix}", source_dir=source)


def _reload(fixtures: Fixtures, project: Path) -> Fixtures:
    return Fixtures(fixtures.store, registry_mod.load(project))


def _perturbed_abs(
    project: Path, store: Store, known_failures: Callable[[str], list[KnownFailure]]
) -> tuple[Fixtures, str]:
    """test_abs and a variant with an edited expected output, the registry holding the known
    failures ``known_failures(variant name)``; returns the reloaded view and the variant."""
    fixtures = make_project(project, store, ("test_abs",))
    name = _variant(project, store, "test_abs", "perturbed", lambda a: a + np.float32(1))
    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=known_failures(name),
    )
    return _reload(fixtures, project), name


def by(report: Report, name: str, runtime: str) -> CaseResult:
    return next(r for r in report.results if r.name == name and r.runtime == runtime)


def known_error(result: CaseResult) -> KnownError:
    """The error a known failure saw, which every result this is asked of has."""
    assert result.known_error is not None
    return result.known_error


def test_real_cases_pass_on_both_runtimes_in_worker_processes(project: Path, store: Store) -> None:
    fixtures = make_project(project, store)
    names = select_cases(fixtures, families=["onnx-node"])
    report = compare(fixtures, names, ["ort", "reference"], jobs=2)
    assert {(r.name, r.runtime): r.outcome for r in report.results} == {
        (n, rt): Outcome.PASS for n in names for rt in ("ort", "reference")
    }
    assert report.exit_code == 0
    bf16 = by(report, "onnx-node/test_cast_FLOAT_to_BFLOAT16", "ort")
    # The bfloat16 output came back through the OrtValue bridge bit for bit.
    assert [str(a.outcome) for a in bf16.arrays] == ["bit-identical"]


def test_perturbed_expected_output_is_a_mismatch_with_error_stats(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store, ("test_abs",))

    def bump(a: np.ndarray) -> np.ndarray:
        a = a.copy()
        a[1, 2, 3] += 0.5
        return a

    name = _variant(project, store, "test_abs", "perturbed", bump)
    report = compare(_reload(fixtures, project), [name], ["ort", "reference"], jobs=0)
    for rt in ("ort", "reference"):
        result = by(report, name, rt)
        assert result.outcome is Outcome.MISMATCH, result
        array = result.arrays[0]
        assert array.worst_index == (1, 2, 3)
        assert array.max_abs == pytest.approx(0.5)
        assert 0 < array.mean_abs < 0.5
        assert "1 of 60 elements outside" in result.detail
    assert report.exit_code == 1


def test_dtype_mismatch_fails_however_close_the_values(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    name = _variant(project, store, "test_abs", "float64", lambda a: a.astype(np.float64))
    result = by(compare(_reload(fixtures, project), [name], ["ort"], jobs=0), name, "ort")
    assert result.outcome is Outcome.MISMATCH
    assert "dtype float32 where float64 is expected" in result.detail


def test_record_tolerance_and_per_array_override_apply(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    name = _variant(project, store, "test_abs", "loose", lambda a: a * np.float32(1.01))
    registry = registry_mod.load(project)
    fam = registry.families["onnx-node"]
    records = dict(fam.records)
    raw = records[name].to_json()
    raw["tolerance"] = {"metric": "allclose", "rtol": 1e-3, "per_array": {"y": {"rtol": 0.05}}}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, "onnx-node", records.values())
    result = by(
        compare(_reload(fixtures, project), [name], ["reference"], jobs=0), name, "reference"
    )
    assert result.outcome is Outcome.PASS
    assert result.arrays[0].tolerance is not None
    assert result.arrays[0].tolerance.rtol == 0.05


def test_tampered_case_is_refused_and_the_runtime_is_never_called(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store, ("test_abs", "test_add"))
    tamper(store, fixtures, "onnx-node/test_abs", "test_data_set_0/output_0.pb")
    tamper(store, fixtures, "onnx-node/test_add", "model.onnx")
    log = spy_log(store.root)
    log.touch()
    register_case(project, store, "test_equal_string")
    names = ["onnx-node/test_abs", "onnx-node/test_add", "onnx-node/test_equal_string"]
    report = compare(_reload(fixtures, project), names, ["tests.support.spy_runtimes:spy"], jobs=2)
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes == {
        "onnx-node/test_abs": Outcome.REFUSED,
        "onnx-node/test_add": Outcome.REFUSED,
        "onnx-node/test_equal_string": Outcome.PASS,
    }
    assert "mismatch" in by(report, "onnx-node/test_add", "tests.support.spy_runtimes:spy").detail
    # The worker's runtime entry point saw only the verified case.
    assert log.read_text().split() == ["onnx-node/test_equal_string"]


def test_refused_in_process_never_reaches_the_runtime(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    # An expected output, not the model: the case still loads, so only verification refuses it.
    tamper(store, fixtures, "onnx-node/test_abs", "test_data_set_0/output_0.pb")
    calls: list[str] = []

    def spy(case: object) -> object:
        calls.append(case.name)  # type: ignore[attr-defined]
        raise AssertionError("the runtime must not be called")

    monkeypatch.setattr(comparators.ort, "prepare", spy)
    report = compare(fixtures, ["onnx-node/test_abs"], ["ort"], jobs=0)
    assert report.results[0].outcome is Outcome.REFUSED
    assert calls == []


def test_known_failures_are_registry_data_and_a_now_passing_one_is_reported(
    project: Path, store: Store
) -> None:
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda _name: [
            KnownFailure(
                "ort",
                "onnx-node/test_abs_*",
                "expected output edited",
                "mismatch",
                expect=1,
                max_abs=2,
            ),
            KnownFailure("*", "onnx-node/test_abs", "stale entry: the case passes"),
        ],
    )
    report = compare(fixtures, ["onnx-node/test_abs", name], ["ort", "reference"], jobs=0)
    known = by(report, name, "ort")
    assert known.outcome is Outcome.KNOWN_FAILURE
    assert known.underlying is Outcome.MISMATCH and known.known_reason == "expected output edited"
    assert by(report, name, "reference").outcome is Outcome.MISMATCH  # entry is per runtime
    stale = by(report, "onnx-node/test_abs", "ort")
    assert stale.outcome is Outcome.PASS and stale.now_passing
    assert report.exit_code == 1
    assert [r["name"] for r in report.to_json()["now_passing"]] == ["onnx-node/test_abs"] * 2


@pytest.mark.parametrize("outcome", [Outcome.REFUSED, Outcome.GAP])
def test_a_refusal_or_a_gap_is_never_excused_by_a_known_failure(outcome: Outcome) -> None:
    refused = CaseResult("onnx-node/test_abs", "ort", outcome, "mismatch: damaged", fix="fetch")
    entries = [
        KnownFailure("ort", "onnx-node/test_abs", "registered for this very outcome", str(outcome)),
        KnownFailure("*", "onnx-node/*", "excuses every outcome of every case"),
    ]
    for known in (entries, entries[::-1]):
        assert apply_known_failures(refused, known) == refused
    assert refused.failing is (outcome is Outcome.REFUSED)


def test_a_refused_case_stays_refused_under_a_known_failure_and_fails_the_run(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    tamper(store, fixtures, "onnx-node/test_abs", "model.onnx")
    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=[KnownFailure("*", "onnx-node/*", "excuses everything", expect=1)],
    )
    report = compare(_reload(fixtures, project), ["onnx-node/test_abs"], ["ort"], jobs=0)
    [result] = report.results
    assert result.outcome is Outcome.REFUSED and result.known_reason is None
    assert report.exit_code == 1


def test_a_known_failure_that_now_passes_alone_fails_the_run(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=[KnownFailure("ort", "onnx-node/test_abs", "stale: the case passes")],
    )
    report = compare(_reload(fixtures, project), ["onnx-node/test_abs"], ["ort"], jobs=0)
    [result] = report.results
    # The only thing wrong with this run is the stale entry: nothing else can fail it.
    assert result.outcome is Outcome.PASS and result.outcome not in FAILING
    assert result.now_passing and result.failing
    assert result.fix is not None and "remove the known failure" in result.fix
    assert report.exit_code == 1
    cli = CliRunner().invoke(
        main, ["compare", "onnx-node/test_abs", "--runtime", "ort", "--jobs", "0"]
    )
    assert cli.exit_code == 1, cli.output


def test_known_failure_for_another_outcome_does_not_excuse(project: Path, store: Store) -> None:
    fixtures, name = _perturbed_abs(
        project, store, lambda name: [KnownFailure("ort", name, "ORT lacks it", "not-implemented")]
    )
    result = by(compare(fixtures, [name], ["ort"], jobs=0), name, "ort")
    assert result.outcome is Outcome.MISMATCH
    assert "registered as 'not-implemented'" in result.detail


def test_a_known_mismatch_is_excused_up_to_its_bound_and_fails_beyond_it(
    project: Path, store: Store
) -> None:
    # The variant's expected output is the real one plus 1: the error is 1 everywhere (a float32
    # rounding above it, so the suggested bound rounds up to 2.1).
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda name: [
            KnownFailure("ort", name, "expected output edited", "mismatch", max_abs=2),
            KnownFailure("reference", name, "expected output edited", "mismatch", max_abs=0.5),
        ],
    )
    report = compare(fixtures, [name], ["ort", "reference"], jobs=0)
    within = by(report, name, "ort")
    assert within.outcome is Outcome.KNOWN_FAILURE and within.underlying is Outcome.MISMATCH
    assert known_error(within).max_abs == pytest.approx(1.0)
    assert known_error(within).max_abs_bound == 2 and known_error(within).max_rel is None
    beyond = by(report, name, "reference")
    assert beyond.outcome is Outcome.MISMATCH and beyond.beyond_known_bounds
    assert f"the known failure {name!r} (reference) excuses a smaller error" in beyond.detail
    assert "max_abs 1 > bound 0.5" in beyond.detail
    assert beyond.fix is not None and "set max_abs 2.1 (twice the error seen)" in beyond.fix
    assert "in provenance/onnx-node.json;" in beyond.fix
    assert report.exit_code == 1
    (listed,) = report.to_json()["beyond_known_bounds"]
    assert listed["name"] == name and listed["runtime"] == "reference"
    assert listed["max_abs_bound"] == 0.5 and listed["max_abs"] == pytest.approx(1.0)


def test_a_relative_bound_is_checked_where_the_entry_sets_one(project: Path, store: Store) -> None:
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda name: [KnownFailure("ort", name, "edited", "mismatch", max_abs=2, max_rel=0.1)],
    )
    result = by(compare(fixtures, [name], ["ort"], jobs=0), name, "ort")
    assert result.outcome is Outcome.MISMATCH
    assert "max_rel" in result.detail and "max_abs" not in result.detail.split("(the known")[1]
    assert result.fix is not None and "set max_rel " in result.fix and "max_abs" not in result.fix
    max_rel = known_error(result).max_rel
    assert max_rel is not None and 0.1 < max_rel <= 1


def test_a_zero_bound_excuses_a_structural_mismatch_and_no_value_error(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    wrong_dtype = _variant(project, store, "test_abs", "float64", lambda a: a.astype(np.float64))
    fixtures, wrong_values = _perturbed_abs(
        project,
        store,
        lambda name: [
            KnownFailure("ort", f"{name[:-9]}*", "structural", "mismatch", expect=2, max_abs=0)
        ],
    )
    report = compare(fixtures, [wrong_dtype, wrong_values], ["ort"], jobs=0)
    structural = by(report, wrong_dtype, "ort")
    assert structural.outcome is Outcome.KNOWN_FAILURE and known_error(structural).max_abs == 0
    values = by(report, wrong_values, "ort")
    assert values.outcome is Outcome.MISMATCH and "max_abs 1 > bound 0" in values.detail


def test_an_entry_without_an_outcome_does_not_excuse_a_mismatch(
    project: Path, store: Store
) -> None:
    fixtures, name = _perturbed_abs(
        project, store, lambda name: [KnownFailure("ort", name, "something fails")]
    )
    result = by(compare(fixtures, [name], ["ort"], jobs=0), name, "ort")
    assert result.outcome is Outcome.MISMATCH and "names no outcome" in result.detail


def test_a_glob_matching_other_cases_than_it_expects_stops_the_compare(
    project: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda _name: [KnownFailure("ort", "onnx-node/test_abs*", "r", "error", expect=1)],
    )
    monkeypatch.setattr(comparators.ort, "prepare", lambda _case: pytest.fail("ran a case"))
    with pytest.raises(RegistryError) as e:
        compare(fixtures, [name], ["ort"], jobs=0)
    assert "'onnx-node/test_abs*' (ort) expects 1 case(s) and matches 2: " in str(e.value)
    assert f"onnx-node/test_abs, {name}" in str(e.value)
    assert e.value.exit_code == 2


def test_cli_compare_reports_a_known_mismatch_beyond_its_bound_and_its_metrics(
    project: Path, store: Store, tmp_path: Path
) -> None:
    _, name = _perturbed_abs(
        project,
        store,
        lambda name: [
            KnownFailure("ort", name, "edited", "mismatch", max_abs=2),
            KnownFailure("reference", name, "edited", "mismatch", max_abs=0.5),
        ],
    )
    metrics_path = tmp_path / "metrics.json"
    result = CliRunner().invoke(
        main, ["compare", name, "--jobs", "0", "--metrics", str(metrics_path)]
    )
    assert result.exit_code == 1, result.output
    assert f"known failure exceeded: reference {name}: " in result.stderr
    assert "max_abs 1 > bound 0.5" in result.stderr and "fix: if the larger error" in result.stderr
    metrics = json.loads(metrics_path.read_text())
    assert metrics == {
        "ort": {"pass": 0, "known": 1, "failing": 0},
        "reference": {"pass": 0, "known": 0, "failing": 1},
    }
    # The errors next to their bounds are run numbers: in the run folder beside the metrics.
    with open(tmp_path / "run" / "known-mismatches.csv") as f:
        entries = {row["key"]: row for row in csv.DictReader(f)}
    assert set(entries) == {f"{name} (ort)", f"{name} (reference)"}
    assert entries[f"{name} (ort)"]["cases"] == "1"
    assert float(entries[f"{name} (ort)"]["max_abs"]) == pytest.approx(1.0)
    assert float(entries[f"{name} (ort)"]["max_abs_bound"]) == 2
    assert entries[f"{name} (ort)"]["structural"] == "False"

    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=[KnownFailure("ort", "onnx-node/*", "r", "error", expect=1)],
    )
    stale = CliRunner().invoke(main, ["compare", name, "--jobs", "0"])
    assert stale.exit_code == 2
    assert "expects 1 case(s) and matches 2" in stale.stderr


NOWHERE = "locale-missing:xx_NOWHERE.UTF-8"  # holds on every machine: no such locale
EVERYWHERE = "locale-missing:C"  # never holds: the C locale always exists


def test_a_known_failure_whose_condition_does_not_hold_is_reported_and_excuses_nothing(
    project: Path, store: Store
) -> None:
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda name: [
            KnownFailure("ort", "onnx-node/test_abs", "needs a locale", "error", EVERYWHERE),
            KnownFailure("ort", name, "needs a locale", "mismatch", EVERYWHERE, max_abs=2),
            KnownFailure(
                "reference", name, "fails without a locale", "mismatch", NOWHERE, max_abs=2
            ),
        ],
    )

    passing = compare(fixtures, ["onnx-node/test_abs"], ["ort"], jobs=0)
    result = by(passing, "onnx-node/test_abs", "ort")
    # Where the condition does not hold the case is expected to pass: a pass is not "now passing".
    assert result.outcome is Outcome.PASS and not result.now_passing
    assert result.inactive_condition == EVERYWHERE and "applies only where" in result.detail
    assert passing.exit_code == 0
    assert passing.to_json()["inactive_known_failures"] == [
        {"name": "onnx-node/test_abs", "runtime": "ort", "outcome": "pass", "condition": EVERYWHERE}
    ]

    failing = compare(fixtures, [name], ["ort", "reference"], jobs=0)
    inactive = by(failing, name, "ort")
    assert inactive.outcome is Outcome.MISMATCH and inactive.inactive_condition == EVERYWHERE
    active = by(failing, name, "reference")
    assert active.outcome is Outcome.KNOWN_FAILURE and active.inactive_condition is None
    assert failing.exit_code == 1
    # The tracked view (DVC's report) keeps a known mismatch's classification and its bounds,
    # not its error or per-array statistics (run numbers).
    tracked = failing.tracked()
    assert by(tracked, name, "reference").arrays == () and active.arrays
    assert by(tracked, name, "reference").known_reason == "fails without a locale"
    assert known_error(by(tracked, name, "reference")).max_abs_bound == 2
    assert known_error(by(tracked, name, "reference")).max_abs == 0
    assert known_error(active).max_abs == pytest.approx(1.0)
    assert by(tracked, name, "ort").arrays == () and inactive.arrays


def test_a_known_failures_environment_condition_holds_where_the_runtime_computes(
    project: Path, store: Store
) -> None:
    ort_only = "provider:CPUExecutionProvider"
    fixtures, name = _perturbed_abs(
        project,
        store,
        lambda name: [
            KnownFailure("*", name, "the CPU provider's rounding", "mismatch", ort_only, max_abs=2)
        ],
    )
    failing = compare(fixtures, [name], ["ort", "reference"], jobs=0)
    assert by(failing, name, "ort").outcome is Outcome.KNOWN_FAILURE
    reference = by(failing, name, "reference")
    assert reference.outcome is Outcome.MISMATCH and reference.inactive_condition == ort_only


@pytest.mark.slow
def test_the_string_normalizer_entry_gives_the_same_exit_code_with_and_without_the_locale(
    project: Path, store: Store, tmp_path: Path
) -> None:
    locales = tmp_path / "locales"
    locales.mkdir()
    localedef = shutil.which("localedef")
    built = localedef and subprocess.run(
        [localedef, "-i", "en_US", "-f", "UTF-8", str(locales / "en_US.UTF-8")],
        capture_output=True,
        check=False,
    )
    if not built or built.returncode > 1:  # 1 means warnings; the locale is still written
        pytest.skip("needs glibc's localedef with locale sources to build en_US.UTF-8 privately")
    case = "test_strnormalizer_export_monday_casesensintive_upper"
    make_project(project, store, (case,))
    # The project's own registry entry, as committed.
    repo = Path(__file__).resolve().parents[2]
    entries = [
        k for k in registry_mod.load(repo).known_failures() if k.matches("ort", f"onnx-node/{case}")
    ]
    assert [k.condition for k in entries] == ["locale-missing:en_US.UTF-8"]
    # This project registers the one case: the entry as an exact name.
    entries = [dataclasses.replace(k, pattern=f"onnx-node/{case}", expect=None) for k in entries]
    registry = registry_mod.load(project)
    write_family(
        registry,
        "onnx-node",
        registry.families["onnx-node"].records.values(),
        known_failures=entries,
    )

    def run(locpath: Path | None) -> tuple[int, dict[str, Any]]:
        # A process of its own: the comparator's fork server keeps the environment it started
        # with, as a real run does.
        env = {k: v for k, v in os.environ.items() if k != "LOCPATH"}
        if locpath is not None:
            env["LOCPATH"] = str(locpath)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fixture_store.cli",
                "--store",
                str(store.root),
                "--registry",
                str(project),
                "compare",
                f"onnx-node/{case}",
                "--runtime",
                "ort",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.returncode, json.loads(proc.stdout)["results"][0]

    code_here, here = run(None)
    if conditions.holds("locale-missing:en_US.UTF-8"):
        assert (here["outcome"], here["underlying"]) == ("known-failure", "error")
    else:  # this machine has the locale installed
        assert here["outcome"] == "pass" and here["inactive_condition"]
    code_with, with_locale = run(locales)
    assert with_locale["outcome"] == "pass" and not with_locale["now_passing"]
    assert with_locale["inactive_condition"] == "locale-missing:en_US.UTF-8"
    assert code_here == code_with == 0


def test_a_crash_is_classified_and_the_run_goes_on(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs", "test_add", "test_equal_string"))
    names = select_cases(fixtures, families=["onnx-node"])
    report = compare(fixtures, names, ["tests.support.spy_runtimes:crash"], jobs=1)
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes["onnx-node/test_abs"] is Outcome.CRASH
    assert "SIGSEGV" in by(report, "onnx-node/test_abs", "tests.support.spy_runtimes:crash").detail
    assert outcomes["onnx-node/test_add"] is Outcome.PASS
    assert outcomes["onnx-node/test_equal_string"] is Outcome.PASS


def test_a_hang_times_out_and_the_run_goes_on(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs", "test_add"))
    report = compare(
        fixtures,
        ["onnx-node/test_abs", "onnx-node/test_add"],
        ["tests.support.spy_runtimes:hang"],
        jobs=1,
        timeout=3,
    )
    outcomes = {r.name: r.outcome for r in report.results}
    assert outcomes == {"onnx-node/test_abs": Outcome.TIMEOUT, "onnx-node/test_add": Outcome.PASS}


def test_not_implemented_is_classified(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_cast_FLOAT_to_FLOAT4E2M1",))
    result = compare(
        fixtures, ["onnx-node/test_cast_FLOAT_to_FLOAT4E2M1"], ["ort"], jobs=0
    ).results[0]
    assert result.outcome is Outcome.NOT_IMPLEMENTED
    assert "Cast" in result.detail


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "int4", "uint4", "float4_e2m1fn"])
def test_ortvalue_bridge_round_trips_ml_dtypes(dtype: str) -> None:
    import ml_dtypes

    values = np.array([[0, 1, -2], [3, -4, 5], [6, -7, 1]], np.float32)
    if dtype.startswith("uint"):
        values = np.abs(values)
    array = values.astype(getattr(ml_dtypes, dtype))
    back = from_ortvalue(to_ortvalue(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


def test_cli_compare_json_and_html_report(project: Path, store: Store, tmp_path: Path) -> None:
    fixtures = make_project(project, store, ("test_abs", "test_cast_FLOAT_to_FLOAT4E2M1"))
    del fixtures
    html = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["compare", "--family", "onnx-node", "--json", "--report", str(html), "--jobs", "0"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["counts"] == {"ort": {"pass": 1, "not-implemented": 1}, "reference": {"pass": 2}}
    page = html.read_text()
    # one inline script (the filters), nothing fetched
    assert page.count("<script") == 1 and "<script>" in page and "http" not in page
    assert ">Abs 2</span>" in page and ">Cast</td>" in page
    assert "not-implemented" in page


def test_cli_compare_files_for_dvc_are_stable_metrics_and_plot(
    project: Path, store: Store, tmp_path: Path
) -> None:
    make_project(project, store, ("test_abs", "test_cast_FLOAT_to_FLOAT4E2M1"))
    runs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        result = CliRunner().invoke(
            main,
            [
                "compare",
                "--family",
                "onnx-node",
                "--jobs",
                "0",
                "--output",
                str(out / "compare.json"),
                "--report",
                str(out / "compare.html"),
                "--metrics",
                str(out / "metrics.json"),
                "--plot",
                str(out / "ops.csv"),
            ],
        )
        assert result.exit_code == 1, result.output
        runs.append(out)
    for f in ("compare.json", "compare.html", "metrics.json", "ops.csv"):
        assert (runs[0] / f).read_bytes() == (runs[1] / f).read_bytes(), f
        assert str(store.root) not in (runs[0] / f).read_text(), f
    doc = json.loads((runs[0] / "compare.json").read_text())
    assert "wall_seconds" not in doc and not any("seconds" in r for r in doc["results"])
    assert not any("arrays" in r or "detail" in r for r in doc["results"])
    run = json.loads((runs[0] / "run" / "compare.json").read_text())
    assert run["wall_seconds"] > 0 and all("seconds" in r for r in run["results"])
    assert "NOT_IMPLEMENTED" in (runs[0] / "run" / "compare.html").read_text()
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert metrics == {
        "ort": {"pass": 1, "known": 0, "failing": 1},
        "reference": {"pass": 2, "known": 0, "failing": 0},
    }
    rows = (runs[0] / "ops.csv").read_text().splitlines()
    assert rows[0] == "key,operator,runtime,cases,passed,known_failure,failing,pass_rate"
    assert "Abs (ort),Abs,ort,1,1,0,0,1.0" in rows
    assert "Cast (ort),Cast,ort,1,0,0,1,0.0" in rows


def test_cli_compare_table_and_usage_errors(project: Path, store: Store) -> None:
    make_project(project, store, ("test_abs",))
    ok = CliRunner().invoke(main, ["compare", "onnx-node/test_abs", "--jobs", "0"])
    assert ok.exit_code == 0, ok.output
    assert "pass" in ok.stdout and "compare: 1 cases" in ok.stdout
    unknown = CliRunner().invoke(main, ["compare", "onnx-node/test_nope"])
    assert unknown.exit_code == 2
    assert "no record" in unknown.stderr
    bad_runtime = CliRunner().invoke(
        main, ["compare", "onnx-node/test_abs", "--runtime", "tensorflow"]
    )
    assert bad_runtime.exit_code == 2 and "unknown runtime" in bad_runtime.stderr


def test_select_cases_rejects_a_named_non_case(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    (project / "blob.bin").write_bytes(b"x")
    from fixture_store import ingest

    ingest.add(
        store, fixtures.registry, project / "blob.bin", name="onnx-node/blob", kind="fixture"
    )
    with pytest.raises(UsageError, match="onnx-case"):
        select_cases(_reload(fixtures, project), ["onnx-node/blob"])
    assert select_cases(_reload(fixtures, project), families=["onnx-node"]) == [
        "onnx-node/test_abs"
    ]


def test_a_per_array_key_that_names_no_output_refuses_the_case(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    registry = registry_mod.load(project)
    records = dict(registry.families["onnx-node"].records)
    name = "onnx-node/test_abs"
    raw = records[name].to_json()
    raw["tolerance"] = {"metric": "allclose", "per_array": {"output_0": {"rtol": 0.5}}}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, "onnx-node", records.values())
    result = by(
        compare(_reload(fixtures, project), [name], ["reference"], jobs=0), name, "reference"
    )
    assert result.outcome is Outcome.REFUSED
    assert result.detail == (
        "tolerance.per_array.output_0: names no output of the model (its outputs: ['y'])"
    )


def test_a_case_judged_against_an_oracle_is_refused_not_passed(project: Path, store: Store) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    registry = registry_mod.load(project)
    records = dict(registry.families["onnx-node"].records)
    name = "onnx-node/test_abs"
    raw = records[name].to_json()
    oracle = {"record": "onnx-node/test_abs", "metric": "max_abs", "factor": 2}
    raw["tolerance"] = {"metric": "allclose", "oracle": oracle}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, "onnx-node", records.values())
    result = by(
        compare(_reload(fixtures, project), [name], ["reference"], jobs=0), name, "reference"
    )
    assert result.outcome is Outcome.REFUSED
    assert result.detail.startswith("tolerance.oracle: compare does not judge")


def test_each_runtime_is_judged_by_the_expectation_of_its_environment(
    project: Path, store: Store
) -> None:
    fixtures = make_project(project, store, ("test_abs",))
    registry = registry_mod.load(project)
    records = dict(registry.families["onnx-node"].records)
    name = "onnx-node/test_abs"
    raw = records[name].to_json()
    raw["tolerance"] = {
        "metric": "exact",
        "expectations": {
            "runtime:onnxruntime,provider:CPUExecutionProvider": {"metric": "max_abs", "max": 0.5},
            "runtime:onnx-reference": {"reference": "onnx-node/other"},
        },
    }
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, "onnx-node", records.values())
    report = compare(_reload(fixtures, project), [name], ["ort", "reference"], jobs=0)
    ort = by(report, name, "ort")
    assert ort.outcome is Outcome.PASS
    assert {a.tolerance.metric for a in ort.arrays if a.tolerance} == {"max_abs"}
    reference = by(report, name, "reference")
    assert reference.outcome is Outcome.REFUSED
    assert "names the reference onnx-node/other" in reference.detail


FLOAT_CASES = ("test_cos", "test_exp", "test_matmul_2d", "test_sigmoid", "test_softmax_axis_0")


def _compare_files(out: Path, runtime: str) -> None:
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "--family",
            "onnx-node",
            "--runtime",
            runtime,
            "--jobs",
            "0",
            "--output",
            str(out / "compare.json"),
            "--report",
            str(out / "compare.html"),
            "--metrics",
            str(out / "{runtime}.json"),
            "--plot",
            str(out / "ops.csv"),
        ],
    )
    assert result.exit_code == 0, result.output


def test_tracked_compare_files_are_the_same_bytes_on_another_machine(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Passing outputs moved within their tolerance (other threads, no graph optimizations, one
    ULP here and there: another CPU's kernels) leave every tracked file byte-identical; only the
    run reports beside them change."""
    from tests.support import other_machine

    runtime = "tests.support.other_machine:prepare"
    make_project(project, store, FLOAT_CASES)
    _perturbed_abs(
        project, store, lambda name: [KnownFailure(runtime, name, "edited", "mismatch", max_abs=2)]
    )
    outs = []
    for seed, threads in ((1, 1), (2, 2)):
        monkeypatch.setattr(other_machine, "SEED", seed)
        monkeypatch.setattr(other_machine, "THREADS", threads)
        outs.append(tmp_path / f"machine{seed}")
        _compare_files(outs[-1], runtime)
    one, other = outs
    metrics_file = f"{runtime}.json"
    for name in ("compare.json", "compare.html", "ops.csv", metrics_file):
        assert (one / name).read_bytes() == (other / name).read_bytes(), name
    tracked = sorted(str(p.relative_to(one)) for p in one.iterdir() if p.is_file())
    assert tracked == sorted(["compare.html", "compare.json", "ops.csv", metrics_file])
    # The perturbation was real: the run reports beside them differ in their errors.
    assert (one / "run" / "compare.json").read_bytes() != (
        other / "run" / "compare.json"
    ).read_bytes()
    doc = json.loads((one / "compare.json").read_text())
    assert doc["counts"] == {runtime: {"pass": len(FLOAT_CASES) + 1, "known-failure": 1}}
    assert json.loads((one / metrics_file).read_text()) == {
        "pass": len(FLOAT_CASES) + 1,
        "known": 1,
        "failing": 0,
    }
