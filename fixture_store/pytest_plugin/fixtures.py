"""What a test gets: the ``fixture_store`` session fixture (a verified view), the
parameters of ``fixture_store_cases`` and the checks a marker asks for before a test runs."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fixture_store import errors as errors_mod
from fixture_store.errors import UsageError
from fixture_store.registry import (
    Record,
)
from fixture_store.verify import Result

if TYPE_CHECKING:
    from fixture_store.access import Fixtures
    from fixture_store.parity.assertion import ParityError, ParityReport
    from fixture_store.readers.onnxcase import OnnxCase
    from fixture_store.readers.safetensors import Tensors
    from fixture_store.registry.environment import Environment
    from fixture_store.registry.tolerance import ArrayTolerance
from fixture_store.pytest_plugin.collection import declared
from fixture_store.pytest_plugin.options import path_option
from fixture_store.pytest_plugin.state import REQUIRED_MISSING, PluginState, current, state_of


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

    def inputs(self, name: str) -> dict[str, Any]:
        """The arrays of :meth:`arrays` the record names as ``inputs``, what the test gives the
        model (see :meth:`fixture_store.access.Fixtures.inputs`)."""
        self._state.enforce(name)
        return self.fixtures.inputs(name)

    def assert_parity(
        self,
        name: str,
        actual: Mapping[str, Any] | Any,
        *,
        dump: str | os.PathLike[str] | None = None,
        only: Iterable[str] | None = None,
        environment: Environment | str | None = None,
    ) -> ParityReport:
        """Assert ``actual`` (array name -> array) is at parity with the verified reference
        ``name`` under its record's tolerance, taking what the function takes (see
        :func:`fixture_store.parity.assertion.assert_parity`; ``only`` names the arrays to
        compare, the others not required): ``environment`` is where this comparison runs (an
        :class:`Environment` or its text, ``device:cuda,runtime:torch``), else this session's
        (``--fixture-store-env``); a failing candidate is written under ``dump``, else
        ``--fixture-store-parity-dump``, else $FIXTURE_STORE_PARITY_DUMP."""
        __tracebackhide__ = True
        from fixture_store.parity.assertion import assert_parity
        from fixture_store.parity.environment import resolve

        self._state.enforce(name)
        folder = dump or path_option(self._state.config, "fixture_store_parity_dump")
        where = (
            environment
            if environment is not None
            else resolve(self._state.config.getoption("fixture_store_env"))
        )
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

    def tensor(self, name: str, key: str, *, rows: tuple[int, int] | None = None) -> Any:
        """One tensor of a verified safetensors, NPY or NPZ artifact, or ``rows`` ``[start,
        stop)`` of its first axis (see ``Fixtures.tensor``)."""
        self._state.enforce(name)
        return self.fixtures.tensor(name, key, rows=rows)

    def onnx_case(self, name: str) -> OnnxCase:
        self._state.enforce(name)
        return self.fixtures.onnx_case(name)


@pytest.fixture(scope="session")
def fixture_store(request: pytest.FixtureRequest) -> VerifiedFixtures:
    """A verified view of the store and registry (see the plugin's docstring).

    The registry is read here, at setup: one that does not parse is an error of every test that
    uses the fixture, each reported once with the file, the problem and the fix."""
    state = state_of(request.config)
    state.registry()
    return VerifiedFixtures(state)


def fixture_store_cases(family: str, kind: str | None = None) -> list[Any]:
    """Parameters for ``pytest.mark.parametrize`` over every record of ``family``.

    Each parameter carries the ``fixture_store`` marker, so it is verified before the test runs.
    Reads registry records only.
    """
    state = current()
    if state is None:
        raise UsageError(
            "fixture_store_cases() needs the fixture-store pytest plugin to be "
            "active (it is when fixture-store is installed)"
        )
    return [
        pytest.param(n, id=n.split("/", 1)[1], marks=pytest.mark.fixture_store(n))
        for n in state.names_of(family, kind)
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state_of(item.config).current_test = item.nodeid
    names = list(dict.fromkeys(declared(item)))
    if not names:
        return
    state = state_of(item.config)
    for name in names:
        state.enforce(name, item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    missing = item.stash.get(REQUIRED_MISSING, None)
    if missing:
        pytest.fail("\n".join(missing), pytrace=False)
