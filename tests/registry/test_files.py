"""Registry files that a parser or a machine cannot cope with are refused with a RegistryError
naming the file and the field (``fixture_store.registry.files``): integers past Python's digit
limit, nesting past the recursion limit, files that are not regular files, a full disk."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fixture_store import registry as registry_mod
from fixture_store.errors import RegistryError
from fixture_store.objects import digests
from fixture_store.registry import files as files_mod
from tests.support.records import local_record

HEX = "0" * 64


def _write(project: Path, text: str, family: str = "fam") -> Path:
    path = project / "provenance" / f"{family}.json"
    path.write_text(text)
    return path


def _record_text(size: str = "3", metadata: str | None = None) -> str:
    extra = f', "metadata": {metadata}' if metadata is not None else ""
    return (
        '{"format_version": 1, "records": {"fam/a": {"kind": "fixture", '
        f'"digest": "sha256:{HEX}", "size": {size}, '
        f'"source": {{"type": "local", "path": "x"}}{extra}}}}}}}'
    )


def test_an_integer_past_pythons_digit_limit_names_the_file_and_field(project: Path) -> None:
    path = _write(project, _record_text(size="9" * 5000))
    with pytest.raises(RegistryError) as caught:
        registry_mod.load(project)
    assert caught.value.file == str(path)
    assert (caught.value.record, caught.value.field) == ("fam/a", "size")
    assert "more than 20 digits" in caught.value.message and caught.value.fix


def test_a_size_no_file_can_have_is_an_invalid_record(project: Path) -> None:
    _write(project, _record_text(size=str(1 << 64)))
    invalid = dict(registry_mod.load(project).invalid())
    assert "larger than any file can be" in invalid["fam/a"].message
    assert invalid["fam/a"].field == "size"


def test_nesting_past_the_recursion_limit_names_the_file_and_field(project: Path) -> None:
    deep = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = _write(project, _record_text(metadata=deep))
    with pytest.raises(RegistryError) as caught:
        registry_mod.load(project)
    assert caught.value.file == str(path) and caught.value.record == "fam/a"
    assert caught.value.field is not None and caught.value.field.startswith("metadata.x[0]")
    assert "nested more than 64 levels deep" in caught.value.message


def test_nesting_the_parser_accepts_but_freezing_would_not_is_an_invalid_record(
    project: Path,
) -> None:
    _write(project, _record_text(metadata='{"x": ' + "[" * 200 + "]" * 200 + "}"))
    invalid = dict(registry_mod.load(project).invalid())
    assert "nested more than 64 levels deep" in invalid["fam/a"].message
    assert invalid["fam/a"].field is not None and invalid["fam/a"].field.startswith("metadata.x")


def test_metadata_a_few_levels_deep_still_loads(project: Path) -> None:
    _write(project, _record_text(metadata='{"x": ' + "[" * 10 + "]" * 10 + "}"))
    assert registry_mod.load(project).get("fam/a").metadata is not None


def test_a_generator_environment_nested_too_deep_is_refused(project: Path) -> None:
    env = "[" * 200 + "]" * 200
    text = (
        '{"format_version": 1, "records": {"fam/a": {"kind": "fixture", '
        f'"digest": "sha256:{HEX}", "size": 3, '
        f'"source": {{"type": "generator", "stage": "s", "environment": {{"e": {env}}}}}}}}}}}'
    )
    _write(project, text)
    invalid = dict(registry_mod.load(project).invalid())
    assert invalid["fam/a"].field is not None
    assert invalid["fam/a"].field.startswith("source.environment")


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_a_registry_path_that_is_not_a_regular_file_is_refused_before_reading(
    project: Path, kind: str
) -> None:
    path = project / "provenance" / "fam.json"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    result: list[BaseException] = []

    def load() -> None:
        try:
            registry_mod.load(project)
        except BaseException as e:  # handed to the test thread
            result.append(e)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=20)
    if reader.is_alive() and kind == "fifo":
        with open(path, "wb"):  # unblock the reader so the thread ends
            pass
    assert not reader.is_alive() and result, "reading the registry blocked"
    error = result[0]
    assert isinstance(error, RegistryError), error
    refused = "a symbolic link" if kind == "dev-zero" else "not a regular file"
    assert error.file == str(path) and refused in error.message and error.fix


@pytest.mark.usefixtures("store")
def test_a_full_disk_while_writing_keeps_the_old_file_and_leaves_no_temp(project: Path) -> None:
    """The disk is filled for real by a child process whose file size limit is 4 KiB
    (RLIMIT_FSIZE: the write fails with EFBIG, the same OSError path as ENOSPC)."""
    records = {}
    for i in range(40):
        data = f"bytes {i}".encode()
        records[f"fam/r{i:03}"] = {
            "kind": "fixture",
            "source": {"type": "local", "path": f"data/{i}.bin"},
            "digest": digests.of_bytes(data).text,
            "size": len(data),
        }
    path = project / "provenance" / "fam.json"
    path.write_text(files_mod.dumps({"format_version": 1, "records": records}))
    before = path.read_bytes()
    assert len(before) > 4096
    # The child limits itself (no preexec_fn: forking a process that runs JAX's threads is unsafe);
    # SIGXFSZ is ignored so the write fails with EFBIG instead of killing it.
    child = (
        "import resource, signal\n"
        "from fixture_store import registry as r\n"
        "from fixture_store.errors import RegistryError\n"
        "reg = r.load('.')\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    r.write_family(reg, 'fam', list(reg.records()))\n"
        "except RegistryError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot write the registry file: File too large" in proc.stdout
    assert "nothing was changed" in proc.stdout and "fix: free space" in proc.stdout
    assert path.read_bytes() == before
    leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert json.loads(before)["records"].keys() == records.keys()


class _CountingName(str):
    """A name that counts the equality tests made against it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountingName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_selecting_many_names_compares_each_a_few_times_not_once_per_record(
    project: Path,
) -> None:
    """``select`` of every name explicitly stays linear: a name is looked up, not compared
    against every record (thousands of names by thousands of records was quadratic)."""
    n = 2000
    records = {
        f"fam/r{i:05d}": {
            "kind": "fixture",
            "source": {"type": "local", "path": f"r{i}.bin"},
            "digest": f"sha256:{i:064x}",
            "size": 1,
        }
        for i in range(n)
    }
    _write(project, registry_mod.dumps({"format_version": 1, "records": records}))
    reg = registry_mod.load(project)
    wanted = [_CountingName(name) for name in reversed(sorted(records))]
    _CountingName.compared = 0
    assert reg.select(wanted) == sorted(records)
    assert _CountingName.compared <= 4 * n, _CountingName.compared


def _valid(name: str, data: bytes) -> dict[str, object]:
    d = digests.of_bytes(data)
    return {
        "kind": "fixture",
        "digest": d.text,
        "size": d.size,
        "source": {"type": "local", "path": f"data/{name}"},
    }


def test_writing_a_family_keeps_its_invalid_records_as_the_file_states_them(
    project: Path,
) -> None:
    broken = {**_valid("b", b"b"), "size": "big", "metadata": {"note": [1, {"x": None}]}}
    path = project / "provenance" / "fam.json"
    path.write_text(
        files_mod.dumps(
            {"format_version": 1, "records": {"fam/b": broken, "fam/a": _valid("a", b"a")}}
        )
    )
    registry = registry_mod.load(project)
    added = registry_mod.parse_record("fam/c", _valid("c", b"c"), file="t")
    registry_mod.write_family(registry, "fam", [*registry.records(), added])
    records = json.loads(path.read_text())["records"]
    assert records["fam/b"] == broken
    assert set(records) == {"fam/a", "fam/b", "fam/c"}
    # A write that names the invalid record replaces it: that is how it is repaired.
    registry = registry_mod.load(project)
    fixed = registry_mod.parse_record("fam/b", _valid("b", b"b"), file="t")
    registry_mod.write_family(registry, "fam", [*registry.records(), fixed])
    assert json.loads(path.read_text())["records"]["fam/b"] == _valid("b", b"b")
    assert not dict(registry_mod.load(project).invalid())


def test_an_invalid_record_too_deep_to_write_back_refuses_the_write_and_keeps_the_file(
    project: Path,
) -> None:
    # as deep as a registry text may be (the bounded reader parses it; the record is invalid)
    path = _write(project, _record_text(metadata='{"x": ' + "[" * 250 + "]" * 250 + "}"))
    before = path.read_bytes()
    registry = registry_mod.load(project)
    added = registry_mod.parse_record("fam/c", _valid("c", b"c"), file="t")
    limit = sys.getrecursionlimit()
    frames, below = 0, sys._getframe()
    while below is not None:
        frames, below = frames + 1, below.f_back  # type: ignore[assignment]
    sys.setrecursionlimit(frames + 150)  # below the record's depth: writing it back recurses
    try:
        with pytest.raises(RegistryError, match="nested too deep to be written back") as caught:
            registry_mod.write_family(registry, "fam", [added])
    finally:
        sys.setrecursionlimit(limit)
    assert caught.value.fix is not None and "fixture-store verify" in caught.value.fix
    assert path.read_bytes() == before


# Every value bound holds for a record wherever it is read, and the writer writes nothing the
# reader would refuse (issue 22, section 6).
FLAWED_VALUES = {
    "long-integer": ("9" * 30, "more than 20 digits"),
    "infinity": ("Infinity", "not finite"),
    "nan": ("NaN", "not finite"),
    "lone-surrogate": ('"\\ud800"', "lone surrogate"),
}


@pytest.mark.parametrize("flaw", sorted(FLAWED_VALUES))
def test_a_value_past_a_bound_in_a_registry_file_is_an_invalid_record(
    project: Path, flaw: str
) -> None:
    literal, said = FLAWED_VALUES[flaw]
    _write(project, _record_text(metadata=f'{{"x": {{"y": [{literal}]}}}}'))
    invalid = dict(registry_mod.load(project).invalid())
    assert said in invalid["fam/a"].message
    assert invalid["fam/a"].field == "metadata.x.y…"


@pytest.mark.parametrize(
    ("field", "literal", "said"),
    [
        ("seed", "9" * 30, "more than 20 digits"),
        ("description", '"\\ud800"', "lone surrogate"),
        ("license", '"ok\\udfff"', "lone surrogate"),
    ],
)
def test_a_value_past_a_bound_in_a_fixed_field_is_an_invalid_record(
    project: Path, field: str, literal: str, said: str
) -> None:
    """Fields whose parsers take any integer or string: the document's bounds still hold."""
    text = _record_text().replace('"size": 3', f'"size": 3, "{field}": {literal}')
    _write(project, text)
    invalid = dict(registry_mod.load(project).invalid())
    assert said in invalid["fam/a"].message and invalid["fam/a"].field == field


def test_a_lone_surrogate_in_a_key_or_a_fixed_field_is_an_invalid_record(project: Path) -> None:
    text = _record_text(metadata='{"\\udc80": 1}').replace('"path": "x"', '"path": "x\\ud800"')
    _write(project, text)
    error = dict(registry_mod.load(project).invalid())["fam/a"]
    assert "lone surrogate" in error.message and "\\ud" in str(error)


def test_a_family_holding_an_invalid_record_with_a_surrogate_is_written_back_as_stated(
    project: Path,
) -> None:
    """The writer cannot fail to encode: the invalid record comes back as the escape the file
    stated, beside the record written."""
    path = _write(project, _record_text(metadata='{"x": "\\ud800"}'))
    registry = registry_mod.load(project)
    files_mod.write_family(registry, "fam", [local_record("fam/b")])
    text = path.read_text(encoding="utf-8")
    assert '"\\ud800"' in text
    reloaded = registry_mod.load(project)
    assert set(reloaded.families["fam"].records) == {"fam/b"}
    assert "lone surrogate" in dict(reloaded.invalid())["fam/a"].message


@pytest.mark.parametrize(
    "value",
    [float("inf"), float("nan"), 10**25, "\ud800", {"k\udfff": 1}, json.loads("[" * 70 + "]" * 70)],
    ids=["inf", "nan", "long-integer", "surrogate", "surrogate-key", "deep"],
)
def test_a_record_built_in_code_that_would_not_read_back_is_never_written(
    project: Path, value: object
) -> None:
    registry = registry_mod.load(project)
    files_mod.write_family(registry, "fam", [local_record("fam/a")])
    path = project / "provenance" / "fam.json"
    before = path.read_bytes()
    bad = dataclasses.replace(local_record("fam/b", 1), metadata={"x": value})
    with pytest.raises(RegistryError) as caught:
        files_mod.write_family(registry_mod.load(project), "fam", [local_record("fam/a"), bad])
    assert caught.value.record == "fam/b" and caught.value.field is not None
    assert caught.value.field.startswith("metadata.x")
    assert "nothing was written" in caught.value.message and caught.value.fix
    assert path.read_bytes() == before
