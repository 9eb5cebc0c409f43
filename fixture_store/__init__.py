"""fixture-store: a content-addressed fixture store and provenance registry for ML parity tests.

``assert_parity`` and ``ParityError`` (:mod:`fixture_store.parity.assertion`) load on first use,
so importing the package stays light.
"""

from typing import TYPE_CHECKING, Any

from fixture_store._version import __version__
from fixture_store.access import Fixtures
from fixture_store.errors import FixtureStoreError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store

if TYPE_CHECKING:
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
_LAZY = {"assert_parity", "ParityError"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from fixture_store.parity import assertion

        return getattr(assertion, name)
    raise AttributeError(f"module 'fixture_store' has no attribute {name!r}")
