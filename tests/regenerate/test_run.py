"""Regeneration end to end on a toy stage: new, identical, within tolerance, drift, accept."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.errors import UsageError
from fixture_store.objects.store import Store
from fixture_store.parity import parts
from fixture_store.regenerate import Verdict, regenerate
from fixture_store.regenerate.envs import GeneratorError
from fixture_store.registry import GeneratorSource
from fixture_store.remotes.folder import FolderRemote
from fixture_store.remotes.packs import ONE_PER_KEY
from fixture_store.remotes.sync import plan, push
from fixture_store.verify import Status, verify_names
from tests.support.regen_project import PYTHON, make_project, set_scale


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.at(tmp_path / "store").ensure()


def run_cli(project: Path, store: Store, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        [
            "--store",
            str(store.root),
            "--registry",
            str(project),
            "regenerate",
            *args,
            "--python",
            PYTHON,
        ],
    )
    return result.exit_code, result.output


def accepted(project: Path, store: Store, tmp_path: Path) -> bytes:
    report = regenerate(project, store, "toy", scratch=tmp_path / "s0", accept=True, python=PYTHON)
    assert {str(c.verdict) for c in report.comparisons} == {"new"}
    return (project / "provenance" / "toy.json").read_bytes()


def test_new_outputs_are_accepted_with_lineage_and_environment(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    reg = registry_mod.load(project)
    values, case = reg.get("toy/values.npy"), reg.get("toy/case")
    assert case.lineage == (values.digest.text,)  # type: ignore[union-attr]
    assert isinstance(case.source, GeneratorSource) and case.source.environment is not None
    env = case.source.environment
    assert (
        env["packages"]["numpy"] and env["python"] and env["packages_digest"].startswith("sha256:")
    )
    assert case.source.params is not None and case.source.params["scale"] == 1.0
    assert store.has(case.members.members["output_0.npy"])  # type: ignore[union-attr]


def test_accepted_environment_keeps_only_what_defines_it(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    case = registry_mod.load(project).get("toy/case")
    assert isinstance(case.source, GeneratorSource) and case.source.environment is not None
    env = case.source.environment
    assert "platform" not in env and "machine" not in env
    assert re.fullmatch(r"\d+\.\d+", env["python"])
    # the machine details stay in the run's own log, in the untracked scratch folder
    log = json.loads((tmp_path / "s0" / "candidates" / "environment.json").read_text())
    assert log["platform"] and log["machine"] and log["python"].startswith(env["python"] + ".")


def test_stable_report_is_the_same_bytes_on_every_machine(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    report = regenerate(project, store, "toy", scratch=tmp_path / "s1", python=PYTHON)
    here = {**report.environment, "platform": "Linux-6.18.44-fc-v669-x86_64", "python": "3.11.7"}
    there = {**here, "platform": "Linux-6.1.0-28-amd64-x86_64", "python": "3.11.12"}
    there["machine"] = "aarch64"
    one, other = (
        json.dumps(
            dataclasses.replace(report, environment=e).to_json(parts.Part.TRACKED), sort_keys=True
        )
        for e in (here, there)
    )
    assert one == other
    assert "6.18.44" not in one and "3.11.7" not in one
    # the full report (not tracked by DVC) still says where it ran
    assert "6.18.44" in json.dumps(dataclasses.replace(report, environment=here).to_json())


def test_unchanged_generator_is_bit_identical_and_leaves_the_registry_alone(
    project: Path, store: Store, tmp_path: Path
) -> None:
    before = accepted(project, store, tmp_path)
    code, output = run_cli(project, store, "toy", "--scratch", str(tmp_path / "s1"))
    assert code == 0, output
    assert "2 bit-identical" in output
    assert (project / "provenance" / "toy.json").read_bytes() == before


def test_perturbed_output_beyond_tolerance_is_drift(
    project: Path, store: Store, tmp_path: Path
) -> None:
    before = accepted(project, store, tmp_path)
    objects_before = sorted(p for p, _ in store.iter_objects())
    set_scale(project, 1 + 1e-2)
    scratch = tmp_path / "s2"
    code, output = run_cli(project, store, "toy", "--scratch", str(scratch), "--json")
    assert code == 1
    doc = json.loads(output[output.index("{") : output.rindex("}") + 1])
    assert doc["counts"]["drift"] == 1 and doc["counts"]["bit-identical"] == 1
    (art,) = doc["artifacts"]
    assert art["name"] == "toy/case"
    (member,) = art["members"]
    assert member["path"] == "output_0.npy"
    (arr,) = member["arrays"]
    assert arr["max_rel"] == pytest.approx(1e-2, rel=1e-3)
    assert arr["outcome"] == "drift"
    # Both sides are kept for inspection, and nothing was registered or stored.
    assert Path(member["candidate"]).is_file() and Path(member["registered"]).is_file()
    assert Path(member["candidate"]).read_bytes() != Path(member["registered"]).read_bytes()
    assert (project / "provenance" / "toy.json").read_bytes() == before
    assert sorted(p for p, _ in store.iter_objects()) == objects_before


def test_perturbation_inside_tolerance_is_within_tolerance(
    project: Path, store: Store, tmp_path: Path
) -> None:
    before = accepted(project, store, tmp_path)
    set_scale(project, 1 + 1e-5)
    report = regenerate(project, store, "toy", scratch=tmp_path / "s3", python=PYTHON)
    verdicts = {c.name: c.verdict for c in report.comparisons}
    assert verdicts == {"toy/case": Verdict.WITHIN, "toy/values.npy": Verdict.IDENTICAL}
    (m,) = [m for c in report.comparisons for m in c.differing]
    assert 0 < m.max_rel < 1e-3
    assert report.ok
    assert (project / "provenance" / "toy.json").read_bytes() == before


def test_a_report_for_dvc_is_the_same_bytes_whatever_the_errors_within_tolerance(
    project: Path, store: Store, tmp_path: Path
) -> None:
    """Candidates bit-identical, or within tolerance by other errors (another machine's
    kernels), give the same tracked report; their verdicts, errors, digests and times are in the
    run report beside it."""
    accepted(project, store, tmp_path)
    reports = []
    for i, scale in enumerate((1 + 1e-5, 1 + 3e-5, 1.0)):
        set_scale(project, scale)
        reports.append(tmp_path / f"machine{i}" / "toy.json")
        result = CliRunner().invoke(
            main,
            [
                "--store",
                str(store.root),
                "--registry",
                str(project),
                "regenerate",
                "toy",
                "--python",
                PYTHON,
                "--scratch",
                str(tmp_path / f"s{i}"),
                "--report",
                str(reports[-1]),
            ],
        )
        assert result.exit_code == 0, result.output
    one, other, identical = reports
    assert one.read_bytes() == other.read_bytes() == identical.read_bytes()
    assert json.loads(one.read_text())["file_counts"] == {
        "pass": 3,
        "drift": 0,
        "new": 0,
        "missing": 0,
        "unavailable": 0,
    }
    runs = [json.loads((r.parent / "run" / "toy.json").read_text()) for r in reports]
    errors = [r["artifacts"][0]["members"][0]["arrays"][0]["max_abs"] for r in runs[:2]]
    assert 0 < errors[0] < errors[1]
    assert [r["file_counts"]["within-tolerance"] for r in runs] == [1, 1, 0]
    assert runs[2]["artifacts"] == [] and runs[2]["file_counts"]["bit-identical"] == 3


def test_accept_rewrites_the_record_in_stable_format(
    project: Path, store: Store, tmp_path: Path
) -> None:
    before = accepted(project, store, tmp_path)
    set_scale(project, 2.0)
    report = regenerate(project, store, "toy", scratch=tmp_path / "s4", accept=True, python=PYTHON)
    assert report.accepted == ("toy/case",)
    after = (project / "provenance" / "toy.json").read_bytes()
    assert after != before
    reg = registry_mod.load(project)
    # The stable format: loading and writing back gives the same bytes.
    registry_mod.write_family(reg, "toy", reg.families["toy"].records.values())
    assert (project / "provenance" / "toy.json").read_bytes() == after
    again = regenerate(project, store, "toy", scratch=tmp_path / "s5", python=PYTHON)
    assert {c.verdict for c in again.comparisons} == {Verdict.IDENTICAL}


def test_wrong_upstream_version_is_refused(tmp_path: Path, store: Store) -> None:
    project = make_project(tmp_path / "p", requirements=["numpy==0.0.1"])
    with pytest.raises(GeneratorError) as e:
        regenerate(project, store, "toy", scratch=tmp_path / "s", python=PYTHON)
    assert "refuses to run" in e.value.message
    assert "numpy==0.0.1 is pinned but" in e.value.message
    assert not (project / "provenance" / "toy.json").exists()
    code, output = run_cli(project, store, "toy")
    assert code == 1 and "refuses to run" in output


def test_missing_registered_bytes_are_unavailable_not_identical(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    reg = registry_mod.load(project)
    out_digest = reg.get("toy/case").members.members["output_0.npy"]  # type: ignore[union-attr]
    store.remove(out_digest)
    set_scale(project, 1.5)
    report = regenerate(project, store, "toy", scratch=tmp_path / "s6", python=PYTHON)
    verdicts = {c.name: c.verdict for c in report.comparisons}
    assert verdicts["toy/case"] is Verdict.UNAVAILABLE
    assert not report.ok


def test_fetch_stores_identical_candidates_only(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    empty = Store.at(tmp_path / "fresh").ensure()
    report = regenerate(project, empty, "toy", scratch=tmp_path / "s7", fetch=True, python=PYTHON)
    assert set(report.fetched) == {"toy/case", "toy/values.npy"}
    reg = registry_mod.load(project)
    assert empty.has(reg.get("toy/values.npy").digest)  # type: ignore[arg-type]


def test_unknown_stage_is_a_usage_error(project: Path, store: Store) -> None:
    code, output = run_cli(project, store, "nope")
    assert code == 2
    assert "neither a stage nor an artifact" in output


def test_an_input_with_unsafe_content_never_reaches_the_generator(
    project: Path, store: Store, tmp_path: Path
) -> None:
    import yaml

    from fixture_store.errors import UnsafeContentError
    from tests.support.hostile import compress, tar_bytes, tar_info

    # A checkpoint archive recorded as provenance/checkpoints.json recorded them: no manifest.
    evil = store.put_bytes(compress(tar_bytes([(tar_info("../evil", 4), b"evil")]), "tar.zst"))
    (project / "provenance" / "ckpt.json").write_text(
        registry_mod.dumps(
            {
                "format_version": 1,
                "records": {
                    "ckpt/evil.tar.zst": {
                        "kind": "checkpoint",
                        "media_type": "application/zstd",
                        "digest": evil.text,
                        "size": evil.size,
                        "source": {"type": "local", "path": "evil.tar.zst"},
                    }
                },
            }
        )
    )
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["regenerate"]["toy"]["inputs"] = ["ckpt/*"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=True))
    scratch = tmp_path / "s8"
    with pytest.raises(UnsafeContentError, match="member manifest"):
        regenerate(project, store, "toy", scratch=scratch, python=PYTHON)
    assert not (scratch / "inputs.json").exists() and not (scratch / "candidates").exists()


def test_accept_fills_the_content_manifest_of_an_identical_record(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    path = project / "provenance" / "toy.json"
    doc = json.loads(path.read_text())
    values = doc["records"]["toy/values.npy"]
    assert values["media_type"] == "application/x-npy"
    assert values["arrays"] == {"float32[64]": ["values"]}
    del values["arrays"], values["media_type"]  # as a record written before manifests
    path.write_text(registry_mod.dumps(doc))
    [bare] = verify_names(store, registry_mod.load(project), ["toy/values.npy"], full=True)
    assert bare.status is Status.UNSAFE and "NPY array by its leading bytes" in bare.message
    assert "regenerate toy --accept" in (bare.fix or "")
    report = regenerate(project, store, "toy", scratch=tmp_path / "s9", accept=True, python=PYTHON)
    assert {c.verdict for c in report.comparisons} == {Verdict.IDENTICAL}
    assert report.accepted == ("toy/values.npy",)
    filled = json.loads(path.read_text())["records"]["toy/values.npy"]
    assert filled == {
        **values,
        "arrays": {"float32[64]": ["values"]},
        "media_type": "application/x-npy",
    }
    [result] = verify_names(store, registry_mod.load(project), ["toy/values.npy"], full=True)
    assert result.ok


def test_accept_of_identical_bytes_writes_what_the_generator_declares_now(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    toy = project / "models" / "toy.py"
    toy.write_text(toy.read_text().replace('{"note": "plain"}', '{"note": "reviewed"}'))
    report = regenerate(project, store, "toy", scratch=tmp_path / "s1", accept=True, python=PYTHON)
    assert {c.verdict for c in report.comparisons} == {Verdict.IDENTICAL}
    assert report.accepted == ("toy/values.npy",)
    record = registry_mod.load(project).get("toy/values.npy")
    assert record.metadata == {"note": "reviewed"}
    before = (project / "provenance" / "toy.json").read_bytes()
    again = regenerate(project, store, "toy", scratch=tmp_path / "s2", accept=True, python=PYTHON)
    assert again.accepted == () and (project / "provenance" / "toy.json").read_bytes() == before


def _with_details(project: Path, details: str) -> None:
    toy = project / "models" / "toy.py"
    toy.write_text(toy.read_text() + f"(args.out / 'details.json').write_text({details!r})\n")


def test_a_generators_details_are_carried_into_the_report(project: Path, store: Store) -> None:
    _with_details(project, '{"agreement": {"frames": 3}}')
    report = regenerate(project, store, "toy", python=PYTHON)
    assert report.to_json(parts.Part.TRACKED)["details"] == {"agreement": {"frames": 3}}
    plain = make_project(project.parent / "plain")
    assert "details" not in regenerate(plain, store, "toy", python=PYTHON).to_json()


def test_unreadable_details_are_a_usage_error(project: Path, store: Store) -> None:
    _with_details(project, "[1, 2]")
    with pytest.raises(UsageError, match=r"details\.json holding no JSON object"):
        regenerate(project, store, "toy", python=PYTHON)


def test_accept_records_the_new_parents_of_bytes_regenerated_identical(
    project: Path, store: Store, tmp_path: Path
) -> None:
    accepted(project, store, tmp_path)
    toy = project / "models" / "toy.py"
    text = toy.read_text()
    # The stage now derives the same case from another parent (a new upstream step, say).
    text = text.replace(
        '"parents": [f"{args.family}/values.npy"]}', '"parents": [f"{args.family}/other.npy"]}'
    ).replace(
        "outputs = [",
        'np.save(args.out / "other.npy", values[:8])\n'
        "outputs = [\n"
        '    {"name": f"{args.family}/other.npy", "kind": "fixture", "path": "other.npy"},',
    )
    toy.write_text(text)
    report = regenerate(project, store, "toy", scratch=tmp_path / "s1", accept=True, python=PYTHON)
    verdicts = {c.name: str(c.verdict) for c in report.comparisons}
    assert verdicts["toy/case"] == "bit-identical" and verdicts["toy/other.npy"] == "new"
    assert "toy/case" in report.accepted
    reg = registry_mod.load(project)
    assert reg.get("toy/case").lineage == (reg.get("toy/other.npy").object.text,)
    # Accepting again changes nothing: the lineage is the one declared.
    again = regenerate(project, store, "toy", scratch=tmp_path / "s2", accept=True, python=PYTHON)
    assert again.accepted == ()


def test_accept_takes_range_digests_in_the_read_that_stores_an_output(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.readers import tensor_ranges

    toy = project / "models" / "toy.py"
    toy.write_text(
        toy.read_text().replace(
            "outputs = [",
            'np.save(args.out / "big.npy", np.arange(6 << 18, dtype="f4").reshape(-1, 1024))\n'
            "outputs = [\n"
            '    {"name": f"{args.family}/big.npy", "kind": "fixture", "path": "big.npy"},',
        )
    )

    def no_read_of_its_own(*_args: object) -> str:
        raise AssertionError("a range digest read the file again")

    monkeypatch.setattr(tensor_ranges, "tensor_digest", no_read_of_its_own)
    regenerate(project, store, "toy", scratch=tmp_path / "s0", accept=True, python=PYTHON)
    monkeypatch.undo()
    record = registry_mod.load(project).get("toy/big.npy")
    [spec] = record.arrays.values()  # type: ignore[union-attr]
    data = store.object_path(record.object).read_bytes()
    at, size = spec["offset"], spec["length"]
    chunks = [
        data[at + i : at + min(i + spec["chunk"], size)] for i in range(0, size, spec["chunk"])
    ]
    assert len(chunks) == 2 and list(spec["chunks"]) == [
        hashlib.sha256(c).hexdigest() for c in chunks
    ]
    [result] = verify_names(store, registry_mod.load(project), ["toy/big.npy"], full=True)
    assert result.status is Status.VERIFIED, result


def test_a_machine_that_does_not_remake_the_bytes_pulls_the_registered_ones_from_the_remote(
    project: Path, store: Store, tmp_path: Path
) -> None:
    """Machine A accepts and pushes; machine B (an empty store, kernels that round otherwise)
    cannot compare its candidate with bytes it does not have, until the project's remote serves
    them: then the candidate is within tolerance, the store holds the registered bytes (never
    the candidate), and the tracked report is machine A's, byte for byte."""
    accepted(project, store, tmp_path)
    registry = registry_mod.load(project)
    remote = FolderRemote("team", project / "remote")
    push(store, registry, remote, plan(registry, registry.names()), packing=ONE_PER_KEY)
    (project / "pyproject.toml").write_text(
        '[tool.fixture-store]\ndefault-remote = "team"\n\n'
        '[tool.fixture-store.remotes.team]\nurl = "remote"\n'
    )
    a_report = tmp_path / "a" / "toy.json"
    assert run_cli(project, store, "toy", "--fetch", "--report", str(a_report))[0] == 0

    set_scale(project, 1 + 1e-5)  # machine B's kernels
    b_store = Store.at(tmp_path / "b-store").ensure()
    code, out = run_cli(project, b_store, "toy", "--fetch", "--no-remote")
    assert code == 1 and "unavailable" in out and "not in the store" in out
    assert "fixture-store push toy/case --remote REMOTE" in out  # and the fix names the way
    b_report = tmp_path / "b" / "toy.json"
    code, out = run_cli(project, b_store, "toy", "--fetch", "--report", str(b_report))
    assert code == 0, out
    assert b_report.read_bytes() == a_report.read_bytes()
    run = json.loads((b_report.parent / "run" / "toy.json").read_text())
    assert run["counts"] == {
        **dict.fromkeys(run["counts"], 0),
        "bit-identical": 1,
        "within-tolerance": 1,
    }
    results = verify_names(b_store, registry, registry.names())
    assert {r.status for r in results} == {Status.VERIFIED}, [r.message for r in results]


def test_a_run_that_pulls_nothing_opens_no_remote(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remotes are opened on first need: a machine that remakes every record bit for bit makes
    no client (an S3 remote's would need boto3, the s3 extra)."""
    import fixture_store.remotes as remotes_mod

    accepted(project, store, tmp_path)
    (project / "pyproject.toml").write_text(
        '[tool.fixture-store.remotes.team]\nurl = "s3://bucket/fixtures"\n'
    )

    def refuse(_spec: object) -> None:
        raise AssertionError("a remote was opened")

    monkeypatch.setattr(remotes_mod, "open_remote", refuse)
    code, out = run_cli(project, store, "toy", "--fetch")
    assert code == 0, out
    # an unknown --remote is still refused at once, before the generator runs
    code, out = run_cli(project, store, "toy", "--fetch", "--remote", "nope")
    assert code == 2 and "nope" in out
