"""fetch: every artifact is verified again after its fetch, and only then counts as fetched.

The sources check the bytes they put (see tests/sources/); these tests break that first line on
purpose, or give it bytes that pass it, and check that fetch's own verification still refuses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fixture_store import fetch as fetch_mod
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import DigestMismatchError, UnsafeContentError
from fixture_store.fetch import Outcome, fetch_names
from fixture_store.objects import digests, trees
from fixture_store.objects.store import Store
from fixture_store.readers.archives import extraction_path
from fixture_store.registry import Record, transactions, writing
from fixture_store.sources import FetchContext
from tests.support.cli import run
from tests.support.fetchutil import file_record, make_registry, online_env  # noqa: F401 - autouse
from tests.support.hostile import manifest, tar_bytes, tar_info
from tests.support.importing import family_doc
from tests.support.served import Served, https_files

GOOD = {"data/a.bin": b"alpha" * 100, "b.txt": b"bravo\n"}


def _objects(store: Store) -> list[str]:
    return [h for h, _ in store.iter_objects()]


def test_an_object_that_does_not_verify_after_its_fetch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that skipped its own check (here: one that writes other bytes of the right
    size straight to the object's address) is caught by the verification after the fetch."""
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.bin").write_bytes(b"alpha")
    registry = make_registry(
        root, {"loc/a": file_record({"type": "local", "path": "data/a.bin"}, b"alpha")}
    )
    store = Store.at(tmp_path / "store").ensure()

    def careless(ctx: FetchContext, record: Record) -> None:
        assert record.digest is not None
        path = ctx.store.object_path(record.digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"omega")  # five bytes, as the record says; not its SHA-256

    monkeypatch.setattr(fetch_mod, "fetch_record", careless)
    report = fetch_names(store, registry, ["loc/a"])
    [result] = report.results
    assert result.outcome is Outcome.FAILED and not result.ok
    assert result.message.startswith("fetched but does not verify: object does not match")
    assert result.fix is not None and "fixture-store fetch loc/a" in result.fix
    summary = report.summary(registry)
    assert summary["ok"] is False and "verified" not in summary["families"]["loc"]
    assert summary["sources"] == []
    with pytest.raises(DigestMismatchError, match="loc/a"):
        Fixtures(store, registry).path("loc/a")


def _hostile_archive_project(tmp_path: Path) -> tuple[Any, bytes]:
    """An archive record whose digest is right but whose content breaks the archive rules."""
    evil = tar_bytes(
        [(tar_info(n, len(d)), d) for n, d in GOOD.items()] + [(tar_info("../evil", 4), b"evil")]
    )
    root = tmp_path / "p"
    root.mkdir(parents=True)
    (root / "w.tar").write_bytes(evil)
    d = digests.of_bytes(evil)
    registry = make_registry(
        root,
        {
            "arc/w": {
                "kind": "archive",
                "digest": d.text,
                "size": d.size,
                "members": trees.to_json(trees.Tree(manifest(GOOD))),
                "source": {"type": "local", "path": "w.tar"},
            }
        },
    )
    return registry, evil


def test_a_fetched_hostile_archive_is_refused_and_not_published(tmp_path: Path) -> None:
    registry, evil = _hostile_archive_project(tmp_path)
    store = Store.at(tmp_path / "store")
    report = fetch_names(store, registry, ["arc/w"])
    [result] = report.results
    assert result.outcome is Outcome.FAILED
    assert result.message.startswith("fetched but does not verify:")
    assert "[traversal]" in result.message and "'../evil'" in result.message
    assert report.summary(registry)["ok"] is False
    # Its bytes are the record's, but nothing hands them out: no access, no extraction, no pass.
    with pytest.raises(UnsafeContentError, match="traversal"):
        Fixtures(store, registry).path("arc/w")
    digest = registry.get("arc/w").digest
    assert digest is not None
    assert not extraction_path(store, digest).exists()
    assert not list((store.state_dir / "content").glob("*.ok"))
    # A second fetch does not take the stored bytes as present: still refused.
    again = fetch_names(store, registry, ["arc/w"]).results[0]
    assert again.outcome is Outcome.FAILED and "[traversal]" in again.message
    assert _objects(store) == [digests.of_bytes(evil).hex]


def test_a_tree_member_with_other_bytes_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "case").mkdir(parents=True)
    for name, data in GOOD.items():
        (root / "case" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "case" / name).write_bytes(data)
    tree, _ = trees.hash_folder(root / "case")
    (root / "case" / "b.txt").write_bytes(b"BRAVO\n")  # same size, other bytes
    registry = make_registry(
        root,
        {
            "loc/case": {
                "kind": "tree",
                "source": {"type": "local", "path": "case"},
                "digest": tree.digest.text,
                "size": tree.digest.size,
                "members": trees.to_json(tree),
            }
        },
    )
    store = Store.at(tmp_path / "store")
    result = fetch_names(store, registry, ["loc/case"]).results[0]
    assert result.outcome is Outcome.FAILED
    assert "member 'b.txt'" in result.message and "does not match the record" in result.message
    # The good member may be stored (it verified); the bad one and the manifest are not.
    assert set(_objects(store)) <= {digests.of_bytes(GOOD["data/a.bin"]).hex}
    assert digests.of_bytes(b"BRAVO\n").hex not in _objects(store)


def test_present_records_are_settled_without_the_pool_and_results_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm fetch answers what the verified-state cache vouches for in one loop; only the
    records that need reading or downloading go to the threads, and the results come back
    in the order of the names asked for."""
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    raw = {}
    for i in range(6):
        (root / "data" / f"{i}.bin").write_bytes(f"bytes {i}".encode())
        raw[f"loc/r{i}"] = file_record(
            {"type": "local", "path": f"data/{i}.bin"}, f"bytes {i}".encode()
        )
    registry = make_registry(root, raw)
    store = Store.at(tmp_path / "store").ensure()
    names = [f"loc/r{i}" for i in (3, 0, 5, 1, 4, 2)]
    assert all(r.ok for r in fetch_names(store, registry, names[:4]).results)

    pooled: list[str] = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            pooled.extend(a for a in args if isinstance(a, str))
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(fetch_mod, "ThreadPoolExecutor", Counting)
    report = fetch_names(store, registry, names)
    assert [r.name for r in report.results] == names
    assert [r.outcome for r in report.results] == [Outcome.PRESENT] * 4 + [Outcome.FETCHED] * 2
    assert pooled == names[4:]  # the two not yet in the store, and nothing else


# -- gaps known by their digest alone: the first fetch checks it and records the SHA-256 -------

ALPHA, BRAVO = b"alpha\n" * 300, b"bravo\n" * 200


def _hex(algorithm: str, data: bytes) -> str:
    return hashlib.new(algorithm, data).hexdigest()


def _pooch_gaps(
    project: Path, served: Served, files: dict[str, bytes], algorithm: str, family: str = "refs"
) -> Path:
    """A pooch registry listing ``files`` by ``algorithm`` (``sha256``: bare hex, as pooch
    writes it) at their URLs on ``served``, none of them present, imported with ``--gaps``."""
    lines = []
    for name, data in files.items():
        digest = _hex(algorithm, data)
        stated = digest if algorithm == "sha256" else f"{algorithm}:{digest}"
        lines.append(f"{name} {stated} {served.url(name)}\n")
    manifest = project / "data" / family / "registry.txt"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text("".join(lines))
    code, _, err = run("import", str(manifest), "--family", family, "--gaps")
    assert code == 0, err
    return project / "provenance" / f"{family}.json"


def _fetch_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run("fetch", *args, "--json")
    doc: dict[str, Any] = json.loads(out)
    return code, doc


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha256"])
def test_a_gap_known_by_its_digest_alone_is_filled_by_fetch_and_its_sha256_recorded(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    """A pooch line known by md5 or sha1 alone (a gap marked weak), or by a sha256 without a
    size: the first fetch checks the download against that digest, records its SHA-256 and
    size, lifts the gap and keeps the digest it was checked against; verify then passes."""
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        _pooch_gaps(project, served, {"a.bin": ALPHA}, algorithm)
        gap = family_doc(project, "refs")["records"]["refs/a.bin"]
        assert gap["digest"] == f"{algorithm}:{_hex(algorithm, ALPHA)}" and "size" not in gap
        assert gap["source"] == {"type": "url", "url": served.url("a.bin")}
        assert run("verify", "refs/a.bin")[0] == 0  # a declared gap, before
        code, doc = _fetch_json("refs/a.bin")
    assert code == 0, doc
    sha = digests.of_bytes(ALPHA)
    [result] = doc["results"]
    assert result["outcome"] == "fetched" and doc["recorded"] == ["refs/a.bin"]
    assert result["recorded"] == {
        "digest": sha.text,
        "size": len(ALPHA),
        "checked_against": f"{algorithm}:{_hex(algorithm, ALPHA)}",
    }
    record = family_doc(project, "refs")["records"]["refs/a.bin"]
    assert (record["digest"], record["size"]) == (sha.text, len(ALPHA))
    assert "gap" not in record and record["source"] == gap["source"]
    assert record["metadata"]["imported_from"]["digests"] == [
        f"{algorithm}:{_hex(algorithm, ALPHA)}"
    ]
    assert Store.at(project.parent / "store").has(sha)
    code, out, err = run("verify", "--full", "refs/a.bin")
    assert code == 0 and "1 verified" in out, err


@pytest.mark.usefixtures("store")
def test_a_server_sending_other_bytes_is_refused_and_its_neighbour_still_filled(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One gap's server answers with other bytes: that fill is refused, naming the artifact,
    the digest awaited and the one received, with the fix; nothing of those bytes is stored
    and its record is left as it was. Its neighbour is judged on its own, and filled."""
    with https_files(tmp_path, monkeypatch) as served:
        registry_file = _pooch_gaps(project, served, {"a.bin": ALPHA, "b.bin": BRAVO}, "md5")
        before = json.loads(registry_file.read_text())["records"]["refs/b.bin"]
        wrong = b"bravo\n" * 199 + b"BRAVO\n"
        served.files.update({"/a.bin": ALPHA, "/b.bin": wrong})
        code, doc = _fetch_json("--family", "refs")
        again, _, err = run("fetch", "refs/b.bin")  # refused again, as the terminal says it
    assert again == 1 and "refs/b.bin" in err and "do not have the md5 the gap awaits" in err
    assert code == 1
    by_name = {r["name"]: r for r in doc["results"]}
    good, bad = by_name["refs/a.bin"], by_name["refs/b.bin"]
    assert good["outcome"] == "fetched" and doc["recorded"] == ["refs/a.bin"]
    assert bad["outcome"] == "failed" and bad["recorded"] is None
    assert f"expected md5:{_hex('md5', BRAVO)}, got md5:{_hex('md5', wrong)}" in bad["message"]
    assert "nothing was stored" in bad["message"]
    assert "fixture-store fetch refs/b.bin" in (bad["fix"] or "")
    assert (doc["refused_downloads"], doc["refused_bytes"]) == (1, len(wrong))
    objects = _objects(Store.at(project.parent / "store"))
    assert digests.of_bytes(wrong).hex not in objects
    assert digests.of_bytes(ALPHA).hex in objects
    records = json.loads(registry_file.read_text())["records"]
    assert records["refs/b.bin"] == before  # still the gap, awaiting the same md5
    assert "gap" not in records["refs/a.bin"]


@pytest.mark.usefixtures("store")
def test_a_second_fetch_downloads_nothing_and_writes_nothing(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        registry_file = _pooch_gaps(project, served, {"a.bin": ALPHA}, "sha1")
        assert _fetch_json("--family", "refs")[0] == 0
        after_first, asked = registry_file.read_bytes(), list(served.requests)
        code, doc = _fetch_json("--family", "refs")
        assert code == 0 and served.requests == asked == ["/a.bin"]
    assert doc["counts"] == {"present": 1} and doc["downloads"] == 0
    assert doc["recorded"] == [] and doc["results"][0]["recorded"] is None
    assert registry_file.read_bytes() == after_first


@pytest.mark.usefixtures("store")
def test_offline_a_gap_is_not_filled_and_nothing_is_written(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        registry_file = _pooch_gaps(project, served, {"a.bin": ALPHA}, "md5")
        before = registry_file.read_bytes()
        code, doc = _fetch_json("--family", "refs", "--offline")
        assert served.requests == []
    assert code == 1 and doc["recorded"] == []
    [result] = doc["results"]
    assert result["outcome"] == "failed" and "offline mode is on" in result["message"]
    assert registry_file.read_bytes() == before
    assert _objects(Store.at(project.parent / "store")) == []


@pytest.mark.usefixtures("store")
def test_the_sha256_of_every_gap_filled_is_recorded_in_one_transaction(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three gaps of two families: one registry transaction after the downloads, each family
    file written once."""
    with https_files(tmp_path, monkeypatch) as served:
        served.files.update({"/a.bin": ALPHA, "/b.bin": BRAVO, "/c.bin": ALPHA + BRAVO})
        _pooch_gaps(project, served, {"a.bin": ALPHA, "b.bin": BRAVO}, "md5")
        _pooch_gaps(project, served, {"c.bin": ALPHA + BRAVO}, "sha1", family="more")
        opened: list[Path] = []
        written: list[str] = []
        real_transaction, real_replace = transactions.transaction, writing.replace_family

        def transaction(root: Any = None) -> Any:
            opened.append(Path(root))
            return real_transaction(root)

        def replace_family(directory: Path, family: str, *args: Any, **kwargs: Any) -> Path:
            written.append(family)
            return real_replace(directory, family, *args, **kwargs)

        monkeypatch.setattr(transactions, "transaction", transaction)
        monkeypatch.setattr(transactions, "replace_family", replace_family)
        store = Store.at(project.parent / "store")
        report = fetch_names(
            store, registry_mod.load(project), ["refs/a.bin", "refs/b.bin", "more/c.bin"]
        )
    assert [r.outcome for r in report.results] == [Outcome.FETCHED] * 3
    assert [r.name for r in report.recorded] == ["refs/a.bin", "refs/b.bin", "more/c.bin"]
    assert len(opened) == 1 and sorted(written) == ["more", "refs"]
    records = registry_mod.load(project)
    for name, data in (("refs/a.bin", ALPHA), ("refs/b.bin", BRAVO), ("more/c.bin", ALPHA + BRAVO)):
        record = records.get(name)
        assert record.gap is None and record.digest == digests.of_bytes(data)


# -- gaps that kept their digest and size: lifted once their bytes are in the store ------------


def _tfds_gaps(
    project: Path, served: Served, files: dict[str, bytes], family: str = "refs"
) -> Path:
    """A TFDS checksums file listing ``files`` by URL on ``served``, size and SHA-256, none of
    them present, imported with ``--gaps``: gaps that keep their digest and size, with a url
    source."""
    lines = [f"{served.url(n)}\t{len(d)}\t{_hex('sha256', d)}\t{n}\n" for n, d in files.items()]
    manifest = project / "data" / family / "checksums.tsv"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text("".join(lines))
    code, _, err = run("import", str(manifest), "--family", family, "--gaps")
    assert code == 0, err
    return project / "provenance" / f"{family}.json"


def _without_gap(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "gap"}


@pytest.mark.usefixtures("store")
def test_a_gap_that_kept_its_digest_and_size_is_lifted_by_fetch_in_one_transaction(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gaps that kept their digest and size (two families) and one known by md5 alone:
    fetch brings their bytes and lifts the three gaps in one registry transaction after the
    downloads, each family file written once. A gap that kept its digest keeps it, and every
    other field: only the gap goes; verify then passes."""
    with https_files(tmp_path, monkeypatch) as served:
        served.files.update({"/a.bin": ALPHA, "/b.bin": BRAVO, "/c.bin": ALPHA + BRAVO})
        refs = _tfds_gaps(project, served, {"a.bin": ALPHA})
        _pooch_gaps(project, served, {"b.bin": BRAVO}, "md5")
        more = _tfds_gaps(project, served, {"c.bin": ALPHA + BRAVO}, family="more")
        before = {
            "refs/a.bin": json.loads(refs.read_text())["records"]["refs/a.bin"],
            "more/c.bin": json.loads(more.read_text())["records"]["more/c.bin"],
        }
        assert all("gap" in r and "size" in r for r in before.values())
        opened: list[Path] = []
        written: list[str] = []
        real_transaction, real_replace = transactions.transaction, writing.replace_family

        def transaction(root: Any = None) -> Any:
            opened.append(Path(root))
            return real_transaction(root)

        def replace_family(directory: Path, family: str, *args: Any, **kwargs: Any) -> Path:
            written.append(family)
            return real_replace(directory, family, *args, **kwargs)

        monkeypatch.setattr(transactions, "transaction", transaction)
        monkeypatch.setattr(transactions, "replace_family", replace_family)
        code, doc = _fetch_json("refs/a.bin", "refs/b.bin", "more/c.bin")
    assert code == 0, doc
    assert len(opened) == 1 and sorted(written) == ["more", "refs"]
    assert doc["counts"] == {"fetched": 3}
    assert doc["lifted"] == ["more/c.bin", "refs/a.bin", "refs/b.bin"]  # the names in order
    assert doc["recorded"] == ["refs/b.bin"]  # the only one whose SHA-256 was not known
    by_name = {r["name"]: r for r in doc["results"]}
    assert [by_name[n]["lifted"] for n in doc["lifted"]] == [True] * 3
    assert by_name["refs/a.bin"]["recorded"] is None
    after = {**family_doc(project, "refs")["records"], **family_doc(project, "more")["records"]}
    for name, record in before.items():
        assert after[name] == _without_gap(record)  # the same digest, size, source, metadata
    assert "gap" not in after["refs/b.bin"]
    code, out, err = run("verify", "--full", "refs/a.bin", "more/c.bin")
    assert code == 0 and "2 verified" in out, err


@pytest.mark.usefixtures("store")
def test_a_lifted_gap_is_fetched_again_as_a_no_op(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        registry_file = _tfds_gaps(project, served, {"a.bin": ALPHA})
        code, doc = _fetch_json("--family", "refs")
        assert code == 0 and doc["lifted"] == ["refs/a.bin"], doc
        after_first, asked = registry_file.read_bytes(), list(served.requests)
        code, doc = _fetch_json("--family", "refs")
        assert code == 0 and served.requests == asked == ["/a.bin"]
    assert doc["counts"] == {"present": 1} and doc["downloads"] == 0
    assert doc["lifted"] == [] and doc["results"][0]["lifted"] is False
    assert registry_file.read_bytes() == after_first


@pytest.mark.usefixtures("store")
def test_offline_a_gap_that_kept_its_digest_is_not_fetched_and_nothing_is_written(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        registry_file = _tfds_gaps(project, served, {"a.bin": ALPHA})
        before = registry_file.read_bytes()
        code, doc = _fetch_json("--family", "refs", "--offline")
        assert served.requests == []
    assert code == 1 and doc["lifted"] == []
    [result] = doc["results"]
    assert result["outcome"] == "failed" and "offline mode is on" in result["message"]
    assert registry_file.read_bytes() == before
    assert _objects(Store.at(project.parent / "store")) == []


@pytest.mark.usefixtures("store")
def test_other_bytes_for_a_gap_that_kept_its_digest_are_refused_and_its_neighbour_lifted(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One gap's server sends other bytes of the size it kept: refused as any download that
    does not match its record, nothing stored, its gap kept. Its neighbour's gap is lifted."""
    wrong = b"bravo\n" * 199 + b"BRAVO\n"
    with https_files(tmp_path, monkeypatch) as served:
        registry_file = _tfds_gaps(project, served, {"a.bin": ALPHA, "b.bin": BRAVO})
        before = json.loads(registry_file.read_text())["records"]
        served.files.update({"/a.bin": ALPHA, "/b.bin": wrong})
        code, doc = _fetch_json("--family", "refs")
    assert code == 1
    by_name = {r["name"]: r for r in doc["results"]}
    good, bad = by_name["refs/a.bin"], by_name["refs/b.bin"]
    assert good["outcome"] == "fetched" and doc["lifted"] == ["refs/a.bin"]
    assert bad["outcome"] == "failed" and bad["lifted"] is False
    assert f"expected {digests.of_bytes(BRAVO)}, got {digests.of_bytes(wrong)}" in bad["message"]
    assert (doc["refused_downloads"], doc["refused_bytes"]) == (1, len(wrong))
    objects = _objects(Store.at(project.parent / "store"))
    assert digests.of_bytes(wrong).hex not in objects
    records = json.loads(registry_file.read_text())["records"]
    assert records["refs/b.bin"] == before["refs/b.bin"]  # still the gap
    assert records["refs/a.bin"] == _without_gap(before["refs/a.bin"])


@pytest.mark.usefixtures("store")
def test_a_gap_whose_bytes_are_already_in_the_store_is_lifted_and_one_without_a_source_kept(
    project: Path, store: Store
) -> None:
    """Bytes that reached the store before (a fetch that did not lift gaps yet, a record
    changed during the fetch that was to lift it) lift the gap of the fetch that finds them,
    with nothing downloaded. A gap with no source stays one: lifted, it would have nowhere to
    come from."""
    gap = {"gap": {"reason": "absent"}}
    url = {"type": "url", "url": "https://127.0.0.1:9/a.bin"}  # never asked: the bytes are here
    registry = make_registry(
        project,
        {
            "refs/a.bin": {**file_record(url, ALPHA), **gap},
            "refs/b.bin": {k: v for k, v in file_record({}, BRAVO).items() if k != "source"} | gap,
        },
    )
    store.put_bytes(ALPHA)
    store.put_bytes(BRAVO)
    report = fetch_names(store, registry, ["refs/a.bin", "refs/b.bin"], offline=True)
    assert [r.outcome for r in report.results] == [Outcome.PRESENT] * 2
    assert [r.name for r in report.lifted] == ["refs/a.bin"] and report.recorded == []
    after = registry_mod.load(project)
    assert after.get("refs/a.bin") == dataclasses.replace(registry.get("refs/a.bin"), gap=None)
    assert after.get("refs/b.bin") == registry.get("refs/b.bin")
    assert fetch_names(store, after, ["refs/a.bin", "refs/b.bin"], offline=True).lifted == []


@pytest.mark.usefixtures("store")
def test_two_fetches_that_read_the_same_gap_both_succeed_and_lift_it_once(
    project: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetches run at once (xdist workers of the pytest plugin): one that read the gap before
    the other lifted it finds its record already holding those bytes, and counts it lifted
    rather than changed under it."""
    with https_files(tmp_path, monkeypatch) as served:
        served.files["/a.bin"] = ALPHA
        registry_file = _tfds_gaps(project, served, {"a.bin": ALPHA})
        read = registry_mod.load(project)
        first = fetch_names(store, read, ["refs/a.bin"])
        lifted = registry_file.read_bytes()
        second = fetch_names(store, read, ["refs/a.bin"])  # as if it had read before the first
    assert [r.outcome for r in first.results] == [Outcome.FETCHED]
    assert [r.outcome for r in second.results] == [Outcome.PRESENT]
    assert [r.name for r in second.lifted] == ["refs/a.bin"]
    assert registry_file.read_bytes() == lifted and "gap" not in lifted.decode()
