"""CPU time of verify's hashing and of a warm verify, before and after store objects are read
through the path primitive (DESIGN 13): a store of 2,000 small objects and one of 256 MiB.

    uv run python -m bench.routed_readers WORK_FOLDER

Best of 5, CPU time of this process and its threads (``resource.getrusage``): the machine this
runs on is shared, so wall time says more about the neighbours than about the code.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path

from fixture_store import registry
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Registry
from fixture_store.verify import (
    ObjectCheck,
    ObjectKey,
    Verifier,
    _hashing,
    _pool_size,
    verify_names,
)

SMALL, SMALL_SIZE, LARGE_SIZE, REPEAT = 2000, 4096, 256 << 20, 5


def build(root: Path) -> tuple[Store, dict[ObjectKey, tuple[Digest, str | None]]]:
    store = Store.at(root).ensure()
    digests = [store.put_bytes(os.urandom(SMALL_SIZE)) for _ in range(SMALL)]
    big = bytearray(os.urandom(1 << 20)) * (LARGE_SIZE >> 20)
    digests.append(store.put_bytes(bytes(big)))
    return store, {(d.hex, d.size, None): (d, None) for d in digests}


def verify_once(
    store: Store, expected: dict[ObjectKey, tuple[Digest, str | None]], full: bool
) -> None:
    verifier = Verifier(store, full=full)
    checks: dict[ObjectKey, ObjectCheck] = {}
    to_hash = verifier.sweep(expected, checks)
    jobs = [verifier.job(*expected[key], st.st_size) for key, st in to_hash]
    with _hashing(jobs, _pool_size(to_hash, None), "thread") as hashed:
        for (key, st), h in zip(to_hash, hashed, strict=True):
            checks[key] = verifier.judge(*expected[key], st, h)
    assert all(c.status.name == "VERIFIED" for c in checks.values()), "not all verified"
    assert len(checks) == len(expected)
    verifier.cache.flush()


def cpu(fn: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        before = resource.getrusage(resource.RUSAGE_SELF)
        fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, spent)
    return best


def project(work: Path, expected: dict[ObjectKey, tuple[Digest, str | None]]) -> Registry:
    """A registry of one plain record per object (a warm verify sniffs each one's head)."""
    records = {
        f"fam/o{i}": {
            "kind": "checkpoint",
            "digest": d.text,
            "size": d.size,
            "source": {"type": "local", "path": "x"},
        }
        for i, (d, _) in enumerate(expected.values())
    }
    (work / "provenance").mkdir(exist_ok=True)
    doc = {"format_version": 1, "records": records}
    (work / "provenance" / "fam.json").write_text(registry.dumps(doc))
    return registry.load(work)


def main(argv: list[str]) -> None:
    work = Path(argv[0])
    store, expected = build(work / "store")
    reg = project(work, expected)
    names = reg.names()

    def run(full: bool) -> None:
        assert all(r.ok for r in verify_names(store, reg, names, full=full))

    verify_once(store, expected, full=False)  # warms the verified-state cache
    full = cpu(lambda: verify_once(store, expected, full=True))
    warm = cpu(lambda: verify_once(store, expected, full=False))
    run(False)
    full_cmd = cpu(lambda: run(True))
    warm_cmd = cpu(lambda: run(False))
    print(
        f"hashing: full {full:.3f} s, warm {warm * 1000:.1f} ms; "
        f"verify_names: full {full_cmd:.3f} s, warm {warm_cmd * 1000:.1f} ms  (CPU, best of 5)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
