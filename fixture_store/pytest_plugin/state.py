"""One session's store and registry, loaded on first use, and the refusal semantics of a
verified artifact (:meth:`PluginState.enforce`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fixture_store import registry as registry_mod
from fixture_store.display import text as shown
from fixture_store.errors import FixtureStoreError, UsageError
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.registry import Registry, files
from fixture_store.verify import Result, Status

if TYPE_CHECKING:
    from fixture_store.access import Fixtures
    from fixture_store.parity.assertion import ParityReport
from fixture_store.pytest_plugin.options import (
    ALLOW_CI_SKIPS,
    CI_ENV,
    REQUIRE_ENV,
    allow_ci_skips,
    in_ci,
    invocation_dir,
    path_option,
    require_from_env,
)

MARKER = "fixture_store"
STATE_KEY = pytest.StashKey["PluginState"]()
REQUIRED_MISSING = pytest.StashKey[list[str]]()
# The state of the running session, for fixture_store_cases() used at import time.
_current: PluginState | None = None


@dataclass
class PluginState:
    """Store and registry of one session, loaded on first use (a project without them pays
    nothing)."""

    config: pytest.Config
    _registry: Registry | None = None
    # Each family collection parametrized over: its names (sorted) and each one's kind (None for
    # an invalid record), not its records (a heap holding 10^5 records made every pass of the
    # cyclic collector over pytest's items cost as much again as the items themselves).
    _kinds: dict[str, dict[str, str | None] | None] = field(default_factory=dict)
    _fixtures: Fixtures | None = None
    current_test: str | None = None
    _certificates: set[str] = field(default_factory=set)
    # The fixtures each test found missing (name, the command that repairs it), by node id,
    # until its report carries them (see reporting.py).
    missing: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @property
    def require(self) -> bool:
        return bool(self.config.getoption("fixture_store_require")) or require_from_env()

    @property
    def fails_in_ci(self) -> bool:
        """Whether a missing fixture fails the test because this is a CI run that did not
        opt out: a skip there would let the run pass having tested nothing."""
        return in_ci() and not allow_ci_skips(self.config)

    def _why_not_skipped(self) -> str | None:
        if self.require:
            return f"required by --fixture-store-require or {REQUIRE_ENV}=1"
        if self.fails_in_ci:
            return (
                f"{CI_ENV}=true: a skip would let the run pass having tested nothing; "
                f"'{ALLOW_CI_SKIPS} = true' in the pytest configuration lets it skip"
            )
        return None

    def store(self) -> Store:
        return Store.at(path_option(self.config, "fixture_store_dir"))

    def root(self) -> Path:
        """The project whose registry the session uses: ``--fixture-store-registry``, else
        ``$FIXTURE_STORE_REGISTRY``, else the folder pytest was started in or its nearest parent
        with ``provenance/``, as the CLI finds it. Never pytest's rootdir: pytest guesses that
        from the arguments, and a path given as an option's value (a key outside the project)
        moves it."""
        flag = path_option(self.config, "fixture_store_registry")
        if flag is not None:
            return registry_mod.project_root(flag)
        if os.environ.get(registry_mod.files.ENV_VAR):
            return registry_mod.project_root()
        try:
            return registry_mod.find_root(invocation_dir(self.config))
        except UsageError as e:
            raise UsageError(
                e.message,
                fix="run pytest in your project (the folder holding provenance/, or below it), "
                "or pass --fixture-store-registry DIR (or set FIXTURE_STORE_REGISTRY); "
                "'fixture-store init' makes one",
            ) from None

    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = registry_mod.load(self.root())
        return self._registry

    def kinds(self, family: str) -> dict[str, str | None]:
        """One family's record names, sorted, each with its kind (``None``: an invalid record),
        from the registry if it is loaded, else its files read alone (collection reads only the
        families its tests parametrize over, and keeps their names, not their records)."""
        if self._registry is not None:
            fam = self._registry.families.get(family)
            found = None if fam is None else fam.kinds()
        elif family in self._kinds:
            found = self._kinds[family]
        else:
            # the family's file and shards read alone; its names and kinds kept, not the file
            alone = files.load_family(self.root(), family)
            found = self._kinds[family] = None if alone is None else alone.kinds()
        if found is None:
            reg = self._registry
            every = sorted(reg.families) if reg else files.family_names(self.root())
            raise UsageError(
                f"no family {family!r} in {self.root() / registry_mod.files.DIRNAME}",
                fix=f"one of: {', '.join(every) or '(none yet)'}",
            )
        return found

    def fixtures(self) -> Fixtures:
        if self._fixtures is None:
            from fixture_store.access import Fixtures

            self._fixtures = Fixtures(self.store(), self.registry(), batch_cache_writes=True)
        return self._fixtures

    def names_of(self, family: str, kind: str | None = None) -> list[str]:
        """Record names of a family, from the registry text only (no object is touched)."""
        kinds = self.kinds(family)
        if kind is None:
            return list(kinds)
        return [n for n, k in kinds.items() if k is None or k == kind]

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
            test = item.nodeid if item is not None else self.current_test
            if test is not None:
                self.missing.setdefault(test, []).append((name, result.fix or ""))
            failing = self._why_not_skipped()
            if failing is not None:
                message = shown(f"{name}: missing object ({failing}): {how}", keep="\n")
                if item is None:
                    pytest.fail(message, pytrace=False)
                item.stash.setdefault(REQUIRED_MISSING, []).append(message)
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
                path_option(self.config, "fixture_store_attest_key"),
                forbidden=(self.store().root, self.root() / registry_mod.files.DIRNAME),
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

        folder = path_option(self.config, "fixture_store_attest")
        assert folder is not None  # called only under --fixture-store-attest
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


def state_of(config: pytest.Config) -> PluginState:
    return config.stash[STATE_KEY]


def current() -> PluginState | None:
    """The running session's state, for ``fixture_store_cases()`` at import time."""
    return _current


def set_current(state: PluginState | None) -> None:
    global _current  # noqa: PLW0603 - fixture_store_cases() runs at import time, before any fixture
    _current = state
