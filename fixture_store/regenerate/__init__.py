"""Regeneration: rebuild fixtures from pinned upstream generators and compare with the registry.

Generators speak generator protocol 1 (:mod:`fixture_store.regenerate.protocol`): the files they
write are checked against the schemas in ``schemas/``, and the stdlib-only kit in ``kit/`` is put
on their path in the pinned environment.
"""

from fixture_store.regenerate.drift import ArtifactComparison, Verdict
from fixture_store.regenerate.protocol import ProtocolError
from fixture_store.regenerate.run import Report, Restoration, regenerate, restore

__all__ = [
    "ArtifactComparison",
    "ProtocolError",
    "Report",
    "Restoration",
    "Verdict",
    "regenerate",
    "restore",
]
