"""fixture-store: a content-addressed fixture store and provenance registry for ML parity tests.

Every name below but ``__version__`` and ``FixtureStoreError`` loads on first use (``Fixtures``
from :mod:`fixture_store.access`, ``Store``, ``Digest``, ``assert_parity`` and ``ParityError``):
importing the package, or any module of it such as ``fixture_store.cli``, stays light, so that a
warm ``fixture-store verify`` does not pay for the registry and verification machinery it does
not run.
"""

import importlib
from typing import TYPE_CHECKING, Any

from fixture_store._version import __version__
from fixture_store.errors import FixtureStoreError

if TYPE_CHECKING:
    from fixture_store.access import Fixtures
    from fixture_store.objects.digests import Digest
    from fixture_store.objects.store import Store
    from fixture_store.parity.assertion import ParityError, assert_parity

__all__ = [
    "Digest",
    "FixtureStoreError",
    "Fixtures",
    "ParityError",
    "Store",
    "__version__",
    "assert_parity",
]
# Each lazy name and the module it is defined in.
_LAZY = {
    "Digest": "fixture_store.objects.digests",
    "Fixtures": "fixture_store.access",
    "ParityError": "fixture_store.parity.assertion",
    "Store": "fixture_store.objects.store",
    "assert_parity": "fixture_store.parity.assertion",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fixture_store' has no attribute {name!r}")
