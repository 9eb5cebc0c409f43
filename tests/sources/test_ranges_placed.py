"""A record's tensor ranges are held to the safetensors header they describe (issue 34, class 2).

A record whose tensor ``a`` carried the offset and sha256 of tensor ``b`` (or of the header's
bytes) made ``fetch --tensor a`` and ``Fixtures.tensor()`` hand out ``b``'s values, exit 0,
"verified": a two-field registry edit that reads as harmless in review. Now a ranged record
carries its header's length and sha256; when the record is read its ranges must tile the data
section after the header in order, without overlap; and before a range is served the header's
bytes, fetched and verified by that digest, must place it. The walk at the end holds every way
a range is read to that order."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save

import fixture_store
from fixture_store.access import Fixtures
from fixture_store.cli import main
from fixture_store.errors import FixtureStoreError, IntegrityError, InvalidRecordError
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.registry import Kind
from tests.support.fetchutil import make_registry, online_env  # noqa: F401 - autouse

# Two tensors of one shape and dtype: each one's range and digest would fit the other.
A = np.full((512, 256), 1.0, dtype=np.float32)
B = np.full((512, 256), 2.0, dtype=np.float32)


def _raw(tmp_path: Path) -> tuple[dict[str, Any], bytes]:
    """The record of a 1 MiB safetensors file with tensors a and b, its local source beside."""
    data = save({"a": A, "b": B})
    file = tmp_path / "p" / "model.safetensors"
    file.parent.mkdir(parents=True)
    file.write_bytes(data)
    described = content.describe(file, kind=Kind.CHECKPOINT, array_name="model")
    assert described.header is not None
    raw = {
        "kind": "checkpoint",
        "source": {"type": "local", "path": "model.safetensors"},
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": described.media_type,
        "arrays": {k: dict(v) for k, v in (described.arrays or {}).items()},
        "header": dict(described.header),
    }
    return raw, data


def _fixtures(tmp_path: Path, raw: dict[str, Any]) -> Fixtures:
    return Fixtures(Store.at(tmp_path / "store"), make_registry(tmp_path / "p", {"ckpt/m": raw}))


def test_an_honest_record_serves_each_tensor(tmp_path: Path) -> None:
    raw, _ = _raw(tmp_path)
    fixtures = _fixtures(tmp_path, raw)
    np.testing.assert_array_equal(fixtures.tensor("ckpt/m", "a"), A)
    np.testing.assert_array_equal(fixtures.tensor("ckpt/m", "b"), B)


def test_a_tensor_given_its_neighbours_range_is_refused_when_the_record_is_read(
    tmp_path: Path,
) -> None:
    """The two-field edit of the report: a takes b's offset and sha256."""
    raw, _ = _raw(tmp_path)
    arrays = raw["arrays"]
    arrays["a"].update(offset=arrays["b"]["offset"], sha256=arrays["b"]["sha256"])
    with pytest.raises(InvalidRecordError, match=r"arrays\.(a|b)\.offset.*tile the data"):
        _fixtures(tmp_path, raw).tensor("ckpt/m", "a")


def test_a_tensor_given_the_headers_bytes_is_refused_when_the_record_is_read(
    tmp_path: Path,
) -> None:
    raw, data = _raw(tmp_path)
    length = raw["arrays"]["a"]["length"]
    raw["arrays"]["a"].update(offset=0, sha256=hashlib.sha256(data[:length]).hexdigest())
    with pytest.raises(InvalidRecordError, match=r"arrays\.a\.offset.*overlaps"):
        _fixtures(tmp_path, raw).tensor("ckpt/m", "a")


def test_two_tensors_swapped_are_refused_before_a_byte_of_the_range_is_read(
    tmp_path: Path,
) -> None:
    """a and b swap ranges and digests: the ranges still tile, but the header (verified by
    its recorded digest) places a elsewhere."""
    raw, _ = _raw(tmp_path)
    a, b = raw["arrays"]["a"], raw["arrays"]["b"]
    for key in ("offset", "sha256"):
        a[key], b[key] = b[key], a[key]
    fixtures = _fixtures(tmp_path, raw)
    with pytest.raises(IntegrityError, match=r"tensor 'a': the record gives .* the header gives"):
        fixtures.tensor("ckpt/m", "a")
    result = CliRunner().invoke(
        main,
        ["--store", str(tmp_path / "store"), "--registry", str(tmp_path / "p"),
         "fetch", "ckpt/m", "--tensor", "a", "--output", str(tmp_path / "a.npy")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "the header gives" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "a.npy").exists()


def test_a_header_other_than_the_recorded_one_serves_nothing(tmp_path: Path) -> None:
    raw, _ = _raw(tmp_path)
    raw["header"]["sha256"] = "0" * 64
    with pytest.raises(IntegrityError, match=r"the header: .* do not have the header's sha256"):
        _fixtures(tmp_path, raw).tensor("ckpt/m", "a")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda raw: raw.pop("header"), r"header.*missing"),
        (lambda raw: raw["header"].update(length=8), r"header\.length"),
        (lambda raw: raw["arrays"]["b"].pop("sha256"), r"arrays\.b"),
        (lambda raw: raw.update(size=raw["size"] + 4), r"ranges end at byte"),
    ],
    ids=["no-header", "short-header", "one-unranged", "bytes-after"],
)
def test_a_record_whose_ranges_cannot_be_placed_is_invalid(
    tmp_path: Path, change: Any, said: str
) -> None:
    raw, _ = _raw(tmp_path)
    change(raw)
    with pytest.raises(FixtureStoreError, match=said):
        _fixtures(tmp_path, raw).tensor("ckpt/m", "a")


def test_verify_holds_the_stored_object_to_the_recorded_header(tmp_path: Path) -> None:
    from fixture_store.fetch import fetch_names
    from fixture_store.verify import verify_names

    raw, data = _raw(tmp_path)
    header = raw["header"]
    fixtures = _fixtures(tmp_path, raw)
    assert fetch_names(fixtures.store, fixtures.registry, ["ckpt/m"]).results[0].ok
    # a header digest of other bytes of that length: the stored object does not have it
    header["sha256"] = hashlib.sha256(data[1 : header["length"] + 1]).hexdigest()
    again = _fixtures_again(tmp_path, raw)
    result = verify_names(again.store, again.registry, ["ckpt/m"], full=True)[0]
    assert not result.ok and "header.sha256" in str(result.error)


def _fixtures_again(tmp_path: Path, raw: dict[str, Any]) -> Fixtures:
    return Fixtures(Store.at(tmp_path / "store"), make_registry(tmp_path / "p", {"ckpt/m": raw}))


# -- the walk: every range is placed by the header before it is read ---------------------------
PACKAGE = Path(fixture_store.__file__).parent
# The one function that makes a tensor's span and serves it.
SERVES = ("remotes/ranges.py", "read_tensor")
# Where spans, plans and pieces are made: the ranges modules' own constructors.
MAKERS = {
    ("sources/ranges.py", "tensor_span"),
    ("sources/ranges.py", "header_span"),
    ("readers/tensor_ranges.py", "plan_read"),
}


def _calls() -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(module, function) -> the names it calls, with their lines."""
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        if not any(word in text for word in ("tensor_span", "Span", "Piece", "tensor_ranges")):
            continue  # cannot make or serve a span: nothing to hold
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                names = [
                    (c.func.id if isinstance(c.func, ast.Name) else c.func.attr, c.lineno)
                    for c in ast.walk(node)
                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Name | ast.Attribute)
                ]
                out.setdefault((rel, node.name), []).extend(names)
    return out


def test_every_range_served_is_placed_by_the_header_first() -> None:
    calls = _calls()
    spans = sorted(k for k, names in calls.items() if any(n == "tensor_span" for n, _ in names))
    assert spans == [SERVES], f"tensor spans are made (and served) only by {SERVES}: {spans}"
    made = sorted(
        k
        for k, names in calls.items()
        if any(n in ("Span", "Piece") for n, _ in names) and k not in MAKERS
    )
    assert not made, f"spans are made only by {sorted(MAKERS)}, never by hand: {made}"
    order = calls[SERVES]
    placed = [line for n, line in order if n == "check_placed"]
    reads = [line for n, line in order if n == "read_span"]
    assert placed and [line for n, line in order if n == "header_span"]
    assert reads and max(placed) <= max(reads), "the header places the range before it is read"


def test_the_walk_finds_a_second_server(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def serve(r, k):\n    return read_span(c, tensor_span(r, k)[0], ())\n")
    tree = ast.parse(module.read_text())
    found = [
        c.func.id
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
    ]
    assert "tensor_span" in found and "check_placed" not in found
