"""Generate the registry of the ONNX backend test corpus shipped in the onnx 1.22.0 distribution.

Run from the project root:  uv run python scripts/onnx_corpus.py [--store DIR]

It runs in the project's own environment (it registers data, it generates none), not in a
pinned generator environment like the scripts in ``models/``.

It downloads the pinned onnx wheel through the package source (the machine's pip, no index
address written anywhere), checks it against the digest pinned below (the same one uv.lock pins),
reads the test data through the safe member reader, and writes one family file per corpus folder
in provenance/. Running it twice writes byte-identical files.

The distribution is the cp312-abi3 manylinux x86_64 wheel: onnx publishes no pure wheel, its
sdist cannot be downloaded without building metadata (a CMake build), and the test data in every
1.22.0 wheel is the same. Pinning one wheel file by name and digest makes the download identical
on every machine; pip is asked for exactly that file's tags, whatever the local platform.

``backend/test/data/real`` is not registered: it holds only pointers (data.json) to models on
external hosts, no test data.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Annotations, Kind, PackageSource, Record
from fixture_store.sources import FetchContext
from fixture_store.sources.members import SafeArchive
from fixture_store.sources.package import ensure_distribution

REQUIREMENT = "onnx==1.22.0"
WHEEL = "onnx-1.22.0-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
WHEEL_DIGEST = Digest("955e02e1f6d385b53d52f9cd7b9cdf5caf417c300bcfe3c64c6d542be763845b", 19106514)
DATA = "onnx/backend/test/data"
LICENSE = "Apache-2.0"
# corpus folder -> family; each sub-folder of these is one case
FOLDER_FAMILIES = {
    "node": "onnx-node",
    "pytorch-converted": "onnx-pytorch-converted",
    "pytorch-operator": "onnx-pytorch-operator",
    "simple": "onnx-simple",
}
LIGHT_FAMILY = "onnx-light"


def source(path: str) -> PackageSource:
    return PackageSource(REQUIREMENT, WHEEL, WHEEL_DIGEST.text, path, WHEEL_DIGEST.size)


def hash_member(archive: SafeArchive, name: str) -> Digest:
    size = archive.entries[name].size
    with archive.open(name, size) as f:
        return digests.of_stream(f)


def case_record(
    family: str, case: str, base: str, members: dict[str, Digest], folder: str
) -> Record:
    tree = trees.Tree(members)
    return ingest.build_record(
        f"{family}/{case}",
        Kind.ONNX_CASE,
        tree.digest,
        source(base),
        members=tree,
        media_type=trees.MEDIA_TYPE,
        annotations=Annotations(
            license=LICENSE,
            description=f"ONNX backend test case {folder}/{case} from {REQUIREMENT}",
        ),
        file=f"provenance/{family}.json",
    )


def build(archive: SafeArchive) -> dict[str, list[Record]]:
    families: dict[str, list[Record]] = defaultdict(list)
    cases: dict[tuple[str, str], dict[str, Digest]] = defaultdict(dict)
    light: dict[str, dict[str, Digest]] = defaultdict(dict)
    for name in sorted(archive.names()):
        if not name.startswith(DATA + "/"):
            continue
        match name[len(DATA) + 1 :].split("/"):
            case [folder, case_name, *member] if folder in FOLDER_FAMILIES and member:
                cases[(folder, case_name)]["/".join(member)] = hash_member(archive, name)
            case ["light", file]:
                stem = file.removesuffix(".onnx").removesuffix("_output_0.pb")
                light[stem][file] = hash_member(archive, name)
    for (folder, case), members in sorted(cases.items()):
        family = FOLDER_FAMILIES[folder]
        families[family].append(
            case_record(family, case, f"{DATA}/{folder}/{case}", members, folder)
        )
    for stem, members in sorted(light.items()):
        families[LIGHT_FAMILY].append(
            case_record(LIGHT_FAMILY, stem, f"{DATA}/light", members, "light")
        )
    return families


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="object store (default: $FIXTURE_STORE_DIR or cache)")
    parser.add_argument("--project", default=".", help="project root holding provenance/")
    args = parser.parse_args(argv)
    root = Path(args.project).absolute()
    (root / registry_mod.files.DIRNAME).mkdir(exist_ok=True)
    registry = registry_mod.load(root)
    store = Store.at(args.store)
    probe = Record("onnx-corpus/onnx-1.22.0-wheel", Kind.ARCHIVE, source(DATA), WHEEL_DIGEST)
    archive = ensure_distribution(FetchContext(store, root), probe)
    for family, records in sorted(build(archive).items()):
        path = registry_mod.write_family(
            registry,
            family,
            records,
            description=f"ONNX backend test cases ({family.removeprefix('onnx-')}) shipped in "
            f"{REQUIREMENT}; generated by scripts/onnx_corpus.py, do not edit by hand",
        )
        files = sum(len(r.members or ()) for r in records)
        print(
            f"{path.relative_to(root)}: {len(records)} cases, {files} files, "
            f"{path.stat().st_size:,} bytes"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
