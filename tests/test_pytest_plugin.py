"""The pytest plugin, exercised by real inner pytest runs (pytester)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.objects.store import Store
from fixture_store.registry.files import write_family
from tests.support.onnx_helpers import NODE_DATA, tamper


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An inner project with provenance/, two real onnx cases and a small blob, all stored."""
    monkeypatch.delenv("FIXTURE_STORE_REGISTRY", raising=False)
    monkeypatch.delenv("FIXTURE_STORE_REQUIRE", raising=False)
    monkeypatch.delenv("CI", raising=False)  # a CI job's CI=true fails missing fixtures
    root = pytester.path
    (root / "provenance").mkdir()
    store = Store.at(root / "store").ensure()
    monkeypatch.setenv("FIXTURE_STORE_DIR", str(store.root))
    for case in ("test_abs", "test_add"):
        shutil.copytree(NODE_DATA / case, root / "cases" / case)
        ingest.add(
            store,
            registry_mod.load(root),
            root / "cases" / case,
            name=f"onnx-node/{case}",
            kind="onnx-case",
        )
    (root / "blob.bin").write_bytes(b"reference bytes")
    ingest.add(store, registry_mod.load(root), root / "blob.bin", name="misc/blob", kind="fixture")
    return pytester


def _gap(root: Path, name: str, reason: str, *, digest_of: Path | None = None) -> None:
    registry = registry_mod.load(root)
    family = name.split("/", maxsplit=1)[0]
    raw: dict[str, object] = {
        "kind": "fixture",
        "source": {"type": "local", "path": "later"},
        "gap": {"reason": reason},
    }
    if digest_of is not None:
        record = ingest.add(
            Store.at(root / "store"), registry, digest_of, name=name, kind="fixture"
        )
        raw = {**record.to_json(), "gap": {"reason": reason}}
        registry = registry_mod.load(root)
    fam = registry.families.get(family)
    records = dict(fam.records) if fam else {}
    records[name] = registry_mod.parse_record(name, raw, file="t")
    write_family(registry, family, records.values())


def test_verified_accessors_and_family_parametrization(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_inner="""
        import pytest
        from fixture_store.pytest_plugin import fixture_store_cases

        @pytest.mark.fixture_store("misc/blob")
        def test_path(fixture_store):
            assert fixture_store.path("misc/blob").read_bytes() == b"reference bytes"

        @pytest.mark.fixture_store(family="onnx-node", argname="case")
        def test_cases(fixture_store, case):
            loaded = fixture_store.onnx_case(case)
            assert loaded.datasets and (fixture_store.tree(case) / "model.onnx").is_file()
            assert fixture_store.tree_files(case)["model.onnx"].is_file()

        @pytest.mark.parametrize("name", fixture_store_cases("onnx-node", kind="onnx-case"))
        def test_helper(fixture_store, name):
            assert fixture_store.onnx_case(name).name == name
    """
    )
    result = inner.runpytest("-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*test_cases?test_abs?*PASSED*", "*test_helper?test_add?*"])


def test_collection_never_reads_object_bytes(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_inner="""
        import pytest
        from fixture_store.pytest_plugin import fixture_store_cases

        @pytest.mark.fixture_store(family="onnx-node")
        def test_cases(artifact):
            pass

        @pytest.mark.parametrize("name", fixture_store_cases("onnx-node"))
        def test_helper(name):
            pass
    """
    )
    # With the store gone, only the registry text can have produced the items.
    shutil.rmtree(inner.path / "store")
    result = inner.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*test_cases?test_abs?*", "*test_helper?test_add?*", "4 tests collected*"]
    )
    assert not (inner.path / "store").exists()


def test_digest_mismatch_is_an_error(inner: pytest.Pytester) -> None:
    fixtures = Fixtures(Store.at(inner.path / "store"), registry_mod.load(inner.path))
    tamper(fixtures.store, fixtures, "onnx-node/test_abs", "test_data_set_0/output_0.pb")
    inner.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.fixture_store("onnx-node/test_abs")
        def test_needs_abs(fixture_store):
            raise AssertionError("must not run")
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*fixture-store refused: onnx-node/test_abs: member "
            "'test_data_set_0/output_0.pb' does not match its record*"
        ]
    )
    assert "must not run" not in result.stdout.str()


def test_unknown_artifact_is_an_error(inner: pytest.Pytester) -> None:
    inner.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.fixture_store("onnx-node/test_nonexistent")
        def test_unknown():
            pass
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*onnx-node/test_nonexistent: no record in the registry*"])


def test_invalid_record_is_an_error(inner: pytest.Pytester) -> None:
    path = inner.path / "provenance" / "misc.json"
    path.write_text(path.read_text().replace('"kind": "fixture"', '"kind": "bogus"'))
    inner.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.fixture_store("misc/blob")
        def test_blob():
            pass
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*misc/blob*unknown kind 'bogus'*"])


def test_a_checkpoint_archive_with_unsafe_content_is_an_error(inner: pytest.Pytester) -> None:
    from tests.support.hostile import compress, tar_bytes, tar_info

    store = Store.at(inner.path / "store")
    evil = compress(tar_bytes([(tar_info("../evil", 4), b"evil")]), "tar.zst")
    digest = store.put_bytes(evil)
    raw = {
        "kind": "checkpoint",
        "media_type": "application/zstd",
        "digest": digest.text,
        "size": digest.size,
        "source": {"type": "local", "path": "ckpt.tar.zst"},
    }
    registry = registry_mod.load(inner.path)
    record = registry_mod.parse_record("ckpt/evil.tar.zst", raw, file="t")
    write_family(registry, "ckpt", [record])
    inner.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.fixture_store("ckpt/evil.tar.zst")
        def test_marked(fixture_store):
            raise AssertionError("must not run")

        def test_in_the_body(fixture_store):
            fixture_store.path("ckpt/evil.tar.zst")
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*fixture-store refused: ckpt/evil.tar.zst: an archive record needs its member manifest*"]
    )
    assert "must not run" not in result.stdout.str()


_NEEDS_ADD = """
    import pytest

    @pytest.mark.fixture_store("onnx-node/test_add")
    def test_add(fixture_store):
        pass
"""


def _remove_object(inner: pytest.Pytester, name: str) -> None:
    fixtures = Fixtures(Store.at(inner.path / "store"), registry_mod.load(inner.path))
    record = fixtures.registry.get(name)
    assert record.members is not None
    path = fixtures.store.object_path(record.members.members["model.onnx"])
    path.chmod(0o644)
    path.unlink()


@pytest.mark.parametrize("value", ["0", ""])
def test_missing_object_skips_with_the_fetch_command(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    _remove_object(inner, "onnx-node/test_add")
    inner.makepyfile(test_inner=_NEEDS_ADD)
    # Only the exact value 1 turns require mode on; 0 and empty leave it off.
    monkeypatch.setenv("FIXTURE_STORE_REQUIRE", value)
    result = inner.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*onnx-node/test_add: missing object*fetch it: fixture-store fetch onnx-node/test_add*"]
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_missing_object_fails_in_require_mode(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    _remove_object(inner, "onnx-node/test_add")
    inner.makepyfile(test_inner=_NEEDS_ADD)
    args = ["--fixture-store-require"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("FIXTURE_STORE_REQUIRE", "1")
    result = inner.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*missing object (required by --fixture-store-require*"
            "fixture-store fetch onnx-node/test_add*"
        ]
    )


@pytest.mark.parametrize("value", ["true", "yes", "2", " 1"])
def test_require_env_with_another_value_is_a_usage_error(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # "true" used to mean off, silently: a CI job asking for require mode did not get it.
    inner.makepyfile(test_inner=_NEEDS_ADD)
    monkeypatch.setenv("FIXTURE_STORE_REQUIRE", value)
    result = inner.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: FIXTURE_STORE_REQUIRE={value!r} is not one of the allowed values: "
            "'1' (a missing object fails the test), '0' or empty (it skips)*"
        ]
    )
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output


def test_declared_gap_is_an_xfail_with_its_reason(inner: pytest.Pytester) -> None:
    _gap(inner.path, "misc/upstream-weights", "upstream has not published the weights")
    inner.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.fixture_store("misc/upstream-weights")
        def test_weights(fixture_store):
            raise AssertionError("must not run")
    """
    )
    result = inner.runpytest("-rx")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(
        ["*misc/upstream-weights: declared gap: upstream has not published the weights*"]
    )


def test_accessor_in_the_body_applies_the_same_semantics(inner: pytest.Pytester) -> None:
    _remove_object(inner, "onnx-node/test_add")
    inner.makepyfile(
        test_inner="""
        def test_body(fixture_store):
            fixture_store.onnx_case("onnx-node/test_add")
            raise AssertionError("must not get here")
    """
    )
    inner.runpytest().assert_outcomes(skipped=1)
    inner.runpytest("--fixture-store-require").assert_outcomes(failed=1)


_CONSUMES_ONNX = """
    import pytest

    @pytest.mark.fixture_store(family="onnx-node")
    def test_cases(artifact):
        pass
"""


def test_completeness_catches_a_family_with_no_consumer(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=_CONSUMES_ONNX)
    result = inner.runpytest("--fixture-store-complete")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*family 'misc': no collected test consumes it*"])
    # Without the option, no check runs.
    inner.runpytest().assert_outcomes(passed=2)


def test_completeness_passes_when_consumed_or_declared_a_gap(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=_CONSUMES_ONNX)
    inner.makeini(
        "[pytest]\nfixture_store_gaps =\n    video: no clips licensed yet\n"
        "    misc: consumed by the docs build, not by tests\n"
    )
    inner.runpytest("--fixture-store-complete").assert_outcomes(passed=3)


def test_a_gap_line_without_a_reason_is_a_usage_error_naming_it(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=_CONSUMES_ONNX)
    inner.makeini("[pytest]\nfixture_store_gaps =\n    video: no clips licensed yet\n    misc\n")
    result = inner.runpytest("--fixture-store-complete")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: ini option fixture_store_gaps: the line 'misc' is not 'family: reason'*"]
    )
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output


def test_completeness_catches_stale_gaps(inner: pytest.Pytester) -> None:
    # A gap record whose object is now in the store: adding the fixture must remove the gap.
    extra = inner.path / "weights.bin"
    extra.write_bytes(b"now published")
    _gap(inner.path, "misc/weights", "not published", digest_of=extra)
    inner.makepyfile(test_inner=_CONSUMES_ONNX)
    # An ini gap for a family a test now consumes is stale too.
    inner.makeini(
        "[pytest]\nfixture_store_gaps =\n    misc: consumed elsewhere\n"
        "    onnx-node: waiting for upstream\n"
    )
    result = inner.runpytest("--fixture-store-complete")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*misc/weights: declared gap (not published) but its object is in the store*",
            "*family 'onnx-node': declared a gap in fixture_store_gaps (waiting for upstream) but "
            "a collected test now consumes it*",
        ]
    )


def _add_arrays(
    root: Path, name: str, filename: str, arrays_manifest: dict[str, object], write: object
) -> None:
    path = root / filename
    write(path)  # type: ignore[operator]
    store = Store.at(root / "store")
    record = ingest.add(store, registry_mod.load(root), path, name=name, kind="array")
    registry = registry_mod.load(root)
    fam = registry.families[name.split("/", maxsplit=1)[0]]
    records = dict(fam.records)
    records[name] = registry_mod.parse_record(
        name, {**record.to_json(), "arrays": arrays_manifest}, file="t"
    )
    write_family(registry, name.split("/", maxsplit=1)[0], records.values())


def _add_ref_npz(root: Path) -> None:
    """``misc/ref-npz``: ``a`` (float32 ones, 2x3) and ``b`` (``arange(4)``), as recorded."""
    import numpy as np

    _add_arrays(
        root,
        "misc/ref-npz",
        "ref.npz",
        {"a": {"dtype": "float32", "shape": [2, 3]}, "b": {"dtype": "int64", "shape": [4]}},
        lambda p: np.savez(p, a=np.ones((2, 3), np.float32), b=np.arange(4)),
    )


def test_verified_arrays_are_read_safely_and_checked_against_the_manifest(
    inner: pytest.Pytester,
) -> None:
    import numpy as np

    _add_ref_npz(inner.path)
    _add_arrays(
        inner.path,
        "misc/ref-npy",
        "ref.npy",
        {"ref": {"dtype": "float32", "shape": [3]}},
        lambda p: np.save(p, np.zeros(3, np.float32)),
    )
    # The manifest says float64 but the file holds float32: unsafe content, an error.
    _add_arrays(
        inner.path,
        "misc/lying",
        "lying.npy",
        {"lying": {"dtype": "float64", "shape": [3]}},
        lambda p: np.save(p, np.zeros(3, np.float32)),
    )
    inner.makepyfile(
        test_inner="""
        import numpy as np
        import pytest

        @pytest.mark.fixture_store("misc/ref-npz", "misc/ref-npy")
        def test_arrays(fixture_store):
            npz = fixture_store.arrays("misc/ref-npz")
            assert sorted(npz) == ["a", "b"] and npz["a"].dtype == np.float32
            assert fixture_store.arrays("misc/ref-npy")["ref"].shape == (3,)

        def test_lying(fixture_store):
            fixture_store.arrays("misc/lying")
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*fixture-store refused: misc/lying*differs from the manifest's 'float64'*"]
    )


def test_the_fixture_hands_a_records_inputs_to_the_test_and_parity_needs_only_outputs(
    inner: pytest.Pytester,
) -> None:
    _add_ref_npz(inner.path)
    registry = registry_mod.load(inner.path)
    records = dict(registry.families["misc"].records)
    raw = {**records["misc/ref-npz"].to_json(), "tolerance": {"metric": "exact", "inputs": ["b"]}}
    records["misc/ref-npz"] = registry_mod.parse_record("misc/ref-npz", raw, file="t")
    write_family(registry, "misc", records.values())
    inner.makepyfile(
        test_inner="""
        import numpy as np

        def test_inputs(fixture_store):
            given = fixture_store.inputs("misc/ref-npz")
            assert list(given) == ["b"]
            out = np.ones((2, 3), np.float32) * given["b"].size // 4
            assert fixture_store.assert_parity("misc/ref-npz", {"a": out}).ok
    """
    )
    inner.runpytest().assert_outcomes(passed=1)


def _damage(inner: pytest.Pytester, name: str) -> None:
    """Flip the last byte of a single-object artifact's object in place (same size)."""
    fixtures = Fixtures(Store.at(inner.path / "store"), registry_mod.load(inner.path))
    digest = fixtures.registry.get(name).digest
    assert digest is not None
    path = fixtures.store.object_path(digest)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


_ACCESSORS_IN_THE_BODY = """
    import pytest

    @pytest.mark.parametrize("accessor", ["path", "read_bytes"])
    @pytest.mark.parametrize("name", ["misc/damaged", "misc/gone", "misc/later"])
    def test_body(fixture_store, accessor, name):
        got = getattr(fixture_store, accessor)(name)
        data = got if isinstance(got, bytes) else got.read_bytes()
        raise AssertionError(f"UNVERIFIED BYTES HANDED OUT: {data!r}")
"""


def test_path_and_read_bytes_without_a_marker_refuse_damaged_missing_and_gap(
    inner: pytest.Pytester,
) -> None:
    """The accessors verify by themselves: no marker is needed for a refusal."""
    root = inner.path
    for name, data in (("damaged", b"damaged bytes"), ("gone", b"gone bytes")):
        (root / f"{name}.bin").write_bytes(data)
        ingest.add(
            Store.at(root / "store"),
            registry_mod.load(root),
            root / f"{name}.bin",
            name=f"misc/{name}",
            kind="fixture",
        )
    _damage(inner, "misc/damaged")
    gone = registry_mod.load(root).get("misc/gone").digest
    assert gone is not None
    Store.at(root / "store").object_path(gone).chmod(0o644)
    Store.at(root / "store").remove(gone)
    _gap(root, "misc/later", "upstream publishes it next release")
    inner.makepyfile(test_inner=_ACCESSORS_IN_THE_BODY)

    result = inner.runpytest("-rsx")
    result.assert_outcomes(errors=2, skipped=2, xfailed=2)
    out = result.stdout.str()
    assert "UNVERIFIED BYTES HANDED OUT" not in out
    assert out.count("fixture-store refused: misc/damaged: object does not match its record") == 2
    result.stdout.fnmatch_lines(
        [
            "*misc/gone: missing object*fetch it: fixture-store fetch misc/gone*",
            "*misc/later: declared gap: upstream publishes it next release*",
        ]
    )
    # In require mode the missing object is a failure too; the damaged one stays refused.
    # -rN: no short summary, which under CI=true repeats each failure's message untruncated.
    required = inner.runpytest("--fixture-store-require", "-rN")
    required.assert_outcomes(failed=2, errors=2, xfailed=2)
    assert "UNVERIFIED BYTES HANDED OUT" not in required.stdout.str()
    assert required.stdout.str().count("missing object (required by --fixture-store-require") == 2


def test_completeness_catches_files_no_record_names_in_folders_of_local_sources(
    inner: pytest.Pytester,
) -> None:
    """``cases/`` holds the two local onnx-case sources: a file beside them, and a file inside
    one that its manifest does not list, are orphans, as a hand-rolled validator would say."""
    inner.makepyfile(test_inner=_CONSUMES_ONNX)
    inner.makeini("[pytest]\nfixture_store_gaps =\n    misc: consumed by the docs build\n")
    (inner.path / "cases" / "stray.npz").write_bytes(b"unregistered")
    (inner.path / "cases" / "test_abs" / "extra.pb").write_bytes(b"unlisted")
    (inner.path / "cases" / ".gitattributes").write_text("*.pb binary\n")
    result = inner.runpytest("--fixture-store-complete")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*cases/stray.npz: in cases/, a folder of local sources, but no record names it;"
            " register it (fixture-store add cases/stray.npz --name FAMILY/NAME*",
            "*cases/test_abs/extra.pb: in cases/test_abs/*",
        ]
    )
    assert ".gitattributes" not in result.stdout.str()
    (inner.path / "cases" / "stray.npz").unlink()
    (inner.path / "cases" / "test_abs" / "extra.pb").unlink()
    inner.runpytest("--fixture-store-complete").assert_outcomes(passed=3)
    # A README beside the data is no orphan once the project's orphans-ignore matches it.
    (inner.path / "cases" / "README.md").write_text("where the cases come from\n")
    inner.runpytest("--fixture-store-complete").assert_outcomes(passed=2, failed=1)
    (inner.path / "pyproject.toml").write_text(
        '[tool.fixture-store]\norphans-ignore = ["cases/*.md"]\n'
    )
    inner.runpytest("--fixture-store-complete").assert_outcomes(passed=3)


def test_assert_parity_compares_with_the_verified_reference_in_one_line(
    inner: pytest.Pytester,
) -> None:

    _add_ref_npz(inner.path)
    inner.makepyfile(
        test_inner="""
        import numpy as np

        def test_at_parity(fixture_store):
            outputs = {"a": np.ones((2, 3), np.float32) + np.float32(1e-8), "b": np.arange(4)}
            report = fixture_store.assert_parity("misc/ref-npz", outputs)
            assert report.ok

        def test_off(fixture_store):
            a = np.ones((2, 3), np.float32)
            a[1, 2] = 2.0
            fixture_store.assert_parity("misc/ref-npz", {"a": a, "b": np.arange(4)})

        def test_unverified(fixture_store):
            fixture_store.assert_parity("misc/absent", {"a": 1})
    """
    )
    dump = inner.path / "inspect"
    result = inner.runpytest(f"--fixture-store-parity-dump={dump}")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*misc/ref-npz: not at parity (1 problem)",
            "*worst array: a float32[[]2, 3[]]: 1 of 6 elements outside atol=1e-07 rtol=0.001",
            "*worst element at index (1, 2): expected 1.0, actual 2.0",
            f"*candidate written to {dump.resolve()}/misc/ref-npz.candidate.npz*",
        ]
    )
    assert (dump / "misc" / "ref-npz.reference.npz").is_file()
    result.stdout.fnmatch_lines(["*fixture-store refused*misc/absent*"])
    assert "assertion.py" not in result.stdout.str()  # the library frames are hidden


def test_verified_tensors_of_a_safetensors_artifact(inner: pytest.Pytester) -> None:
    import numpy as np
    from safetensors.numpy import save

    root = inner.path
    for name in ("model", "damaged"):  # other metadata: two objects, not one
        weights = save({"w": np.ones((2, 3), np.float32)}, metadata={"name": name})
        (root / f"{name}.safetensors").write_bytes(weights)
        ingest.add(
            Store.at(root / "store"),
            registry_mod.load(root),
            root / f"{name}.safetensors",
            name=f"ckpt/{name}",
            kind="checkpoint",
        )
    _damage(inner, "ckpt/damaged")
    inner.makepyfile(
        test_inner="""
        import numpy as np
        import pytest

        @pytest.mark.fixture_store("ckpt/model")
        def test_tensors(fixture_store):
            tensors = fixture_store.tensors("ckpt/model")
            assert list(tensors) == ["w"] and not tensors["w"].flags.writeable
            np.testing.assert_array_equal(fixture_store.tensor("ckpt/model", "w"), np.ones((2, 3)))
            assert fixture_store.tensor("ckpt/model", "w", rows=(1, 2)).shape == (1, 3)
            assert fixture_store.arrays("ckpt/model")["w"].shape == (2, 3)

        def test_damaged(fixture_store):
            fixture_store.tensors("ckpt/damaged")
    """
    )
    result = inner.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*fixture-store refused: ckpt/damaged*"])


_OUTCOMES_INNER = """
    import numpy as np
    import pytest

    OK = {"a": np.ones((2, 3), np.float32), "b": np.arange(4)}
    OFF = {"a": np.full((2, 3), 2.0, np.float32), "b": np.arange(4)}

    def test_at_parity(fixture_store):
        fixture_store.assert_parity("misc/ref-npz", OK)

    def test_not_at_parity(fixture_store):
        fixture_store.assert_parity("misc/ref-npz", OFF)

    def test_mismatch(fixture_store):
        fixture_store.assert_parity("misc/dmg-npz", OK)

    def test_invalid_record(fixture_store):
        fixture_store.assert_parity("bad/x.npz", OK)

    def test_unknown(fixture_store):
        fixture_store.assert_parity("misc/nope", OK)

    def test_missing(fixture_store):
        fixture_store.path("misc/blob")

    def test_gap(fixture_store):
        fixture_store.path("misc/later")
"""
# Each row of the table in docs/pytest-plugin.md: the inner test that plays it, and whether it
# runs under --fixture-store-require or over a registry that does not parse.
_ROWS = {
    "outputs at parity with the reference": ("test_at_parity", ""),
    "outputs not at parity": ("test_not_at_parity", ""),
    "a reference whose bytes do not match their record": ("test_mismatch", ""),
    "an invalid record": ("test_invalid_record", ""),
    "a name without a record": ("test_unknown", ""),
    "a missing object": ("test_missing", ""),
    "a missing object under `--fixture-store-require`": ("test_missing", "require"),
    "a missing object under `CI=true`": ("test_missing", "ci"),
    "a declared gap": ("test_gap", ""),
    "a registry file that does not parse": ("test_at_parity", "broken"),
}


def _outcome_table() -> list[tuple[str, str]]:
    page = (Path(__file__).resolve().parents[1] / "docs" / "pytest-plugin.md").read_text()
    table = page.split("<!-- outcomes:", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")][2:]
    return [(case.removeprefix("| "), reports.split()[0].rstrip(",")) for case, reports in rows]


def _row_key(case: str) -> str:
    return next(key for key in sorted(_ROWS, key=len, reverse=True) if case.startswith(key))


def test_each_row_of_the_outcome_table_is_what_pytest_reports(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal of the data (in a marker or in the test body, in ``assert_parity`` too) is an
    ERROR with one line and its fix; a parity failure is a FAILURE: as the docs' table says."""
    import numpy as np

    root = inner.path
    _add_ref_npz(root)
    manifest: dict[str, object] = {
        "a": {"dtype": "float32", "shape": [2, 3]},
        "b": {"dtype": "int64", "shape": [4]},
    }
    _add_arrays(
        root,
        "misc/dmg-npz",
        "dmg.npz",
        manifest,
        lambda p: np.savez(p, a=np.zeros((2, 3), np.float32), b=np.arange(4)),
    )
    _damage(inner, "misc/dmg-npz")
    blob = registry_mod.load(root).get("misc/blob").digest
    assert blob is not None
    Store.at(root / "store").object_path(blob).chmod(0o644)
    Store.at(root / "store").remove(blob)
    _gap(root, "misc/later", "upstream publishes it next release")
    (root / "provenance" / "bad.json").write_text(
        '{"format_version": 1, "records": {"bad/x.npz": {"kind": "bogus", '
        '"source": {"type": "local", "path": "x.npz"}}}}'
    )
    inner.makepyfile(test_inner=_OUTCOMES_INNER)
    runs = {"": inner.runpytest("-v"), "require": inner.runpytest("-v", "--fixture-store-require")}
    with monkeypatch.context() as ci:
        ci.setenv("CI", "true")
        runs["ci"] = inner.runpytest("-v")
    (root / "provenance" / "broken.json").write_text('{"format_version": 1, "records": ')
    runs["broken"] = inner.runpytest("-v")
    table = _outcome_table()
    assert sorted(_row_key(case) for case, _ in table) == sorted(_ROWS)
    for case, word in table:
        test, run = _ROWS[_row_key(case)]
        out = runs[run].stdout.str()
        assert f"test_inner.py::{test} {word}" in out, (case, word, out)
    for out in (r.stdout.str() for r in runs.values()):
        assert "Traceback" not in out and "pytest_plugin.py" not in out
        assert "fixture_store/registry/" not in out and "access.py" not in out
    broken = runs["broken"]
    broken.assert_outcomes(errors=7)
    reports = [line for line in broken.outlines if line.startswith("fixture-store refused: ")]
    assert len(reports) == 7 and all("broken.json: not valid JSON" in line for line in reports)
    broken.stdout.fnmatch_lines(["*broken.json*"])
    plain = runs[""].stdout.str()
    assert "fixture-store refused: misc/dmg-npz: object does not match its record" in plain
    assert "not at parity" in plain


def test_the_fixture_gives_the_exceptions_and_the_resolved_tolerance(
    inner: pytest.Pytester,
) -> None:
    _add_ref_npz(inner.path)
    inner.makepyfile(
        test_inner="""
        import numpy as np
        import pytest

        def test_reach(fixture_store):
            with pytest.raises(fixture_store.ParityError):
                fixture_store.assert_parity("misc/ref-npz", {"a": np.zeros((2, 3), np.float32),
                                                             "b": np.arange(4)})
            with pytest.raises(fixture_store.UnknownArtifactError):
                fixture_store.record("misc/nope")
            assert issubclass(fixture_store.DigestMismatchError, fixture_store.FixtureStoreError)
            tol = fixture_store.tolerance("misc/ref-npz", "a")
            assert tol.metric.value == "allclose" and tol.atol == 1e-7 and tol.bound == 0.0
            assert fixture_store.tolerance("misc/ref-npz").describe().startswith("allclose")
            assert fixture_store.record("misc/ref-npz").tolerance is None
    """
    )
    inner.runpytest().assert_outcomes(passed=1)


def test_assert_parity_judges_in_the_environment_given_and_logs_the_run(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixture_store.parity import runlog

    _add_ref_npz(inner.path)
    registry = registry_mod.load(inner.path)
    records = dict(registry.families["misc"].records)
    tolerance = {"metric": "max_abs", "max": 0, "expectations": {"device:cuda": {"max": 0.5}}}
    raw = {**records["misc/ref-npz"].to_json(), "tolerance": tolerance}
    records["misc/ref-npz"] = registry_mod.parse_record("misc/ref-npz", raw, file="t")
    write_family(registry, "misc", records.values())
    inner.makepyfile(
        test_inner="""
        import numpy as np

        def test_near(fixture_store):
            outputs = {"a": np.ones((2, 3), np.float32) + np.float32(0.25), "b": np.arange(4)}
            fixture_store.assert_parity("misc/ref-npz", outputs)

        def test_the_tolerance_is_the_environments(fixture_store):
            assert fixture_store.tolerance("misc/ref-npz", "a").bound == 0.5
    """
    )
    monkeypatch.setenv("FIXTURE_STORE_ENV", "device:cpu")
    inner.runpytest().assert_outcomes(failed=2)
    inner.runpytest("--fixture-store-env", "device:cuda").assert_outcomes(passed=2)
    runs, _ = runlog.read(Store.at(inner.path / "store"))
    assert [(r.environment.split(",platform:")[0], r.rule, r.ok) for r in runs] == [
        ("device:cpu", "", False),
        ("device:cuda", "device:cuda", True),
    ]


def test_the_fixtures_assert_parity_takes_the_environment_the_function_takes(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_ref_npz(inner.path)
    registry = registry_mod.load(inner.path)
    records = dict(registry.families["misc"].records)
    tolerance = {"metric": "max_abs", "max": 0, "expectations": {"device:cuda": {"max": 0.5}}}
    raw = {**records["misc/ref-npz"].to_json(), "tolerance": tolerance}
    records["misc/ref-npz"] = registry_mod.parse_record("misc/ref-npz", raw, file="t")
    write_family(registry, "misc", records.values())
    inner.makepyfile(
        test_inner="""
        import numpy as np

        def test_near_on_the_device_named(fixture_store):
            outputs = {"a": np.ones((2, 3), np.float32) + np.float32(0.25), "b": np.arange(4)}
            fixture_store.assert_parity("misc/ref-npz", outputs, environment="device:cuda")
    """
    )
    monkeypatch.setenv("FIXTURE_STORE_ENV", "device:cpu")
    inner.runpytest().assert_outcomes(passed=1)
