"""Regeneration: rebuild fixtures from pinned upstream generators and compare with the registry."""

from fixture_store.regenerate.drift import ArtifactComparison, Verdict
from fixture_store.regenerate.run import Report, Restoration, regenerate, restore

__all__ = ["ArtifactComparison", "Report", "Restoration", "Verdict", "regenerate", "restore"]
