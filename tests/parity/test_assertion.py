"""The parity assertion: outputs against a verified reference under the record's tolerance."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fixture_store
from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import ArtifactError, UsageError
from fixture_store.objects.store import Store
from fixture_store.parity.assertion import DUMP_ENV, ParityError, assert_parity
from fixture_store.registry.files import write_family

NAME = "equimo/dinov2_reference.npz"
RNG = np.random.default_rng(0)
CLS = RNG.standard_normal((1, 8)).astype(np.float32)
PATCH = RNG.standard_normal((1, 4, 8)).astype(np.float32)


def _register(project: Path, store: Store, tolerance: dict[str, Any] | None) -> Fixtures:
    path = project / "dinov2_reference.npz"
    np.savez(path, cls_token=CLS, patch_tokens=PATCH)
    ingest.add(store, registry_mod.load(project), path, name=NAME, kind="array")
    if tolerance is not None:
        registry = registry_mod.load(project)
        records = dict(registry.families["equimo"].records)
        raw = {**records[NAME].to_json(), "tolerance": tolerance}
        records[NAME] = registry_mod.parse_record(NAME, raw, file="t")
        write_family(registry, "equimo", records.values())
    return Fixtures(store, registry_mod.load(project))


@pytest.fixture
def fixtures(project: Path, store: Store) -> Fixtures:
    return _register(project, store, {"metric": "mean_abs", "max": 5e-4})


def test_outputs_at_parity_pass_and_report_every_array(fixtures: Fixtures) -> None:
    near = PATCH + np.float32(1e-4)
    report = assert_parity(NAME, {"cls_token": CLS, "patch_tokens": near}, fixtures=fixtures)
    assert report.ok
    by_name = {c.name: c for c in report.comparisons}
    assert by_name["cls_token"].outcome == "bit-identical"
    assert by_name["patch_tokens"].mean_abs == pytest.approx(1e-4, rel=0.05)
    assert by_name["patch_tokens"].max_ulp > 0


def test_the_failure_names_the_worst_array_its_element_and_the_tolerance(
    fixtures: Fixtures,
) -> None:
    cls = CLS.copy()
    cls[0, 5] += np.float32(0.5)  # mean 0.0625: far outside
    patch = PATCH + np.float32(6e-4)  # just outside
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"cls_token": cls, "patch_tokens": patch}, fixtures=fixtures)
    text = str(info.value)
    lines = text.splitlines()
    assert lines[0] == f"{NAME}: not at parity (2 problems)"
    assert lines[1].startswith("worst array: cls_token float32[1, 8]: mean |a-b| 0.0625 above")
    assert lines[2] == "  tolerance: mean_abs <= 0.0005"
    assert "max abs 0.5, mean abs 0.0625" in lines[3] and "ULP" in lines[3]
    assert lines[4] == (
        f"  worst element at index (0, 5): expected {float(CLS[0, 5])!r}, "
        f"actual {float(cls[0, 5])!r}"
    )
    assert "  patch_tokens: drift: mean |a-b| 0.0006 above" in text
    assert f"{DUMP_ENV}=DIR" in text
    assert isinstance(info.value, AssertionError) and not info.value.report.ok


def test_missing_and_extra_arrays_fail(fixtures: Fixtures) -> None:
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"cls_token": CLS, "register_tokens": CLS}, fixtures=fixtures)
    assert info.value.report.missing == ("patch_tokens",)
    assert info.value.report.extra == ("register_tokens",)
    assert "missing: ['patch_tokens'] (in the reference, not given)" in str(info.value)
    assert "extra: ['register_tokens'] (given, not in the reference)" in str(info.value)


def test_only_compares_the_named_arrays_and_requires_no_other(fixtures: Fixtures) -> None:
    """An NPZ holding the inputs beside the outputs: ``only=`` names the outputs; the inputs are
    neither required from the candidate nor compared, and a name the NPZ lacks is refused."""
    report = assert_parity(NAME, {"patch_tokens": PATCH}, fixtures=fixtures, only=["patch_tokens"])
    assert report.ok and [c.name for c in report.comparisons] == ["patch_tokens"]
    with pytest.raises(ParityError):
        assert_parity(NAME, {"patch_tokens": PATCH + 1}, fixtures=fixtures, only=["patch_tokens"])
    with pytest.raises(UsageError, match="no array 'logits'") as info:
        assert_parity(NAME, {"logits": CLS}, fixtures=fixtures, only=["logits"])
    assert info.value.fix is not None and "cls_token, patch_tokens" in info.value.fix


def test_inputs_are_not_required_and_an_input_given_back_is_compared_exactly(
    project: Path, store: Store
) -> None:
    """The record names ``cls_token`` an input: the candidate need not give it, and one it gives
    must be the reference's own bits (within the outputs' tolerance is not enough)."""
    rule = {"metric": "mean_abs", "max": 5e-4, "inputs": ["cls_*"]}
    fixtures = _register(project, store, rule)
    assert sorted(fixtures.inputs(NAME)) == ["cls_token"]
    assert sorted(fixtures.arrays(NAME)) == ["cls_token", "patch_tokens"]
    report = assert_parity(NAME, {"patch_tokens": PATCH + np.float32(1e-4)}, fixtures=fixtures)
    assert report.ok and [c.name for c in report.comparisons] == ["patch_tokens"]
    report = assert_parity(NAME, {"cls_token": CLS, "patch_tokens": PATCH}, fixtures=fixtures)
    assert report.ok and len(report.comparisons) == 2
    near = CLS + np.float32(1e-6)  # within the outputs' mean_abs, but not the input given
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"cls_token": near, "patch_tokens": PATCH}, fixtures=fixtures)
    assert "cls_token" in str(info.value) and "exact" in str(info.value)
    with pytest.raises(ParityError, match="missing: \\['patch_tokens'\\]"):
        assert_parity(NAME, {"cls_token": CLS}, fixtures=fixtures)


def test_only_takes_glob_patterns_and_a_pattern_matching_none_is_refused(
    fixtures: Fixtures,
) -> None:
    report = assert_parity(NAME, {"patch_tokens": PATCH}, fixtures=fixtures, only=["patch_*"])
    assert report.ok and [c.name for c in report.comparisons] == ["patch_tokens"]
    with pytest.raises(UsageError, match="no array 'logit\\*'") as info:
        assert_parity(NAME, {"patch_tokens": PATCH}, fixtures=fixtures, only=["logit*"])
    assert info.value.fix is not None and "cls_token, patch_tokens" in info.value.fix


def test_dtype_and_shape_are_exact_unless_the_record_says_otherwise(
    project: Path, store: Store
) -> None:
    given = {"cls_token": CLS[0].astype(np.float64), "patch_tokens": PATCH}
    strict = _register(project, store, {"metric": "max_abs", "max": 1e-6})
    with pytest.raises(ParityError, match=r"worst array: cls_token float32\[1, 8\]: dtype float64"):
        assert_parity(NAME, given, fixtures=strict)
    loose = _register(
        project,
        store,
        {
            "metric": "max_abs",
            "max": 1e-6,
            "per_array": {"cls_token": {"dtype": "same_kind", "shape": "squeeze"}},
        },
    )
    assert assert_parity(NAME, given, fixtures=loose).ok


def test_per_array_overrides_apply_by_the_manifest_name(project: Path, store: Store) -> None:
    tol = {"metric": "ulp", "max": 0, "per_array": {"patch_tokens": {"max": 2}}}
    fixtures = _register(project, store, tol)
    two = np.nextafter(np.nextafter(PATCH, np.float32(9)), np.float32(9))
    assert assert_parity(NAME, {"cls_token": CLS, "patch_tokens": two}, fixtures=fixtures).ok
    with pytest.raises(ParityError, match="tolerance: ulp <= 0"):
        assert_parity(
            NAME,
            {"cls_token": np.nextafter(CLS, np.float32(9)), "patch_tokens": two},
            fixtures=fixtures,
        )


def test_patterns_dtype_rules_and_checks_judge_the_assertion_and_every_metric_is_shown(
    project: Path, store: Store
) -> None:
    tol = {
        "checks": [{"metric": "rms", "max": 1e-5}, {"metric": "max_abs", "max": 1e-3}],
        "why": "the upstream test's own bounds",
        "per_array": {"patch_*": {"metric": "ulp", "max": 1}},
        "per_dtype": {"float32": {"metric": "default"}},
    }
    fixtures = _register(project, store, tol)
    one_ulp = np.nextafter(PATCH, np.float32(9))
    # patch_tokens by its pattern (1 ULP passes); cls_token by neither: the pattern wins over
    # the dtype rule only where it matches, and float32's default row allows 1.3e-6 relative.
    near = CLS * np.float32(1 + 1e-6)
    assert assert_parity(NAME, {"cls_token": near, "patch_tokens": one_ulp}, fixtures=fixtures).ok
    cls = CLS.copy()
    cls[0, 2] += np.float32(0.01)
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"cls_token": cls, "patch_tokens": PATCH}, fixtures=fixtures)
    text = str(info.value)
    assert "tolerance: allclose atol=1e-05 rtol=1.3e-06" in text  # float32's default row
    for shown in ("max abs", "mean abs", "rms", "max rel", "ULP", "1-cos"):
        assert shown in text, shown
    assert "(why this rule: the upstream test's own bounds)" in text


def test_several_checks_name_each_failing_one_in_the_assertion(project: Path, store: Store) -> None:
    tol = {"checks": [{"metric": "rms", "max": 1e-5}, {"metric": "max_abs", "max": 1e-3}]}
    fixtures = _register(project, store, tol)
    cls = CLS.copy()
    cls[0, 2] += np.float32(0.01)
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, {"cls_token": cls, "patch_tokens": PATCH}, fixtures=fixtures)
    text = str(info.value)
    assert "2 of 2 checks fail: check rms <= 1e-05 fails" in text
    assert "check max_abs <= 0.001 fails: 1 of 8 elements" in text
    assert "tolerance: rms <= 1e-05 and max_abs <= 0.001" in text


def test_only_a_verified_reference_is_compared(fixtures: Fixtures, store: Store) -> None:
    digest = fixtures.registry.get(NAME).object
    path = store.object_path(digest)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="object does not match its record"):
        assert_parity(NAME, {"cls_token": CLS, "patch_tokens": PATCH}, fixtures=fixtures)


def test_a_reference_that_is_not_arrays_is_refused(project: Path, store: Store) -> None:
    (project / "blob.bin").write_bytes(b"not arrays")
    ingest.add(
        store, registry_mod.load(project), project / "blob.bin", name="misc/blob", kind="fixture"
    )
    fixtures = Fixtures(store, registry_mod.load(project))
    with pytest.raises(UsageError, match="not an NPY/NPZ reference"):
        assert_parity("misc/blob", {"x": CLS}, fixtures=fixtures)


def test_a_failing_candidate_is_dumped_beside_a_copy_of_the_reference(
    fixtures: Fixtures, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = {"cls_token": CLS + np.float32(1), "patch_tokens": PATCH}
    dump = tmp_path / "inspect"
    with pytest.raises(ParityError) as info:
        assert_parity(NAME, bad, fixtures=fixtures, dump=dump)
    candidate = dump / "equimo" / "dinov2_reference.candidate.npz"
    assert info.value.report.dumped == candidate.resolve()
    assert f"candidate written to {candidate.resolve()}" in str(info.value)
    with np.load(candidate) as npz:
        np.testing.assert_array_equal(npz["cls_token"], bad["cls_token"])
    with np.load(dump / "equimo" / "dinov2_reference.reference.npz") as npz:
        np.testing.assert_array_equal(npz["patch_tokens"], PATCH)
    # The environment names the folder too; a passing run writes nothing.
    env_dump = tmp_path / "from-env"
    monkeypatch.setenv(DUMP_ENV, str(env_dump))
    assert_parity(NAME, {"cls_token": CLS, "patch_tokens": PATCH}, fixtures=fixtures)
    assert not env_dump.exists()
    with pytest.raises(ParityError):
        assert_parity(NAME, bad, fixtures=fixtures)
    assert (env_dump / "equimo" / "dinov2_reference.candidate.npz").is_file()


def test_the_dump_folder_is_never_inside_the_store(fixtures: Fixtures, store: Store) -> None:
    bad = {"cls_token": CLS + np.float32(1), "patch_tokens": PATCH}
    with pytest.raises(UsageError, match="is inside the store"):
        assert_parity(NAME, bad, fixtures=fixtures, dump=store.root / "inspect")
    assert not (store.root / "inspect").exists()


def _store_files(store: Store) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in store.objects_dir.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["candidate", "reference"])
def test_a_link_at_a_dumped_file_is_replaced_never_written_through(
    fixtures: Fixtures, store: Store, tmp_path: Path, where: str
) -> None:
    """A link planted at ``<dump>/<family>/<stem>.candidate.npz`` pointing at a store object
    made a dump overwrite that object; the dump now replaces the link, never its target."""
    bad = {"cls_token": CLS + np.float32(1), "patch_tokens": PATCH}
    before = _store_files(store)
    victim = next(p for p in store.objects_dir.rglob("*") if p.is_file())
    family = tmp_path / "inspect" / "equimo"
    family.mkdir(parents=True)
    link = family / f"dinov2_reference.{where}.npz"
    link.symlink_to(victim)
    with pytest.raises(ParityError):
        assert_parity(NAME, bad, fixtures=fixtures, dump=tmp_path / "inspect")
    assert _store_files(store) == before
    assert not link.is_symlink() and link.is_file()


@pytest.mark.parametrize("level", ["family", "file-folder"])
def test_a_link_at_a_dump_folder_below_the_root_is_refused(
    fixtures: Fixtures, store: Store, tmp_path: Path, level: str
) -> None:
    """A link at ``<dump>/<family>`` put the dump's files into a store shard folder: a link at
    any folder below the dump root is refused, with the folder to remove named."""
    bad = {"cls_token": CLS + np.float32(1), "patch_tokens": PATCH}
    before = _store_files(store)
    shard = next(p for p in store.objects_dir.iterdir() if p.is_dir())
    dump = tmp_path / "inspect"
    dump.mkdir()
    if level == "family":
        (dump / "equimo").symlink_to(shard, target_is_directory=True)
        link = dump / "equimo"
    else:  # the name where a file belongs is a link to a folder
        (dump / "equimo").mkdir()
        link = dump / "equimo" / "dinov2_reference.candidate.npz"
        link.symlink_to(shard, target_is_directory=True)
    with pytest.raises((UsageError, ParityError)) as info:
        assert_parity(NAME, bad, fixtures=fixtures, dump=dump)
    assert _store_files(store) == before
    assert sorted(p.name for p in shard.iterdir()) == sorted(
        Path(k).name for k in before if Path(k).parent == shard
    )
    if level == "family":
        assert isinstance(info.value, UsageError)
        assert str(link) in info.value.message and "plain folders" in info.value.message
        assert info.value.fix is not None and f"remove {link}" in info.value.fix


def test_a_bare_array_fits_a_one_array_reference_only(fixtures: Fixtures) -> None:
    with pytest.raises(UsageError, match="a bare array where the reference holds 2 arrays"):
        assert_parity(NAME, CLS, fixtures=fixtures)


@pytest.mark.usefixtures("fixtures")
def test_the_environment_store_and_registry_are_the_default() -> None:
    # project and store fixtures set the working directory and FIXTURE_STORE_DIR.
    assert fixture_store.assert_parity(NAME, {"cls_token": CLS, "patch_tokens": PATCH}).ok


def test_importing_the_package_does_not_load_the_assertion() -> None:
    code = (
        "import sys, fixture_store; "
        "assert 'fixture_store.parity.assertion' not in sys.modules; "
        "assert 'numpy' not in sys.modules; "
        "assert fixture_store.ParityError.__name__ == 'ParityError'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
