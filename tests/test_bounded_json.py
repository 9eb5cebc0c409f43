"""The one bounded JSON reader (DESIGN decision 19, issue 34 class 5): every JSON document from
a remote, the store's state, a cache or a user's file is parsed under a size cap and a depth
bound measured before the parser runs; nothing in the package parses JSON around it."""

from __future__ import annotations

import ast
import base64
import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fixture_store
from fixture_store import attest, bounded_json
from fixture_store.errors import FixtureStoreError
from fixture_store.objects.store import Store
from fixture_store.parity import runlog
from tests.support.cli import run

PACKAGE = Path(fixture_store.__file__).parent
# Files that may parse JSON themselves, and why.
OUTSIDE = {
    "bounded_json.py": "the reader itself",
    # runs inside a generator's pinned environment, where fixture_store is not importable; it
    # reads the list of inputs the runner wrote for it
    "regenerate/kit/fixture_store_generator.py": "the generator kit (no fixture_store there)",
}


def _json_parsers(tree: ast.AST) -> list[int]:
    """The lines of ``json.load``/``json.loads`` calls, ``from json import load(s)`` and
    ``JSONDecoder`` uses in a module."""
    found = []
    for node in ast.walk(tree):
        attribute = (
            isinstance(node, ast.Attribute)
            and node.attr in ("load", "loads", "JSONDecoder")
            and isinstance(node.value, ast.Name)
            and node.value.id == "json"
        )
        imported = (
            isinstance(node, ast.ImportFrom)
            and node.module == "json"
            and any(a.name in ("load", "loads", "JSONDecoder", "decoder") for a in node.names)
        )
        if attribute or imported:
            found.append(getattr(node, "lineno", 0))
    return found


def test_no_json_is_parsed_outside_the_bounded_reader() -> None:
    """The walk: a new option or reader that parses JSON with ``json.loads`` fails here."""
    bypasses = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = _json_parsers(ast.parse(path.read_text(encoding="utf-8")))
        if lines and rel not in OUTSIDE:
            bypasses[rel] = lines
    assert bypasses == {}, f"parse JSON through fixture_store.bounded_json: {bypasses}"


def test_the_walk_sees_each_way_of_parsing() -> None:
    ways = ("import json\njson.loads(x)", "import json\njson.load(f)", "from json import loads")
    for text in ways:
        assert _json_parsers(ast.parse(text)), text


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_TEXT = st.text(alphabet=st.sampled_from('ab[]{}"\\\n\u00e9:,'), max_size=6)
_VALUES = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.booleans())
def test_the_depth_read_from_the_text_is_the_parsed_depth(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert bounded_json.depth(text) == _depth(value)


def test_a_document_past_its_bounds_is_refused_before_parsing() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(bounded_json.TooDeep, match="nested more than 128 levels"):
        bounded_json.loads(deep, cap=len(deep))
    with pytest.raises(bounded_json.TooLarge, match="more than the 10 read"):
        bounded_json.loads(b"[" + b"1," * 10 + b"1]", cap=10)
    # brackets inside strings do not count; escaped quotes do not end a string
    assert bounded_json.loads(b'["[[[[\\"[[[", "\\\\", [[1]]]', max_depth=3)[2] == [[1]]
    with pytest.raises(bounded_json.TooDeep):
        bounded_json.loads(b'["]]]]", [[[[1]]]]]', max_depth=4)
    # both are ValueError, as the parser's own errors are
    assert issubclass(bounded_json.BoundError, ValueError)


def test_lines_are_read_one_at_a_time_and_a_long_one_is_skipped_unheld() -> None:
    stream = io.BytesIO(b'{"a": 1}\n' + b"x" * 1_000_000 + b"\n\n[" * 1 + b"]\nnot json\n")
    tracemalloc.start()
    got = list(bounded_json.lines(stream, line_cap=1000))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert got[0] == {"a": 1}
    assert isinstance(got[1], bounded_json.TooLarge)
    assert got[2] is None and got[3] == []
    assert isinstance(got[4], ValueError)
    assert peak < 100_000  # the long line was never held


# -- the breaks of class 5 ------------------------------------------------------------------
def test_a_run_log_line_nested_200000_deep_is_counted_not_a_traceback(store: Store) -> None:
    store.state_dir.mkdir(parents=True, exist_ok=True)
    good = runlog.Run("fam/a", "sha256:" + "0" * 64, "device:cpu", "", True, 1, "t").to_line()
    (store.state_dir / runlog.LOG).write_bytes(
        good + b"[" * 200_000 + b"]" * 200_000 + b"\n" + b"y" * (runlog.LINE_CAP + 1) + b"\n" + good
    )
    runs, bad = runlog.read(store)
    assert len(runs) == 2 and bad == 2


@pytest.mark.usefixtures("project")
def test_expectations_reads_a_hostile_run_log_without_a_traceback(store: Store) -> None:
    store.state_dir.mkdir(parents=True, exist_ok=True)
    (store.state_dir / runlog.LOG).write_bytes(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    code, out, err = run("expectations", "--json")
    assert code == 0, err
    assert json.loads(out)["unreadable_log_lines"] == 1 and "Traceback" not in err


def test_the_run_log_rotates_at_its_cap_and_both_generations_are_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runlog, "LOG_CAP", 1000)
    for i in range(30):
        runlog.append(store, runlog.Run(f"fam/r{i:02d}", "d", "device:cpu", "", True, 1, "t"))
    sizes = {p.name: p.stat().st_size for p in store.state_dir.iterdir() if "parity" in p.name}
    assert set(sizes) == {runlog.LOG, runlog.OLDER}
    assert all(size < 1000 + 200 for size in sizes.values())  # never past the cap and a line
    runs, bad = runlog.read(store)
    assert bad == 0
    names = [r.record for r in runs]
    assert names == sorted(names) and names[-1] == "fam/r29"  # oldest first, the newest kept


def _envelope(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "signatures",
    [[{"keyid": "k", "sig": 5}], [{"keyid": 7, "sig": "AA=="}], ["x"], {"sig": "AA=="}],
    ids=["sig-number", "keyid-number", "signature-string", "signatures-object"],
)
def test_an_envelope_field_of_the_wrong_type_is_no_certificate(
    tmp_path: Path, signatures: object
) -> None:
    pytest.importorskip("securesystemslib")
    payload = base64.b64encode(b"{}").decode()
    path = _envelope(
        tmp_path / "c.json", {"payload": payload, "payloadType": "x", "signatures": signatures}
    )
    with pytest.raises(FixtureStoreError, match="is not a parity certificate"):
        attest.load_envelope(path)


def test_an_envelope_nested_deep_is_no_certificate(tmp_path: Path) -> None:
    pytest.importorskip("securesystemslib")
    path = tmp_path / "c.json"
    path.write_bytes(b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(FixtureStoreError, match=r"nest(s|ed) more than"):
        attest.load_envelope(path)


def test_a_log_larger_than_its_cap_is_read_from_its_newest_runs_only(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log an older version let grow (300 MB took 99 s and 1.49 GB to read) costs its cap."""
    store.state_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        runlog.Run(f"fam/r{i:04d}", "d", "device:cpu", "", True, 1, "t").to_line()
        for i in range(1000)
    ]
    (store.state_dir / runlog.LOG).write_bytes(b"".join(lines))
    monkeypatch.setattr(runlog, "LOG_CAP", 10 * len(lines[0]) + 5)
    runs, bad = runlog.read(store)
    assert bad == 0
    assert [r.record for r in runs] == [f"fam/r{i:04d}" for i in range(990, 1000)]
