"""Every format refuses any text it cannot read with a ManifestError (a usage error naming the
manifest), never another exception: a malformed manifest is a user mistake, not a crash."""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixture_store import importers
from fixture_store import registry as registry_mod
from fixture_store.cli import main
from fixture_store.errors import UsageError

SHA = "ab" * 32

# Text near each format's grammar: its own tokens, digests, paths and punctuation, recombined.
TOKENS = st.sampled_from(
    [
        SHA,
        SHA.upper(),
        "md5:" + "cd" * 16,
        "sha256:",
        "  ",
        " *",
        " ^",
        "\\",
        "\n",
        "#",
        "a.bin",
        "../x",
        "/etc/passwd",
        "'",
        '"',
        ":",
        "-",
        "- ",
        "outs:",
        "path: ",
        "md5: ",
        "size: ",
        "hash: md5",
        ".dir",
        "stages:",
        "{",
        "}",
        "[",
        "]",
        ",",
        "registry = ",
        "SHA256 (",
        ") = ",
        "format_version",
        "sha256",
        "null",
        "1",
        "-1",
        "true",
        "?",
    ]
)
TEXT = st.lists(TOKENS | st.text(max_size=4), max_size=30).map("".join)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.just(SHA),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "sha256",
                    "arrays",
                    "tolerance",
                    "upstream",
                    "seed",
                    "input_shape",
                    "dtype",
                    "shape",
                    "repository",
                    "a.bin",
                    "size",
                    "url",
                    "generator",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.parametrize(
    ("fmt", "shown"),
    [
        ("pooch", "registry.txt"),
        ("pooch", "_registry.py"),
        ("sha256sum", "SHA256SUMS"),
        ("dvc", "x.dvc"),
        ("dvc", "dvc.lock"),
        ("json", "manifest.json"),
    ],
)
@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_any_text_parses_or_is_refused_as_a_usage_error(fmt: str, shown: str, text: str) -> None:
    with contextlib.suppress(UsageError):
        importers.parse(fmt, text, shown)


@settings(max_examples=200, deadline=None)
@given(entry=JSONISH, environment=JSONISH)
def test_any_json_entry_parses_or_is_refused_as_a_usage_error(
    entry: object, environment: object
) -> None:
    doc = {"format_version": 1, "locked_environment": environment, "files": {"a.bin": entry}}
    with contextlib.suppress(UsageError):
        importers.parse("json", json.dumps(doc), "manifest.json")


# -- the property: hostile values in every format import cleanly or are refused clearly ----------
# A value is a literal as each format spells it: nesting, long integers, non-finite numbers,
# strings UTF-8 cannot hold (and their harmless neighbours). Whatever the format and the slot,
# the import either registers records that read back from disk valid, or is refused with one
# error (exit 1 or 2, a fix line); never a traceback, never a written invalid record.
DATA = b"alpha" * 100
DATA_SHA = hashlib.sha256(DATA).hexdigest()
LITERALS = st.one_of(
    st.sampled_from([2, 60, 63, 64, 65, 70, 1000, 5000]).map(lambda n: ("deep", n)),
    st.sampled_from([1, 19, 20, 21, 30, 4300, 4301, 5000]).map(lambda n: ("digits", n)),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1.5"]).map(
        lambda c: ("number", c)
    ),
    st.sampled_from(["\\ud800", "ok\\udfff", "\\ud83d\\ude00", "plain", "\\u00e9"]).map(
        lambda e: ("string", e)
    ),
)


def _json_literal(kind: str, value: object) -> str:
    if kind == "deep":
        return "[" * int(str(value)) + "]" * int(str(value))
    if kind == "digits":
        return "9" * int(str(value))
    if kind == "number":
        return str(value)
    return f'"{value}"'


def _yaml_literal(kind: str, value: object) -> str:
    numbers = {"NaN": ".nan", "Infinity": ".inf", "-Infinity": "-.inf"}
    numbers.update({"1e400": "1.0e+400", "-1e400": "-1.0e+400", "1.5": "1.5"})
    return numbers[str(value)] if kind == "number" else _json_literal(kind, value)


def _python_literal(kind: str, value: object) -> str:
    numbers = {"NaN": "float('nan')", "Infinity": "1e999", "-Infinity": "-1e999"}
    return numbers.get(str(value), _json_literal(kind, value))


def _manifest(fmt: str, slot: int, kind: str, value: object) -> tuple[str, str]:
    """The manifest file's name and text, the literal in one of the format's slots."""
    if fmt == "json":
        lit = _json_literal(kind, value)
        entry = [f'"x": {lit}', f'"seed": {lit}', f'"size": {lit}', f'"tolerance": {lit}'][slot]
        env = f', "locked_environment": {{"torch": {lit}}}' if slot == 0 else ""
        files = f'"fixtures": {{"a.bin": {{"sha256": "{DATA_SHA}", {entry}}}}}'
        return "m.json", f'{{"format_version": 1{env}, {files}}}'

    if fmt == "dvc":
        lit = _yaml_literal(kind, value)
        md5 = hashlib.md5(DATA, usedforsecurity=False).hexdigest()
        extra = [f"  meta: {lit}", f"  size: {lit}", f"  hash: {lit}", f"  meta: {{k: {lit}}}"][
            slot
        ]
        return "a.dvc", f"outs:\n- path: a.bin\n  md5: {md5}\n{extra}\n"
    if fmt == "pooch":
        lit = _python_literal(kind, value)
        return "reg.py", [
            f"registry = {{'a.bin': '{DATA_SHA}'}}\nregistry_urls = {{'a.bin': {lit}}}\n",
            f"registry = {{'a.bin': '{DATA_SHA}'}}\nother = {lit}\n",
            f"registry = {{'a.bin': {lit}}}\n",
            f"registry = {{{lit}: '{DATA_SHA}'}}\n",
        ][slot]
    lit = _json_literal(kind, value)
    return "SUMS", [
        f"{DATA_SHA}  {lit}\n",
        f"\\{DATA_SHA}  {lit}\n",
        f"{lit}  a.bin\n",
        f"{DATA_SHA}  a.bin\n# {lit}\n",
    ][slot]


@pytest.mark.parametrize("fmt", sorted(importers.FORMATS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(literal=LITERALS, slot=st.integers(0, 3))
def test_hostile_values_import_cleanly_or_are_refused_clearly(
    fmt: str, literal: tuple[str, object], slot: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project, store = Path(tmp, "project"), Path(tmp, "store")
        (project / "provenance").mkdir(parents=True)
        (project / "data").mkdir()
        (project / "data" / "a.bin").write_bytes(DATA)
        name, text = _manifest(fmt, slot, *literal)
        (project / "data" / name).write_text(text, encoding="utf-8")
        result = CliRunner().invoke(
            main,
            [
                "--store",
                str(store),
                "--registry",
                str(project),
                "import",
                fmt,
                str(project / "data" / name),
                "--family",
                "imp",
            ],
            catch_exceptions=True,
        )
        output = result.stdout + result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{name}: {text[:200]!r} raised") from result.exception
        assert "Traceback" not in output
        family = project / "provenance" / "imp.json"
        if result.exit_code == 0 or "refused:" in output:  # an entry refused stands alone
            assert result.exit_code == (1 if "refused:" in output else 0), output
            registry = registry_mod.load(project)  # the records parse back from disk
            assert not list(registry.invalid()), output
        else:
            assert result.exit_code in (1, 2), output
            assert "error:" in output and "fix:" in output, output
            assert not family.exists(), f"a record was written:\n{output}"
