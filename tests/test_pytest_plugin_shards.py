"""The plugin's shards and shard-aware fetch, exercised by real inner pytest runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.objects.store import Store
from fixture_store.pytest_plugin import MAX_SHARDS, options, shard_of, sharding
from fixture_store.registry import lazy_records, parsed_cache, raw_files, reading
from fixture_store.verify import Verifier
from tests.cli.test_attest import write_keys
from tests.test_pytest_plugin import inner

__all__ = ["inner"]  # the inner project fixture, shared with the plugin's own tests

MANY = """
import pytest

@pytest.mark.parametrize("i", range(24))
def test_many(i):
    pass

@pytest.mark.fixture_store("misc/blob")
def test_blob(fixture_store):
    assert fixture_store.path("misc/blob").read_bytes() == b"reference bytes"
"""


def _passed(result: pytest.RunResult) -> set[str]:
    """Node ids reported PASSED by ``-v`` (``ID PASSED``; under xdist ``PASSED ID``)."""
    found = (re.search(r"(\S+::\S+) PASSED|PASSED (\S+::\S+)", line) for line in result.outlines)
    return {m.group(1) or m.group(2) for m in found if m}


def test_a_tests_shard_depends_on_its_own_id_alone() -> None:
    ids = [f"tests/test_x.py::test_case[{i}]" for i in range(2000)]
    before = {i: shard_of(i, 4) for i in ids}
    more = [*ids, *(f"tests/test_y.py::test_new[{i}]" for i in range(500))]
    assert {i: shard_of(i, 4) for i in more if i in before} == before
    sizes = [list(before.values()).count(k) for k in range(1, 5)]
    assert all(400 <= n <= 600 for n in sizes), sizes  # roughly even


def test_shards_partition_the_collected_tests(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=MANY)
    everything = _passed(inner.runpytest("-v"))
    assert len(everything) == 25
    shards = [_passed(inner.runpytest("-v", "--fixture-store-shard", f"{k}/3")) for k in (1, 2, 3)]
    assert set().union(*shards) == everything
    assert sum(len(s) for s in shards) == len(everything)  # no test in two shards


def test_a_shard_is_the_same_under_xdist(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=MANY)
    alone = _passed(inner.runpytest_subprocess("-v", "--fixture-store-shard", "2/3"))
    spread = _passed(
        inner.runpytest_subprocess("-v", "-p", "xdist", "-n", "2", "--fixture-store-shard", "2/3")
    )
    assert spread == alone and alone


def test_the_shard_report_counts_tests_and_artifacts(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=MANY)
    result = inner.runpytest("--collect-only", "-q", "--fixture-store-shards", "3")
    result.stdout.fnmatch_lines(["fixture-store shards: 25 tests in 3 shards"])
    rows = [re.search(r"shard \d/3: (\d+) tests, (\d+) artifacts", ln) for ln in result.outlines]
    counts = [(int(m.group(1)), int(m.group(2))) for m in rows if m]
    assert len(counts) == 3 and sum(t for t, _ in counts) == 25
    assert sum(a for _, a in counts) == 1  # misc/blob, in the one shard holding test_blob


@pytest.mark.parametrize("spec", ["4/3", "0/2", "two/3", "3"])
def test_a_shard_that_is_not_i_of_n_is_a_usage_error(inner: pytest.Pytester, spec: str) -> None:
    inner.makepyfile(test_inner=MANY)
    result = inner.runpytest("--fixture-store-shard", spec)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--fixture-store-shard" in "\n".join(result.errlines)


def _blob_present(inner: pytest.Pytester) -> bool:
    registry = registry_mod.load(inner.path)
    return Verifier(Store.at(inner.path / "store")).verify(registry.get("misc/blob")).ok


def _drop_blob(inner: pytest.Pytester) -> None:
    record = registry_mod.load(inner.path).get("misc/blob")
    path = Store.at(inner.path / "store").object_path(record.object)
    path.chmod(0o644)
    path.unlink()


def test_fetch_brings_exactly_what_the_selection_uses(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=MANY)
    _drop_blob(inner)
    # a selection that does not use the blob fetches nothing
    result = inner.runpytest("--fixture-store-fetch", "-k", "test_many")
    result.stdout.fnmatch_lines(["fixture-store fetch: 0 artifacts the selected tests use*"])
    assert not _blob_present(inner)
    # one that does fetches it from its pinned (local) source, and the test passes in require mode
    result = inner.runpytest("--fixture-store-fetch", "--fixture-store-require", "-k", "blob")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["fixture-store fetch: 1 artifacts the selected tests use*"])
    assert _blob_present(inner)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--fixture-store-shards", "100000000"),
        ("--fixture-store-shards", "0"),
        ("--fixture-store-shards", "-3"),
        ("--fixture-store-shards", "²"),
        ("--fixture-store-shards", "9" * 5000),
        ("--fixture-store-shard", "1/100000000"),
        ("--fixture-store-shard", "1/²"),
        ("--fixture-store-shard", "1/" + "9" * 5000),
    ],
)
def test_an_absurd_shard_count_is_a_usage_error_naming_the_option(
    inner: pytest.Pytester, option: str, value: str
) -> None:
    """N is bounded (1 to MAX_SHARDS): 10^8 shards made the report loop over every shard for every
    test (minutes of collection), and digits int() takes badly were a traceback."""
    inner.makepyfile(test_inner=MANY)
    result = inner.runpytest("--collect-only", "-q", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines
    errors = "\n".join(result.errlines)
    assert (option in errors and str(MAX_SHARDS) in errors) or "I/N" in errors, errors
    assert "Traceback" not in errors and "9" * 100 not in errors


def test_the_shard_report_places_each_test_once_whatever_n(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's work is the collection's: each test's shard is computed once, however many
    shards there are (counted, not timed)."""
    calls: list[str] = []
    real = shard_of

    def counting(nodeid: str, count: int) -> int:
        calls.append(nodeid)
        return real(nodeid, count)

    for module in (sharding, options):  # the report places a test, its shard asks
        monkeypatch.setattr(module, "shard_of", counting)
    inner.makepyfile(test_inner=MANY)
    result = inner.runpytest("--collect-only", "-q", f"--fixture-store-shards={MAX_SHARDS}")
    result.stdout.fnmatch_lines([f"fixture-store shards: 25 tests in {MAX_SHARDS} shards"])
    assert len(calls) == 2 * 25  # placed once, and its shard asked once whether it holds it


FAMILY = """
import pytest

@pytest.mark.fixture_store(family="onnx-node")
def test_case(artifact):
    pass
"""


def test_collection_reads_only_the_family_a_test_parametrizes_over(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collecting a test parametrized over one family parses that family's files and no
    other's (a large registry's other families cost nothing until a test's setup needs them)."""
    read: list[str] = []
    real = raw_files.read_text

    def counted(path: Path) -> str:
        read.append(path.name)
        return real(path)

    monkeypatch.setattr(reading, "read_text", counted)
    inner.makepyfile(test_inner=FAMILY)
    result = inner.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*2 tests collected*"])
    assert read == ["onnx-node.json"]


def test_collection_over_a_kind_builds_no_record_the_cache_holds(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the parsed-registry cache holds a family's files, collecting a test parametrized
    over the family's records of one kind reads each kind from the JSON: no record is built,
    and the plugin keeps the names and kinds, not the family (10^5 records or their JSON kept
    alive made each pass of the cyclic collector over pytest's items as costly again)."""
    inner.makepyfile(test_inner=FAMILY.replace('"onnx-node"', '"onnx-node", kind="onnx-case"'))
    inner.runpytest("--collect-only", "-q").stdout.fnmatch_lines(["*2 tests collected*"])
    built: list[str] = []
    real = parsed_cache.rebuild

    def counted(name: str, *args: Any) -> Any:
        built.append(name)
        return real(name, *args)

    monkeypatch.setattr(lazy_records, "rebuild", counted)
    result = inner.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_case?test_abs?*", "*test_case?test_add?*", "*2 tests*"])
    assert built == []
    other = FAMILY.replace('"onnx-node"', '"onnx-node", kind="fixture"')
    inner.makepyfile(test_inner=other)
    none = inner.runpytest("--collect-only", "-q").stdout.str()
    assert "test_abs" not in none and "test_add" not in none  # no case is a fixture


def test_the_xdist_controller_reads_no_registry_file(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under ``-n 2`` the controller collects nothing, so it parses nothing: with
    ``--fixture-store-attest`` its start-up check of the key needs the registry's folder, not
    its records (the workers, separate processes, read what they collect)."""
    read: list[str] = []
    real = raw_files.read_text

    def counted(path: Path) -> str:
        read.append(path.name)
        return real(path)

    monkeypatch.setattr(reading, "read_text", counted)  # in this process: the controller only
    priv, _ = write_keys(tmp_path / "home")
    inner.makepyfile(test_inner=FAMILY)
    result = inner.runpytest(
        "-p",
        "xdist",
        "-n",
        "2",
        f"--fixture-store-attest={tmp_path / 'certs'}",
        f"--fixture-store-attest-key={priv}",
    )
    result.assert_outcomes(passed=2)
    assert read == []


def test_a_broken_family_no_test_collects_from_is_reported_at_setup_not_collection(
    inner: pytest.Pytester,
) -> None:
    """Collection does not read an unrelated family; the tests that use the registry still
    report it, each as an error naming the file (the refusal is unchanged, only deferred)."""
    (inner.path / "provenance" / "other.json").write_text('{"format_version": 1, "records": ')
    inner.makepyfile(test_inner=FAMILY)
    collected = inner.runpytest("--collect-only", "-q")
    assert collected.ret == 0
    collected.stdout.fnmatch_lines(["*2 tests collected*"])
    ran = inner.runpytest("-q")
    ran.assert_outcomes(errors=2)
    ran.stdout.fnmatch_lines(["*other.json: not valid JSON*"])
