"""fixture-store: a content-addressed fixture store and provenance registry for ML parity tests."""

from fixture_store._version import __version__
from fixture_store.access import Fixtures
from fixture_store.errors import FixtureStoreError
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store

__all__ = ["Digest", "FixtureStoreError", "Fixtures", "Store", "__version__"]
