"""Extraction into the store: a checked archive becomes ``extracted/<archive hex>/``.

Members are written into a staging folder under the store's ``tmp/``, which is renamed into
place only when complete: ``members/`` holds the files and ``sentinel.json`` binds them to the
archive digest and the member manifest, so a tampered extraction or an archive edited in place
is caught by :func:`check_extraction`. An extraction is exactly its manifest: ``extracted/`` is a
plain folder of the store, and a link anywhere in an extraction makes it tampered, never followed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fixture_store.errors import StoreError, UnsafeArchiveError
from fixture_store.limits import DEFAULT, Limits
from fixture_store.objects import digests, fsutil, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store, io_error
from fixture_store.readers.archives._common import Format, fail
from fixture_store.readers.archives._members import ManifestLike, MemberSink, manifest_members
from fixture_store.readers.archives.scan import scan

SENTINEL = "sentinel.json"
MEMBERS = "members"
SENTINEL_FORMAT = "fixture-store.extracted/1"


def extraction_path(store: Store, archive: Digest) -> Path:
    return store.root / "extracted" / archive.hex


def extract(
    store: Store,
    path: str | os.PathLike[str],
    manifest: ManifestLike,
    limits: Limits = DEFAULT,
    *,
    archive_digest: Digest | None = None,
    artifact: str | None = None,
    fmt: Format | None = None,
) -> Path:
    """Extract a checked archive into ``extracted/<archive hex>``; return its ``members`` folder.

    The archive is hashed while it is read when ``archive_digest`` is given (a mismatch refuses
    it). Members go to a staging folder in ``tmp/``; only a complete, checked extraction is
    renamed into place. An existing extraction is reused only if :func:`check_extraction` passes.
    """
    p = Path(path)
    label = artifact or str(p)
    actual_archive = digests.of_file(p)
    if archive_digest is not None and actual_archive != archive_digest:
        raise fail(
            label, "archive-digest", f"archive is {actual_archive}, expected {archive_digest}"
        )
    final = extraction_path(store, actual_archive)
    tree = trees.Tree(dict(manifest_members(manifest) or {}))
    if store.plain("extracted") and os.path.lexists(final):
        with contextlib.suppress(UnsafeArchiveError):
            return check_extraction(store, p, tree, archive_digest=actual_archive, artifact=label)
    store.ensure()
    try:
        staging = Path(tempfile.mkdtemp(dir=store.tmp_dir, prefix="extract-"))
    except OSError as e:
        raise StoreError(f"cannot create a staging folder in {store.tmp_dir}: {e}") from e
    try:
        sink = _writer(staging / MEMBERS)
        scan(p, limits, tree, artifact=label, fmt=fmt, sink=sink)
        sentinel = {
            "format": SENTINEL_FORMAT,
            "archive": actual_archive.text,
            "archive_size": actual_archive.size,
            "tree": tree.digest.text,
            "tree_size": tree.digest.size,
        }
        fsutil.write_synced(staging / SENTINEL, json.dumps(sentinel, sort_keys=True).encode())
        fsutil.fsync_path(staging)
        store.plain("extracted", create=True)
        with store.lock(actual_archive):
            if os.path.lexists(final):
                try:
                    # Another process finished the same extraction first: keep theirs.
                    return check_extraction(
                        store, None, tree, archive_digest=actual_archive, artifact=label
                    )
                except UnsafeArchiveError:
                    # A damaged one is moved aside in one rename, so no reader sees it half gone
                    # (a link is renamed as a link: what it points to is never touched).
                    os.rename(final, Path(tempfile.mkdtemp(dir=store.tmp_dir, prefix="old-")) / "x")
            os.rename(staging, final)
            fsutil.fsync_path(final.parent)
    except OSError as e:
        raise io_error(e, store.root) from e
    finally:
        if staging.exists():
            fsutil.remove_tree(staging)
        for old in store.tmp_dir.glob("old-*"):
            with contextlib.suppress(OSError):
                fsutil.remove_tree(old)
    return final / MEMBERS


def _writer(staging: Path) -> MemberSink:
    def write(member: str, chunks: Iterator[bytes]) -> Digest:
        target = staging.joinpath(*member.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL | O_NOFOLLOW: never follow or overwrite anything already in staging.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        h = digests.Hasher()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(target, 0o444)
        return h.digest()

    return write


def check_extraction(
    store: Store,
    path: str | os.PathLike[str] | None,
    manifest: ManifestLike,
    *,
    archive_digest: Digest,
    artifact: str = "<archive>",
) -> Path:
    """Check an extraction folder: sentinel bound to the archive, every member re-hashed.

    With ``path``, the archive on disk is re-hashed too, so an archive edited in place (even with
    its size and mtime restored) no longer matches the sentinel.
    """
    folder = extraction_path(store, archive_digest)
    tree = trees.Tree(dict(manifest_members(manifest) or {}))
    store.plain("extracted")
    for plain in (folder, folder / MEMBERS):
        _refuse_link(plain, artifact)
    try:
        sentinel = json.loads(_read_no_follow(folder / SENTINEL))
    except (OSError, ValueError) as e:
        raise fail(
            artifact, "extraction-sentinel", f"extraction has no valid sentinel: {e}"
        ) from None
    if (
        not isinstance(sentinel, dict)
        or sentinel.get("format") != SENTINEL_FORMAT
        or sentinel.get("archive") != archive_digest.text
        or sentinel.get("tree") != tree.digest.text
    ):
        raise fail(
            artifact,
            "extraction-sentinel",
            "extraction sentinel is bound to another archive or manifest",
        )
    if path is not None:
        actual = digests.of_file(Path(path))
        if actual != archive_digest:
            raise fail(
                artifact,
                "archive-digest",
                f"archive was edited: it is {actual}, the extraction is of {archive_digest}",
            )
    try:
        found = trees.scan_folder(folder / MEMBERS) if (folder / MEMBERS).is_dir() else {}
    except trees.TreePathError as e:
        raise fail(artifact, "extraction-tampered", e.message) from None
    if set(found) != set(tree.members):
        raise fail(
            artifact,
            "extraction-tampered",
            "extracted files differ from the manifest (added or removed files)",
        )
    for member, want in tree:
        if digests.of_file(found[member]) != want:
            raise fail(artifact, "extraction-tampered", f"extracted member {member!r} changed")
    return folder / MEMBERS


def _refuse_link(path: Path, artifact: str) -> None:
    """An extraction folder that is a link is tampered: it is never followed out of the store."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return  # missing: the sentinel or the member comparison reports it
    if stat.S_ISLNK(mode):
        raise fail(
            artifact,
            "extraction-tampered",
            f"{path} is a symbolic link; an extraction must be plain folders in the store",
        )


def _read_no_follow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()
