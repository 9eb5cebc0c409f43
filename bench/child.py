"""One measured operation, run in its own process so its peak RSS can be read by the parent.

Prints one JSON line: {"seconds": ..., "bytes": ...}. The time covers the operation only (not
interpreter start-up); external tools (sha256sum, dvc) are timed by the parent instead.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path


def _files(listing: str) -> list[str]:
    return Path(listing).read_text().splitlines()


def op_noop(_args: list[str]) -> int:
    import fixture_store.cli.app
    import fixture_store.verify  # noqa: F401

    return 0


def op_hashlib(args: list[str]) -> int:
    """Python's OpenSSL SHA-256 of every listed file, one core, 1 MiB reads."""
    total = 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    for path in _files(args[0]):
        h = hashlib.sha256()
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                h.update(view[:n])
                total += n
        h.hexdigest()
    return total


def op_verify(args: list[str]) -> int:
    """What `fixture-store verify` does: load the registry, verify every record."""
    from fixture_store import registry as registry_mod
    from fixture_store.objects.digests import Algorithm
    from fixture_store.objects.store import Store
    from fixture_store.verify import verify_names

    store, project, mode, algorithm, executor, *rest = args
    workers = int(rest[0]) if rest else None
    start = time.perf_counter()
    reg = registry_mod.load(project)
    PHASES["registry load"] = time.perf_counter() - start
    start = time.perf_counter()
    results = verify_names(
        Store.at(store),
        reg,
        reg.names(),
        full=mode == "full",
        algorithm=Algorithm(algorithm),
        executor=executor,
        workers=workers,
    )
    PHASES["verify"] = time.perf_counter() - start
    bad = [r for r in results if not r.ok]
    if bad:
        raise SystemExit(f"verify failed: {bad[0].name}: {bad[0].message}")
    return sum(r.hashed_bytes for r in results)


def op_stat(args: list[str]) -> int:
    """os.stat of every listed file: the floor under any warm, per-file check."""
    import os

    for path in _files(args[0]):
        os.stat(path)
    return 0


def op_registry_load(args: list[str]) -> int:
    from fixture_store import registry as registry_mod

    return len(registry_mod.load(args[0]).names())


def op_pooch(args: list[str]) -> int:
    """pooch.retrieve of one file from a loopback mirror, checked against its SHA-256.

    Run without fixture-store's imports, and timed by the parent as a whole process."""
    import pooch

    url, known, folder = args[:3]
    path = pooch.retrieve(url, known_hash=known, path=folder, fname="object", progressbar=False)
    return Path(path).stat().st_size


def op_extract(args: list[str]) -> int:
    """Checked extraction of an archive into the store under the 1 GiB limits profile."""
    from fixture_store import limits
    from fixture_store.objects import trees
    from fixture_store.objects.store import Store
    from fixture_store.readers import archives

    archive, manifest, store = args[:3]
    tree = trees.parse_manifest(Path(manifest).read_bytes())
    archives.extract(Store.at(store), archive, tree, limits.GIB_1)
    return tree.total_size


PHASES: dict[str, float] = {}
OPS = {
    "noop": op_noop,
    "hashlib": op_hashlib,
    "verify": op_verify,
    "stat": op_stat,
    "registry-load": op_registry_load,
    "extract": op_extract,
    "pooch": op_pooch,
}
# Contenders that are not fixture-store: they do not pay for its imports.
BARE = {"noop", "pooch"}


def main() -> None:
    op, args = sys.argv[1], sys.argv[2:]
    if op not in BARE:
        op_noop([])  # same imports as the baseline, outside the timed part
    start = time.perf_counter()
    nbytes = OPS[op](args)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "bytes": nbytes, "phases": PHASES}))


if __name__ == "__main__":
    main()
