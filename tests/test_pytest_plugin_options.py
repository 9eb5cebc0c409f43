"""Every option, ini value and environment variable of the pytest plugin over hostile values:
no traceback and no INTERNALERROR, a usage error that names what it refuses, and no raw
control character in what pytest prints.

Options join by being registered in ``pytest_addoption``: the harness records what the plugin
registers, and an option or ini value without an entry in :data:`HOSTILE` fails the harness until
one is added (as ``tests/cli/test_harness.py`` does for the commands)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fixture_store import pytest_plugin
from tests.cli.test_harness import RAW_CONTROL
from tests.test_pytest_plugin import inner

__all__ = ["inner"]  # the inner project fixture, shared with the plugin's own tests

ESCAPES = "\x1b[2J\x1b]0;owned\x07"
LONG = "9" * 5000

TESTS = """
import pytest

@pytest.mark.fixture_store("misc/blob")
def test_blob(fixture_store):
    assert fixture_store.path("misc/blob").read_bytes() == b"reference bytes"

def test_plain():
    pass
"""


class _Recorder:
    """Stands in for pytest's parser: records the names the plugin registers."""

    def __init__(self) -> None:
        self.options: list[str] = []
        self.ini: list[str] = []

    def getgroup(self, *_: Any, **__: Any) -> _Recorder:
        return self

    def addoption(self, *names: str, **_: Any) -> None:
        self.options.append(names[0])

    def addini(self, name: str, *_: Any, **__: Any) -> None:
        self.ini.append(name)


def _registered() -> set[str]:
    recorder = _Recorder()
    pytest_plugin.pytest_addoption(recorder)  # type: ignore[arg-type]
    return {*recorder.options, *recorder.ini}


# A case: the command-line arguments, the environment to set, an ini text, and what a refusal
# must name. "{file}" is a regular file, "{missing}" a path that does not exist, "{root}" the
# inner project.
Case = tuple[tuple[str, ...], dict[str, str], str, str]
HOSTILE: dict[str, list[Case]] = {
    "--fixture-store-dir": [
        (("--fixture-store-dir", "{file}"), {}, "", "{file}"),
        (("--fixture-store-dir", "/dev/null"), {}, "", "/dev/null"),
        (("--fixture-store-dir", "{file}/below"), {}, "", "{file}"),
        (("--fixture-store-dir", f"{{root}}/{ESCAPES}"), {}, "", "store"),
    ],
    "--fixture-store-registry": [
        (("--fixture-store-registry", "{file}"), {}, "", "{file}"),
        (("--fixture-store-registry", "{missing}"), {}, "", "{missing}"),
        (("--fixture-store-registry", f"{{root}}/{ESCAPES}"), {}, "", "provenance"),
    ],
    "--fixture-store-require": [
        ((), {"FIXTURE_STORE_REQUIRE": "true"}, "", "FIXTURE_STORE_REQUIRE"),
        ((), {"FIXTURE_STORE_REQUIRE": ESCAPES}, "", "FIXTURE_STORE_REQUIRE"),
        ((), {"FIXTURE_STORE_REQUIRE": LONG}, "", "FIXTURE_STORE_REQUIRE"),
    ],
    "--fixture-store-complete": [
        (("--fixture-store-complete",), {}, "fixture_store_gaps =\n    no colon", "gaps"),
        (("--fixture-store-complete",), {}, "fixture_store_gaps =\n    :", "gaps"),
        (("--fixture-store-complete",), {}, f"fixture_store_gaps =\n    {ESCAPES}: x", "gaps"),
    ],
    "--fixture-store-parity-dump": [
        (("--fixture-store-parity-dump", "{file}"), {}, "", "{file}"),
        ((), {"FIXTURE_STORE_PARITY_DUMP": "{file}"}, "", "{file}"),
    ],
    "--fixture-store-env": [
        (("--fixture-store-env", "device:gpu"), {}, "", "--fixture-store-env='device:gpu'"),
        (("--fixture-store-env", ESCAPES), {}, "", "--fixture-store-env"),
        ((), {"FIXTURE_STORE_ENV": f"device:{LONG}"}, "", "FIXTURE_STORE_ENV"),
        ((), {"FIXTURE_STORE_ENV": "dtype:float32,dtype:float64"}, "", "FIXTURE_STORE_ENV"),
    ],
    "--fixture-store-shard": [
        (("--fixture-store-shard", spec), {}, "", "--fixture-store-shard")
        for spec in ("0/0", "²/3", f"1/{LONG}", "a/b", "", f"{ESCAPES}/2", "1/100000000")
    ],
    "--fixture-store-shards": [
        (("--collect-only", "--fixture-store-shards", n), {}, "", "--fixture-store-shards")
        for n in ("0", "²", "100000000", "", LONG, ESCAPES)
    ],
    "--fixture-store-fetch": [
        (("--fixture-store-fetch", "--fixture-store-dir", "{file}"), {}, "", "{file}"),
        (("--fixture-store-fetch", "--fixture-store-shard", "9/3"), {}, "", "shard"),
    ],
    "--fixture-store-attest": [
        (("--fixture-store-attest", "{root}/certs"), {}, "", "no key"),
        (
            ("--fixture-store-attest", "{root}/certs", "--fixture-store-attest-key", "{file}"),
            {},
            "",
            "{file}",
        ),
    ],
    "--fixture-store-attest-key": [
        (
            ("--fixture-store-attest", "{root}/certs", "--fixture-store-attest-key", "{missing}"),
            {},
            "",
            "{missing}",
        ),
        (
            (
                "--fixture-store-attest",
                "{root}/c",
                "--fixture-store-attest-key",
                f"{{root}}/{ESCAPES}",
            ),
            {},
            "",
            "the key",
        ),
        (
            ("--fixture-store-attest", "{root}/certs"),
            {"FIXTURE_STORE_ATTEST_KEY": "{root}/provenance/key.pem"},
            "",
            "{root}/provenance",
        ),
    ],
    "fixture_store_allow_ci_skips": [
        ((), {"CI": "true"}, f"fixture_store_allow_ci_skips = {ESCAPES}", "fixture_store_allow_"),
        ((), {"CI": "true"}, f"fixture_store_allow_ci_skips = {LONG}", "fixture_store_allow_"),
    ],
    "fixture_store_gaps": [
        (("--fixture-store-complete",), {}, f"fixture_store_gaps =\n    x: {LONG}", "gaps"),
    ],
}
OK_CODES = {
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.USAGE_ERROR,
    pytest.ExitCode.NO_TESTS_COLLECTED,
}


def test_every_plugin_option_has_hostile_values() -> None:
    missing = sorted(_registered() - set(HOSTILE))
    assert not missing, (
        f"the plugin registers {missing} but the harness has no hostile values for them: add "
        "entries to HOSTILE in tests/test_pytest_plugin_options.py"
    )
    assert not set(HOSTILE) - _registered(), "HOSTILE names options the plugin does not register"


@pytest.mark.parametrize(
    ("option", "index"),
    [(option, i) for option, cases in sorted(HOSTILE.items()) for i in range(len(cases))],
)
def test_a_hostile_plugin_value_fails_clearly(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, option: str, index: int
) -> None:
    args, env, ini, named = HOSTILE[option][index]
    root = inner.path
    (root / "a-file").write_text("not a folder\n")
    where = {
        "{file}": str(root / "a-file"),
        "{missing}": str(root / "no" / "such"),
        "{root}": str(root),
    }

    def fill(text: str) -> str:
        for key, value in where.items():
            text = text.replace(key, value)
        return text

    for key, value in env.items():
        monkeypatch.setenv(key, fill(value))
    if ini:
        inner.makeini(f"[pytest]\n{ini}\n")
    inner.makepyfile(test_inner=TESTS)
    result = inner.runpytest(*(fill(a) for a in args))
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret in OK_CODES, f"exit {result.ret}:\n{output}"
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    raw = RAW_CONTROL.search(output)
    assert raw is None, f"printed {raw[0]!r} as it is:\n{output!r}"
    assert LONG not in output, "a long value was repeated whole"
    if result.ret == pytest.ExitCode.USAGE_ERROR:
        assert fill(named) in output, f"the refusal does not name {fill(named)}:\n{output}"
    assert os.environ.get("FIXTURE_STORE_REGISTRY") is None
    assert Path(root / "a-file").read_text() == "not a folder\n"
