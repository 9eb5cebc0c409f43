"""A writer process for the crash and concurrency tests: fetches, puts and extracts.

Run as ``python -m tests.support.crash_child STORE WORKDIR [GO_FILE]``. It prints ``ready`` once
imported,
waits for ``GO_FILE`` to exist when given (so several writers start together), then:

1. ``fetch``: fetches every record of ``WORKDIR/provenance`` through its pinned (local) source;
2. ``put``: puts every ``blob-*`` file of WORKDIR into the store;
3. ``extract``: puts ``archive.tar.zst`` and extracts it against its manifest;
4. ``pull``: pulls every record of ``WORKDIR/pull/provenance`` from the folder remote
   ``WORKDIR/pull/remote``, a few objects to a batch (so a kill can land between batches).

Each phase is announced on stdout before it starts, so a killer knows where it struck.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from fixture_store.remotes import sync
from fixture_store.remotes.folder import FolderRemote
from fixture_store.sources import FetchContext, fetch_record

PULL_BATCHING = sync.Batching(objects=16)


def run(store: Store, work: Path, phase: Callable[[str], None] = lambda _: None) -> None:
    phase("fetch")
    registry = registry_mod.load(work)
    ctx = FetchContext(store, work)
    for record in registry.records():
        fetch_record(ctx, record)
    phase("put")
    for blob in sorted(work.glob("blob-*")):
        store.write_file(blob)
    phase("extract")
    manifest = {
        k: digests.parse(v["digest"], v["size"])
        for k, v in json.loads((work / "manifest.json").read_text()).items()
    }
    archive = work / "archive.tar.zst"
    store.write_file(archive)
    archives.extract(store, archive, manifest)
    phase("pull")
    pulled = registry_mod.load(work / "pull")
    remote = FolderRemote("crash", work / "pull" / "remote")
    report = sync.pull(
        store, pulled, remote, sync.plan(pulled, pulled.names()), batching=PULL_BATCHING
    )
    failed = [r for r in report.results if not r.ok]
    if failed:
        raise SystemExit(f"pull failed: {failed}")


def main() -> None:
    store = Store.at(sys.argv[1])
    work = Path(sys.argv[2])
    print("ready", flush=True)
    if len(sys.argv) > 3:
        go = Path(sys.argv[3])
        while not go.exists():
            time.sleep(0.001)
    run(store, work, lambda name: print(f"phase {name}", flush=True))
    print("done", flush=True)


if __name__ == "__main__":
    main()
