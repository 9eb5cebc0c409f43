"""The verified-state cache (``fixture_store.objects.statecache``): what its rows prove."""

from __future__ import annotations

import os
from pathlib import Path

from fixture_store.objects.statecache import VerifiedCache


def test_a_proof_is_the_stat_a_later_check_by_the_same_proof_compares_with(
    tmp_path: Path,
) -> None:
    path = tmp_path / "object"
    path.write_bytes(b"x" * 10)
    st = os.stat(path)
    hexpart, b3 = "ab" * 32, "cd" * 32
    cache = VerifiedCache.open(None)
    assert cache.proof(hexpart, 10) is None and cache.proof(hexpart, 10, b3) is None
    cache.remember(hexpart, st)
    cache.remember(hexpart, st, b3)
    entry = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    assert cache.proof(hexpart, 10) == entry == cache.proof(hexpart, 10, b3)
    assert cache.vouches(hexpart, st) and cache.vouches(hexpart, st, b3)
    # another size, or another BLAKE3, is a check this row does not prove
    assert cache.proof(hexpart, 11) is None and cache.proof(hexpart, 11, b3) is None
    assert cache.proof(hexpart, 10, "ef" * 32) is None
