"""A writer process for the crash and concurrency tests: puts blobs and extracts an archive.

Run as ``python -m tests.crash_child STORE WORKDIR [GO_FILE]``. It prints ``ready`` once imported,
waits for ``GO_FILE`` to exist when given (so several writers start together), then puts every
``blob-*`` file of WORKDIR into the store and extracts ``archive.tar.zst`` against its manifest.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fixture_store import archives, digests
from fixture_store.store import Store


def run(store: Store, work: Path) -> None:
    for blob in sorted(work.glob("blob-*")):
        store.put_file(blob)
    manifest = {k: digests.parse(v["digest"], v["size"])
                for k, v in json.loads((work / "manifest.json").read_text()).items()}
    archive = work / "archive.tar.zst"
    store.put_file(archive)
    archives.extract(store, archive, manifest)


def main() -> None:
    store = Store.at(sys.argv[1])
    work = Path(sys.argv[2])
    print("ready", flush=True)
    if len(sys.argv) > 3:
        go = Path(sys.argv[3])
        while not go.exists():
            time.sleep(0.001)
    run(store, work)
    print("done", flush=True)


if __name__ == "__main__":
    main()
