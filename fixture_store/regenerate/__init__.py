"""Regeneration: rebuild fixtures from pinned upstream generators and compare with the registry."""

from fixture_store.regenerate.drift import ArtifactComparison, Verdict
from fixture_store.regenerate.run import Report, regenerate

__all__ = ["ArtifactComparison", "Report", "Verdict", "regenerate"]
