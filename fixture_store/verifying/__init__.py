"""The parts of verification (see :mod:`fixture_store.verify`, the one door): the result values,
the hashing pools, the per-object :class:`~fixture_store.verifying.verifier.Verifier` and the
per-record assembly of a result."""
