"""Bounded decoding: concatenated lz4 and zstd frames read as one stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_store.limits import DEFAULT
from fixture_store.readers import archives
from tests.support.archive_corpus import SUFFIX
from tests.support.hostile import manifest, regular_tar


@pytest.mark.parametrize("fmt", ["tar.lz4", "tar.zst"])
@pytest.mark.parametrize("split_at", [1, 2, 3])
def test_concatenated_frames_are_one_stream_even_when_a_magic_straddles_reads(
    tmp_path: Path, fmt: str, split_at: int
) -> None:
    import random as random_mod

    import lz4.frame
    import zstandard

    def frame(data: bytes) -> bytes:
        if fmt == "tar.lz4":
            return bytes(lz4.frame.compress(data))
        return bytes(zstandard.ZstdCompressor(level=1).compress(data))

    members = {"r.bin": random_mod.Random(5).randbytes(200_000), "b.txt": b"bravo\n"}
    tar = regular_tar(members)
    # Find a first frame ending ``split_at`` bytes before the reader's 64 KiB read boundary, so
    # the second frame's magic number is split across two reads.
    for n in range(65_000, 66_000):
        first = frame(tar[:n])
        if len(first) == 65_536 - split_at:
            break
    else:
        pytest.skip(f"no frame length lands on the boundary for {fmt}")
    path = tmp_path / f"two{SUFFIX[fmt]}"
    path.write_bytes(first + frame(tar[n:]))
    assert dict(archives.scan(path, DEFAULT, manifest(members)).members) == manifest(members)
