"""Reading an archive: its format by its leading bytes, then its members walked and checked
under a profile."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from fixture_store.limits import DEFAULT, Limits
from fixture_store.objects import digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.readers import formats
from fixture_store.readers.archives._common import Format, fail
from fixture_store.readers.archives._members import (
    Checker,
    ManifestLike,
    MemberSink,
    manifest_members,
)
from fixture_store.readers.archives.decode import Budget
from fixture_store.readers.archives.tar import read_tar_members
from fixture_store.readers.archives.zip import read_zip_members
from fixture_store.readers.pinned import PinnedFile, Source, label_of, pin

_BY_NAME: tuple[tuple[str, Format], ...] = (
    (".tar.lz4", "tar.lz4"),
    (".tar.zst", "tar.zst"),
    (".tar", "tar"),
    (".zip", "zip"),
    (".npz", "zip"),
)
_ARCHIVES: frozenset[str] = frozenset(("tar", "tar.lz4", "tar.zst", "zip"))
_NOT_ARCHIVES = {"npy": "an NPY array", "safetensors": "a safetensors file"}


def detect_format(path: Source) -> Format:
    """An archive's format by its leading bytes: a store object has no name to go by.

    Bytes that begin no known format are read as the name says, so that a damaged archive is
    refused by its reader's own rule (``corrupt``); with neither, the archive is refused.
    """
    if isinstance(path, PinnedFile):  # a store object, opened through the path primitive
        shown, sniffed = path.path, formats.sniff(path.file.fileno())
    else:
        shown, sniffed = os.fspath(path), formats.sniff(path)
    if sniffed in _ARCHIVES:
        return sniffed  # type: ignore[return-value]
    name = Path(shown).name.lower()
    if sniffed == "unknown":
        for suffix, fmt in _BY_NAME:
            if name.endswith(suffix):
                return fmt
    raise fail(
        shown,
        "format",
        f"unknown archive format: its leading bytes are not those of a tar, tar.lz4, tar.zst "
        f"or zip ({_NOT_ARCHIVES.get(sniffed, 'no known magic number')})",
    )


def _hash_only(_member: str, chunks: Iterator[bytes]) -> Digest:
    return digests.of_chunks(chunks)


def scan(
    path: Source,
    limits: Limits = DEFAULT,
    manifest: ManifestLike | None = None,
    *,
    artifact: str | None = None,
    fmt: Format | None = None,
    sink: MemberSink = _hash_only,
) -> trees.Tree:
    """Read an archive as a stream under ``limits``; return the tree of its members.

    With a ``manifest`` every member must be listed with its exact size and digest and every
    listed member must be present. ``sink`` receives each member's bytes (default: hash only).
    """
    label = label_of(path, artifact)
    with pin(path, label) as pinned:  # a store object comes pinned: see pin_object
        fmt = fmt or detect_format(pinned)
        checker = Checker(limits, label, manifest_members(manifest))
        if fmt == "zip":
            read_zip_members(pinned, limits, checker, sink)
        else:
            budget = Budget(limits, label)
            pinned.file.seek(0)  # an archive hashed first (extract) is read again from its start
            f = io.BufferedReader(cast(io.RawIOBase, pinned.file))
            read_tar_members(f, fmt, checker, budget, sink)
    return checker.finish()
