"""Where the store lives and how its folders are laid out (see :mod:`fixture_store.objects.store`
for the layout and what each folder holds)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

ENV_VAR = "FIXTURE_STORE_DIR"
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
WRITER_LOCK = "gc.lock"
WRITER_PREFIX = "writer-"
# The temp files of copies (made read-only by the copy itself) and of hard links.
COPY_PREFIX = "put-"
# An object's shard folder is named by the first hex characters of its digest.
SHARD_LEN = 2
HEX_DIGITS = frozenset("0123456789abcdef")
# Every folder of the store's layout, as parts under the root.
FOLDERS = (
    ("objects", "sha256"),
    ("tmp",),
    ("locks",),
    ("state",),
    ("trees",),
    ("extracted",),
    ("envs",),
)


def default_root(flag: str | os.PathLike[str] | None = None) -> Path:
    """Where the store lives: the flag, then ``$FIXTURE_STORE_DIR``, then a per-user cache dir."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("fixture-store", appauthor=False))
