"""Small filesystem steps shared by the store, extraction and tree checkouts."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def remove_tree(path: Path) -> None:
    """Remove a folder even though its files and folders are read-only (as store content is)."""

    def make_writable(_func: object, p: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o755)
            os.chmod(p, 0o644)
        with contextlib.suppress(OSError):
            os.unlink(p)

    shutil.rmtree(path, onerror=make_writable)
