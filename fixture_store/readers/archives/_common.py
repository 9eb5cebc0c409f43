"""What every archive module shares: the formats, the refusal, the read size, the ratio floor."""

from __future__ import annotations

from typing import Literal

from fixture_store.errors import UnsafeArchiveError
from fixture_store.limits import MiB

Format = Literal["tar", "tar.lz4", "tar.zst", "zip"]
# Small archives compress well (a block of zeros): only judge the ratio past this many bytes.
RATIO_FLOOR = 1 * MiB
# Raw reads, decoded batches and member chunks are this size.
RAW_CHUNK = 64 * 1024
_FIX = "re-fetch the archive from its pinned source; if the source itself is hostile, report it"


def fail(artifact: str, rule: str, message: str) -> UnsafeArchiveError:
    """The refusal of an archive that breaks ``rule``."""
    return UnsafeArchiveError(artifact, rule, message, fix=_FIX)
