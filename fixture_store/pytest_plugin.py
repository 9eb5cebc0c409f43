"""The pytest plugin (entry point ``pytest11``): verified fixtures for tests.

- ``fixture_store`` (session fixture): a verified view with accessors ``path``, ``tree``,
  ``arrays``, ``tensors``/``tensor`` (safetensors, memory-mapped), ``onnx_case``, ``record`` and
  ``check``; bytes come out only after verification.
  ``fixture_store.assert_parity(name, {"cls_token": out, ...})`` compares outputs with a verified
  NPY/NPZ reference under its record's tolerance (a failure names the worst array and element);
  ``--fixture-store-parity-dump DIR`` writes a failing candidate beside a copy of its reference;
  ``--fixture-store-attest DIR`` (with ``--fixture-store-attest-key``) signs a parity certificate
  for every assertion (:mod:`fixture_store.attest`).
- ``@pytest.mark.fixture_store("name", ..., family="F", kind="K", argname="artifact")``: the
  artifacts a test needs, verified before it runs. With ``family=`` the test is parametrized over
  every record of the family (``argname`` receives the name). ``fixture_store_cases("F")`` gives
  the same parameters for ``pytest.mark.parametrize``. Collection reads registry records only,
  never object bytes.
- Refusals: a digest mismatch, an invalid record, unsafe content, a name without a record or a
  registry that does not parse is an **error** (one line and its fix), in a marker or in the test
  body (an accessor, ``assert_parity``); outputs not at parity are a **failure**; a missing
  object is a **skip** naming the fetch command, or a **failure** under
  ``--fixture-store-require`` or ``FIXTURE_STORE_REQUIRE=1`` (exactly ``1``; ``0`` or empty mean
  off, any other value is a usage error); a declared gap is an **xfail** with its reason.
- ``--fixture-store-complete``: adds a check that every registry family is consumed by a
  collected test or declared a gap (every record a ``gap``, or the family listed in the ini option
  ``fixture_store_gaps``), and that no gap is stale: a gap record whose object is in the store, or
  an ini gap for a family a collected test now consumes; and that every file in a folder of the
  project's local sources is named by a record (no orphans).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fixture_store import errors as errors_mod
from fixture_store import registry as registry_mod
from fixture_store.display import text as shown
from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry import (
    Record,
    Registry,
    family_of,
)
from fixture_store.registry import project as project_mod
from fixture_store.sources.local import orphans
from fixture_store.verify import Result, Status, present

if TYPE_CHECKING:
    from fixture_store.access import Fixtures
    from fixture_store.parity.assertion import ParityError, ParityReport
    from fixture_store.readers.onnxcase import OnnxCase
    from fixture_store.readers.safetensors import Tensors
    from fixture_store.registry.tolerance import ArrayTolerance

REQUIRE_ENV = "FIXTURE_STORE_REQUIRE"
REQUIRE_VALUES = {"1": True, "0": False, "": False}
MARKER = "fixture_store"
_STATE_KEY = pytest.StashKey["PluginState"]()
_REQUIRED_MISSING = pytest.StashKey[list[str]]()
# The state of the running session, for fixture_store_cases() used at import time.
_current: PluginState | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fixture-store", "verified fixtures (fixture-store)")
    group.addoption(
        "--fixture-store-dir",
        metavar="DIR",
        default=None,
        help="Object store (default: $FIXTURE_STORE_DIR, else the per-user cache).",
    )
    group.addoption(
        "--fixture-store-registry",
        metavar="DIR",
        default=None,
        help="Project folder holding provenance/ (default: "
        "$FIXTURE_STORE_REGISTRY, else the rootdir's provenance/).",
    )
    group.addoption(
        "--fixture-store-require",
        action="store_true",
        default=False,
        help="A missing object fails the test instead of skipping it (also "
        f"{REQUIRE_ENV}=1; 0 or empty mean off, other values are refused).",
    )
    group.addoption(
        "--fixture-store-complete",
        action="store_true",
        default=False,
        help="Check that every registry family is consumed by a collected test or "
        "declared a gap, and that no gap is stale.",
    )
    group.addoption(
        "--fixture-store-parity-dump",
        metavar="DIR",
        default=None,
        help="Write a failing parity assertion's candidate (and a copy of its reference) "
        "under DIR, outside the store (also $FIXTURE_STORE_PARITY_DUMP).",
    )
    group.addoption(
        "--fixture-store-env",
        metavar="FACTS",
        default=None,
        help="Where parity assertions run, as conditions (device:cuda,dtype:bfloat16; also "
        "$FIXTURE_STORE_ENV), over what the frameworks already imported say.",
    )
    group.addoption(
        "--fixture-store-attest",
        metavar="DIR",
        default=None,
        help="Write a signed parity certificate (and the outputs it is about) under DIR for "
        "every parity assertion, passing or failing (fixture-store verify-attestation checks "
        "it); needs --fixture-store-attest-key.",
    )
    group.addoption(
        "--fixture-store-attest-key",
        metavar="PEM",
        default=None,
        help="The private key the certificates are signed with (also "
        "$FIXTURE_STORE_ATTEST_KEY); never one inside the store or the registry.",
    )
    group.addoption(
        "--fixture-store-shard",
        metavar="I/N",
        default=None,
        type=Shard.parse,
        help="Run only shard I of N (1 <= I <= N): each test belongs to one shard, decided "
        "by its node id alone, so adding tests never moves the others.",
    )
    group.addoption(
        "--fixture-store-shards",
        metavar="N",
        default=None,
        type=shard_count,
        help="Print how the collected tests split into N shards (tests and artifacts per "
        f"shard, 1 <= N <= {MAX_SHARDS}) and fail unless every test falls in exactly one; use "
        "with --collect-only.",
    )
    group.addoption(
        "--fixture-store-fetch",
        action="store_true",
        default=False,
        help="Before the tests run, fetch exactly the artifacts the selected tests (after "
        "-k, -m and --fixture-store-shard) name, from their pinned sources.",
    )
    parser.addini(
        "fixture_store_gaps",
        type="linelist",
        default=[],
        help="Families declared as gaps, one 'family: reason' per line.",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _current  # noqa: PLW0603 - fixture_store_cases() runs at import time, before any fixture
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*names, family=None, kind=None, argname='artifact'): artifacts the test "
        "needs, verified before it runs; family= parametrizes over a registry family.",
    )
    state = PluginState(config)
    config.stash[_STATE_KEY] = state
    config.pluginmanager.register(ShardHooks(), "fixture-store-shards")
    _current = state


def pytest_sessionstart(session: pytest.Session) -> None:
    # Here rather than at configure time, so that ``pytest --help`` still works.
    require_from_env()
    from fixture_store.parity import environment

    try:
        environment.check(session.config.getoption("fixture_store_env"))
    except UsageError as e:
        raise pytest.UsageError(f"{e.message}: {e.fix}") from None
    if session.config.getoption("fixture_store_attest") is not None:
        _state(session.config).attest_key()


def require_from_env() -> bool:
    """``$FIXTURE_STORE_REQUIRE`` as a bool; a value that is neither 1, 0 nor empty is refused,
    since a CI job that sets ``true`` means require mode and would silently not get it."""
    value = os.environ.get(REQUIRE_ENV, "")
    if value not in REQUIRE_VALUES:
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={_shown(value)} is not one of the allowed values: "
            "'1' (a missing object fails the test), '0' or empty (it skips); "
            f"set {REQUIRE_ENV}=1 for require mode, or unset it"
        )
    return REQUIRE_VALUES[value]


def pytest_unconfigure(config: pytest.Config) -> None:
    global _current  # noqa: PLW0603 - see pytest_configure
    state = config.stash.get(_STATE_KEY, None)
    if state is not None and state._fixtures is not None:
        state._fixtures.close()
    if _current is config.stash.get(_STATE_KEY, None):
        _current = None


@dataclass
class PluginState:
    """Store and registry of one session, loaded on first use (a project without them pays
    nothing)."""

    config: pytest.Config
    _registry: Registry | None = None
    _fixtures: Fixtures | None = None
    current_test: str | None = None
    _certificates: set[str] = field(default_factory=set)

    @property
    def require(self) -> bool:
        return bool(self.config.getoption("fixture_store_require")) or require_from_env()

    def store(self) -> Store:
        return Store.at(self.config.getoption("fixture_store_dir"))

    def registry(self) -> Registry:
        if self._registry is None:
            flag = self.config.getoption("fixture_store_registry")
            if flag:
                self._registry = registry_mod.load(flag)
            elif os.environ.get(registry_mod.files.ENV_VAR):
                self._registry = registry_mod.load()
            elif (self.config.rootpath / registry_mod.files.DIRNAME).is_dir():
                self._registry = registry_mod.load(self.config.rootpath)
            else:
                self._registry = registry_mod.load(registry_mod.find_root(self.config.rootpath))
        return self._registry

    def fixtures(self) -> Fixtures:
        if self._fixtures is None:
            from fixture_store.access import Fixtures

            self._fixtures = Fixtures(self.store(), self.registry(), batch_cache_writes=True)
        return self._fixtures

    def names_of(self, family: str, kind: str | None = None) -> list[str]:
        """Record names of a family, from the registry text only (no object is touched)."""
        registry = self.registry()
        if family not in registry.families:
            raise UsageError(
                f"no family {family!r} in {registry.directory}",
                fix=f"one of: {', '.join(sorted(registry.families)) or '(none yet)'}",
            )
        fam = registry.families[family]
        names = sorted((*fam.records, *fam.invalid))
        if kind is not None:
            names = [n for n in names if n in fam.invalid or fam.records[n].kind == kind]
        return names

    def enforce(self, name: str, item: pytest.Item | None = None) -> Result:
        """Verify ``name`` and apply the refusal semantics; returns the verified result.

        In require mode a missing object must be a test *failure*, not a setup error, so when
        checked at setup it is remembered on ``item`` and raised when the test would run.
        """
        result = self.fixtures().check(name)
        if result.ok:
            return result
        if result.status is Status.GAP:
            pytest.xfail(shown(f"{name}: declared gap: {result.message}", keep="\n"))
        if result.status is Status.MISSING:
            how = f"{result.message}; fetch it: {result.fix}"
            if self.require:
                message = shown(
                    f"{name}: missing object (required by --fixture-store-require or "
                    f"{REQUIRE_ENV}=1): {how}",
                    keep="\n",
                )
                if item is None:
                    pytest.fail(message, pytrace=False)
                item.stash.setdefault(_REQUIRED_MISSING, []).append(message)
                return result
            pytest.skip(shown(f"{name}: missing object: {how}", keep="\n"))
        raise result.error()

    def attest_key(self) -> Path:
        """The private key certificates are signed with, checked once at session start: a
        missing, misplaced or unreadable key (or a missing ``attest`` extra) is a usage error
        before any test runs, not a failure in each."""
        from fixture_store import attest as attest_mod

        try:
            key = attest_mod.key_path(
                self.config.getoption("fixture_store_attest_key"),
                forbidden=(self.store().root, self.registry().directory),
                option="--fixture-store-attest-key",
            )
            attest_mod.signer(key)
        except FixtureStoreError as e:
            raise pytest.UsageError(f"--fixture-store-attest: {e}") from None
        return key

    def attest(self, name: str, actual: Mapping[str, Any] | Any, report: ParityReport) -> None:
        """Sign the certificate of one parity assertion under ``--fixture-store-attest``: its
        subject the outputs compared (written beside it as an NPZ), its predicate the report."""
        from fixture_store import attest as attest_mod

        folder = Path(self.config.getoption("fixture_store_attest"))
        store, registry = self.store(), self.registry()
        key = self.attest_key()
        keys = [c.name for c in report.comparisons] + list(report.missing)
        arrays = dict(actual) if isinstance(actual, Mapping) else {keys[0]: actual}
        test = self.current_test or "parity"
        stem = base = attest_mod.file_stem(test, name)
        n = 1
        while stem in self._certificates:  # a test asserting the same reference twice
            n += 1
            stem = f"{base}-{n}"
        self._certificates.add(stem)
        data = attest_mod.outputs_npz(arrays)
        subject = attest_mod.Subject(f"{stem}.outputs.npz", digests.of_bytes(data))
        doc = attest_mod.statement(
            [subject],
            [registry.get(name)],
            [c.to_json() for c in report.comparisons],
            ok=report.ok,
            missing=report.missing,
            extra=report.extra,
            test=test,
        )
        envelope = attest_mod.dumps(attest_mod.sign(doc, key))
        files = {f"{stem}.outputs.npz": data, f"{stem}.intoto.json": envelope}
        attest_mod.write_files(folder, files, store=store.root)


def _state(config: pytest.Config) -> PluginState:
    return config.stash[_STATE_KEY]


class VerifiedFixtures:
    """What the ``fixture_store`` fixture gives a test: accessors that verify first.

    Each accessor applies the plugin's refusal semantics (skip/fail on a missing object, xfail
    on a gap, an exception otherwise) before returning anything.
    """

    # The exceptions a test may catch or expect, reachable through the fixture (its name hides
    # the package's): ``pytest.raises(fixture_store.DigestMismatchError)``.
    FixtureStoreError = errors_mod.FixtureStoreError
    ArtifactError = errors_mod.ArtifactError
    UnknownArtifactError = errors_mod.UnknownArtifactError
    MissingObjectError = errors_mod.MissingObjectError
    DigestMismatchError = errors_mod.DigestMismatchError
    InvalidRecordError = errors_mod.InvalidRecordError
    GapError = errors_mod.GapError
    UnsafeContentError = errors_mod.UnsafeContentError
    RegistryError = errors_mod.RegistryError
    UsageError = errors_mod.UsageError

    def __init__(self, state: PluginState) -> None:
        self._state = state

    @property
    def ParityError(self) -> type[ParityError]:
        """:class:`~fixture_store.parity.assertion.ParityError`, what a parity failure raises (an
        ``AssertionError``): ``pytest.raises(fixture_store.ParityError)``."""
        from fixture_store.parity.assertion import ParityError

        return ParityError

    @property
    def fixtures(self) -> Fixtures:
        return self._state.fixtures()

    def record(self, name: str) -> Record:
        """The record of ``name`` as the registry holds it (no bytes are read or verified):
        ``.digest``, ``.size``, ``.arrays``, ``.metadata``, ``.tolerance``
        (:class:`~fixture_store.registry.tolerance.Tolerance`, as written) and the rest of
        :class:`~fixture_store.registry.records.Record`."""
        return self._state.registry().get(name)

    def tolerance(self, name: str, array: str | None = None) -> ArrayTolerance:
        """The tolerance ``assert_parity`` judges array ``array`` of ``name`` by in this
        session's environment (``None``: the record's default), resolved over the record's
        default and the built-in defaults: an
        :class:`~fixture_store.registry.tolerance.ArrayTolerance` with ``.metric``, ``.atol``
        and ``.rtol`` (``allclose``), ``.bound`` (the JSON ``max`` of ``mean_abs``, ``max_abs``
        and ``ulp``), ``.dtype``, ``.shape`` and ``.describe()`` (``mean_abs <= 0.0005``)."""
        from fixture_store.parity.environment import resolve
        from fixture_store.registry.tolerance import Tolerance

        written = self.record(name).tolerance or Tolerance()
        where = resolve(self._state.config.getoption("fixture_store_env"))
        return written.in_environment(where).for_array(*(() if array is None else (array,)))

    def check(self, name: str) -> Result:
        return self.fixtures.check(name)

    def names(self, family: str, kind: str | None = None) -> list[str]:
        return self._state.names_of(family, kind)

    def path(self, name: str) -> Path:
        self._state.enforce(name)
        return self.fixtures.path(name)

    def read_bytes(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def tree(self, name: str) -> Path:
        """The checkout of a verified tree: exactly its manifest (see :meth:`tree_files`)."""
        self._state.enforce(name)
        return self.fixtures.tree(name)

    def tree_files(self, name: str) -> dict[str, Path]:
        """A verified tree's members as member path -> file, from its manifest."""
        self._state.enforce(name)
        return self.fixtures.tree_files(name)

    def arrays(self, name: str) -> dict[str, Any]:
        """The arrays of a verified ``.npy``/``.npz`` artifact, read by the safe readers and
        checked against the record's ``arrays`` manifest (see
        :meth:`fixture_store.access.Fixtures.arrays`)."""
        self._state.enforce(name)
        return self.fixtures.arrays(name)

    def assert_parity(
        self,
        name: str,
        actual: Mapping[str, Any] | Any,
        *,
        dump: str | None = None,
        only: Iterable[str] | None = None,
    ) -> ParityReport:
        """Assert ``actual`` (array name -> array) is at parity with the verified reference
        ``name`` under its record's tolerance in this session's environment (see
        :func:`fixture_store.parity.assertion.assert_parity`; ``only`` names the arrays to
        compare, the others not required); a failing candidate is written under ``dump``, else
        ``--fixture-store-parity-dump``, else $FIXTURE_STORE_PARITY_DUMP."""
        __tracebackhide__ = True
        from fixture_store.parity.assertion import assert_parity
        from fixture_store.parity.environment import resolve

        self._state.enforce(name)
        folder = dump or self._state.config.getoption("fixture_store_parity_dump")
        where = resolve(self._state.config.getoption("fixture_store_env"))
        how: dict[str, Any] = {
            "fixtures": self.fixtures,
            "dump": folder,
            "only": only,
            "environment": where,
        }
        if self._state.config.getoption("fixture_store_attest") is None:
            return assert_parity(name, actual, **how)
        from fixture_store.parity.assertion import ParityError

        try:
            report = assert_parity(name, actual, **how)
        except ParityError as e:
            self._state.attest(name, actual, e.report)
            raise
        self._state.attest(name, actual, report)
        return report

    def tensors(self, name: str) -> Tensors:
        """The tensors of a verified safetensors artifact, memory-mapped read-only and mapped
        one at a time when asked for (see ``Fixtures.tensors``)."""
        self._state.enforce(name)
        return self.fixtures.tensors(name)

    def tensor(self, name: str, key: str) -> Any:
        """One tensor of a verified safetensors artifact."""
        self._state.enforce(name)
        return self.fixtures.tensor(name, key)

    def onnx_case(self, name: str) -> OnnxCase:
        self._state.enforce(name)
        return self.fixtures.onnx_case(name)


@pytest.fixture(scope="session")
def fixture_store(request: pytest.FixtureRequest) -> VerifiedFixtures:
    """A verified view of the store and registry (see the plugin's docstring).

    The registry is read here, at setup: one that does not parse is an error of every test that
    uses the fixture, each reported once with the file, the problem and the fix."""
    state = _state(request.config)
    state.registry()
    return VerifiedFixtures(state)


def fixture_store_cases(family: str, kind: str | None = None) -> list[Any]:
    """Parameters for ``pytest.mark.parametrize`` over every record of ``family``.

    Each parameter carries the ``fixture_store`` marker, so it is verified before the test runs.
    Reads registry records only.
    """
    if _current is None:
        raise UsageError(
            "fixture_store_cases() needs the fixture-store pytest plugin to be "
            "active (it is when fixture-store is installed)"
        )
    return [
        pytest.param(n, id=n.split("/", 1)[1], marks=pytest.mark.fixture_store(n))
        for n in _current.names_of(family, kind)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for mark in metafunc.definition.iter_markers(MARKER):
        family = mark.kwargs.get("family")
        if family is None:
            continue
        argname = mark.kwargs.get("argname", "artifact")
        if argname not in metafunc.fixturenames:
            raise UsageError(
                f"{metafunc.definition.nodeid}: @pytest.mark.fixture_store(family={family!r}) "
                f"parametrizes the argument {argname!r}, which the test does not take",
                fix=f"add a parameter named {argname!r} or pass argname=...",
            )
        names = _state(metafunc.config).names_of(family, mark.kwargs.get("kind"))
        metafunc.parametrize(argname, names, ids=[n.split("/", 1)[1] for n in names])


def _declared(item: pytest.Item) -> Iterator[str]:
    callspec = getattr(item, "callspec", None)
    for mark in item.iter_markers(MARKER):
        yield from mark.args
        if mark.kwargs.get("family") is not None and callspec is not None:
            value = callspec.params.get(mark.kwargs.get("argname", "artifact"))
            if isinstance(value, str):
                yield value


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _state(item.config).current_test = item.nodeid
    names = list(dict.fromkeys(_declared(item)))
    if not names:
        return
    state = _state(item.config)
    for name in names:
        state.enforce(name, item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    missing = item.stash.get(_REQUIRED_MISSING, None)
    if missing:
        pytest.fail("\n".join(missing), pytrace=False)


# -- completeness -------------------------------------------------------------------------------
def consumed_families(items: list[pytest.Item]) -> set[str]:
    families: set[str] = set()
    for item in items:
        for mark in item.iter_markers(MARKER):
            families.update(family_of(n) for n in mark.args if isinstance(n, str))
            if mark.kwargs.get("family"):
                families.add(mark.kwargs["family"])
    return families


def parse_gaps(lines: list[str]) -> dict[str, str]:
    """The ini option ``fixture_store_gaps``: one ``family: reason`` per line.

    A malformed line is a pytest usage error (exit code 4) naming the line, not an INTERNALERROR.
    """
    gaps = {}
    for line in lines:
        family, sep, reason = line.partition(":")
        if not sep or not family.strip() or not reason.strip():
            raise pytest.UsageError(
                f"ini option fixture_store_gaps: the line {line!r} is not 'family: reason'; "
                "every declared gap needs its reason, e.g. 'video: no clips licensed yet'"
            )
        gaps[family.strip()] = reason.strip()
    return gaps


def completeness_problems(
    registry: Registry, store: Store, consumed: set[str], declared_gaps: Mapping[str, str]
) -> list[str]:
    """Families nobody consumes, stale gaps, and orphans (files in a folder of local sources
    that no record names, see :func:`fixture_store.sources.local.orphans`). Looks at presence
    only, never reads bytes."""
    problems = []
    for family, fam in sorted(registry.families.items()):
        records = list(fam.records.values())
        for r in records:
            if r.is_gap and r.digest is not None and present(store, r):
                problems.append(
                    f"{r.name}: declared gap ({r.gap}) but its object is in the store; "
                    "remove the gap from the record in "
                    f"{fam.file_of(r.name).relative_to(registry.root)}"
                )
        if not records and not fam.invalid:
            continue  # nothing to consume (e.g. a file holding only known failures)
        all_gaps = all(r.is_gap for r in records) and not fam.invalid
        if family in declared_gaps and family in consumed:
            problems.append(
                f"family {family!r}: declared a gap in fixture_store_gaps "
                f"({declared_gaps[family]}) but a collected test now consumes it; remove "
                "the gap"
            )
        elif family not in consumed and family not in declared_gaps and not all_gaps:
            problems.append(
                f"family {family!r}: no collected test consumes it; mark a test with "
                f"@pytest.mark.fixture_store(family={family!r}) or declare it in the ini "
                "option fixture_store_gaps"
            )
    ignore = project_mod.orphans_ignored(registry.root)
    problems.extend(
        f"{o.path}: in {o.folder}/, a folder of local sources, but no record names it; {o.fix}"
        for o in orphans(registry.root, registry.records(), ignore)
    )
    return problems


class CompletenessItem(pytest.Item):
    """A synthetic test that fails when the registry and the test suite disagree."""

    def __init__(self, *, problems: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems

    def runtest(self) -> None:
        if self.problems:
            raise CompletenessError(self.problems)

    # pytest's signature; the completeness report has one style.
    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # noqa: ARG002
        if isinstance(excinfo.value, CompletenessError):
            return "fixture-store completeness:\n" + "\n".join(
                f"  - {shown(p)}" for p in excinfo.value.problems
            )
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, "fixture-store completeness"


class CompletenessError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("fixture_store_complete"):
        return
    state = _state(config)
    problems = completeness_problems(
        state.registry(),
        state.store(),
        consumed_families(items),
        parse_gaps(config.getini("fixture_store_gaps")),
    )
    items.append(
        CompletenessItem.from_parent(session, name="fixture-store-completeness", problems=problems)
    )


# A report's user property naming the class of the refusal it ended with (kept by xdist, which
# sends a report's user properties from a worker to the controller).
REFUSED = "fixture_store_refused"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    call: pytest.CallInfo[Any],
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep refusals readable: one line of the error's message and fix, no library traceback,
    and marked so that :func:`pytest_report_teststatus` reports it as an error wherever it was
    raised (at setup, or in the test body by an accessor or ``assert_parity``)."""
    report = yield
    exc = call.excinfo.value if call.excinfo else None
    if isinstance(exc, FixtureStoreError) and report.failed:
        report.longrepr = f"fixture-store refused: {exc}"
        report.user_properties.append((REFUSED, type(exc).__name__))
    return report


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A refusal in the test body is an **error** like one at setup (the data could not be
    used), never a **failure**: failures are the test's own assertions, a parity failure among
    them (:class:`~fixture_store.parity.assertion.ParityError`)."""
    if (
        report.when == "call"
        and report.failed
        and any(k == REFUSED for k, _ in report.user_properties)
    ):
        return "error", "E", "ERROR"
    return None


# -- shards and shard-aware fetch -----------------------------------------------------------------
# The most shards a suite may be split into: far above any CI matrix (GitHub Actions runs at most
# 256 jobs of one matrix, GitLab 200 of one parallel job), low enough that the shard report's one
# line per shard stays readable and its work stays that of the collection.
MAX_SHARDS = 1024
_DIGITS = re.compile(r"[0-9]{1,12}")  # ASCII digits: int() would take '²' or 5,000 of them badly
_SHOWN = 40  # a refused value longer than this is described, not repeated


def shard_count(text: str, *, option: str = "--fixture-store-shards") -> int:
    """N of ``--fixture-store-shards N`` or of ``--fixture-store-shard I/N``: 1 to MAX_SHARDS,
    refused as a usage error naming the option otherwise."""
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_SHARDS:
        raise pytest.UsageError(
            f"{option}: N {_shown(text)} is not a whole number from 1 to {MAX_SHARDS} (the "
            "number of shards the suite is split into, e.g. the size of the CI matrix)"
        )
    return int(text)


def _shown(text: str) -> str:
    """An option's refused value: quoted if short, else described (never repeated at length)."""
    return repr(text) if len(text) <= _SHOWN else f"(a value of {len(text)} characters)"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based), as ``--fixture-store-shard I/N`` writes it."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, sep, count = text.partition("/")
        if not (sep and _DIGITS.fullmatch(index) and _DIGITS.fullmatch(count)):
            raise pytest.UsageError(f"--fixture-store-shard {_shown(text)} is not I/N (e.g. 2/4)")
        shard = cls(int(index), shard_count(count, option="--fixture-store-shard"))
        if not 1 <= shard.index <= shard.count:
            raise pytest.UsageError(
                f"--fixture-store-shard {text}: I must be between 1 and N ({shard.count})"
            )
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, item: pytest.Item) -> bool:
        return shard_of(item.nodeid, self.count) == self.index


def shard_of(nodeid: str, count: int) -> int:
    """The shard (1..count) of a test: a hash of its node id alone, the same in every process
    and on every machine, unmoved when other tests are added or removed."""
    digest = hashlib.sha256(nodeid.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def consumed_names(items: list[pytest.Item]) -> list[str]:
    """The artifacts ``items`` name in their markers (parametrized families resolved), in order."""
    return list(dict.fromkeys(name for item in items for name in _declared(item)))


class ShardHooks:
    """Hooks that must see the selection -k and -m leave: registered beside the module's own
    hooks (whose completeness check sees the whole collection first)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        shard: Shard | None = config.getoption("fixture_store_shard")
        if shard is None:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            # the completeness check looks at the whole suite: it runs in every shard
            held = isinstance(item, CompletenessItem) or shard.holds(item)
            (keep if held else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = session.config
        count = config.getoption("fixture_store_shards")
        if count is not None:
            _report_shards(session, count)
        if config.getoption("fixture_store_fetch"):
            try:
                _fetch_selected(session)
            except FixtureStoreError as e:  # a store or registry it cannot use: no INTERNALERROR
                raise pytest.UsageError(f"--fixture-store-fetch: {e}") from e


def shard_table(items: list[pytest.Item], count: int) -> list[tuple[int, int, int]]:
    """(shard, tests, artifacts) for each of ``count`` shards; raises if a test is in none or
    in several (the check a CI matrix relies on). Each test is placed once, by its own shard,
    and that shard is asked whether it holds it (what ``--fixture-store-shard`` asks): the work
    is the collection's, whatever ``count``."""
    count = shard_count(str(count))
    tests = [i for i in items if not isinstance(i, CompletenessItem)]
    shards = {k: Shard(k, count) for k in range(1, count + 1)}
    mine: dict[int, list[pytest.Item]] = {k: [] for k in shards}
    wrong: dict[str, int] = {}
    for item in tests:
        index = shard_of(item.nodeid, count)
        if index in shards and shards[index].holds(item):
            mine[index].append(item)
        else:
            wrong[item.nodeid] = index
    if wrong:
        raise pytest.UsageError(f"tests not in exactly one of {count} shards: {wrong}")
    return [(k, len(held), len(consumed_names(held))) for k, held in mine.items()]


def _report_shards(session: pytest.Session, count: int) -> None:
    rows = shard_table(list(session.items), count)
    writer = session.config.get_terminal_writer()
    writer.line(f"fixture-store shards: {sum(r[1] for r in rows)} tests in {count} shards")
    for index, tests, artifacts in rows:
        writer.line(f"  shard {index}/{count}: {tests} tests, {artifacts} artifacts")


def _fetch_selected(session: pytest.Session) -> None:
    """Fetch what the selected tests consume; under xdist each worker fetches its own items
    (fetches are idempotent and safe to run at once)."""
    from fixture_store.fetch import fetch_names  # only when asked

    state = _state(session.config)
    registry = state.registry()
    known = set(registry.names())
    names = [n for n in consumed_names(list(session.items)) if n in known]
    report = fetch_names(state.store(), registry, names)
    failed = [r for r in report.results if not r.ok]
    writer = session.config.get_terminal_writer()
    writer.line(
        f"fixture-store fetch: {len(names)} artifacts the selected tests use; "
        f"downloaded {report.downloaded_bytes:,} bytes in {report.downloads} downloads"
        + (f"; {len(failed)} failed" if failed else "")
    )
    for r in failed:
        text = f"  {r.name}: {r.message}" + (f"  (fix: {r.fix})" if r.fix else "")
        writer.line(shown(text, keep="\n"))
