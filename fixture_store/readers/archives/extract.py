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
from collections.abc import Iterator
from pathlib import Path

from fixture_store import bounded_json
from fixture_store.errors import StoreError, UnsafeArchiveError
from fixture_store.limits import DEFAULT, Limits
from fixture_store.objects import anchored, digests, trees
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store, io_error
from fixture_store.readers.archives._common import Format, fail
from fixture_store.readers.archives._members import ManifestLike, MemberSink, manifest_members
from fixture_store.readers.archives.scan import scan
from fixture_store.readers.pinned import PinnedFile, Source, label_of, pin

SENTINEL = "sentinel.json"
MEMBERS = "members"
SENTINEL_FORMAT = "fixture-store.extracted/1"


def extraction_path(store: Store, archive: Digest) -> Path:
    return store.root / "extracted" / archive.hex


def extract(
    store: Store,
    path: Source,
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
    ``path`` is the archive's file, or a store object the store opened, pinned (never read
    through a link: :func:`~fixture_store.readers.pinned.pin_object`).
    """
    label = label_of(path, artifact)
    with pin(path, label) as pinned:
        return _extract(
            store, pinned, manifest, limits, archive_digest=archive_digest, label=label, fmt=fmt
        )


def _extract(
    store: Store,
    p: PinnedFile,
    manifest: ManifestLike,
    limits: Limits,
    *,
    archive_digest: Digest | None,
    label: str,
    fmt: Format | None,
) -> Path:
    actual_archive = _hash_pinned(p)
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
    with contextlib.ExitStack() as stack:
        try:
            temps = stack.enter_context(store.folder("tmp"))
            staging, name = temps.mkdtemp("extract-")
        except OSError as e:
            raise StoreError(f"cannot create a staging folder in {store.tmp_dir}: {e}") from e
        stack.callback(_remove_temps, temps, name)
        with staging:
            _extract_into(
                staging, p, limits, tree=tree, label=label, fmt=fmt, archive=actual_archive
            )
        try:
            return _publish(store, temps, name, tree=tree, archive=actual_archive, label=label)
        except OSError as e:
            raise io_error(e, store.root) from e
    raise AssertionError("unreachable")  # pragma: no cover - the block returns or raises


def _hash_pinned(pinned: PinnedFile) -> Digest:
    """The digest of a pinned archive, read from its start."""
    pinned.file.seek(0)
    return digests.of_file(pinned.file.fileno())


def _extract_into(
    staging: anchored.Folder,
    path: PinnedFile,
    limits: Limits,
    *,
    tree: trees.Tree,
    label: str,
    fmt: Format | None,
    archive: Digest,
) -> None:
    """Write the checked members and the sentinel into the staging folder, durably."""
    try:
        # The folder exists even when the archive holds no files.
        staging.mkdir(MEMBERS)
        with staging.folder(MEMBERS) as members:
            scan(path, limits, tree, artifact=label, fmt=fmt, sink=_writer(members))
        sentinel = {
            "format": SENTINEL_FORMAT,
            "archive": archive.text,
            "archive_size": archive.size,
            "tree": tree.digest.text,
            "tree_size": tree.digest.size,
        }
        staging.write_atomically(SENTINEL, json.dumps(sentinel, sort_keys=True).encode())
    except OSError as e:
        raise io_error(e, Path(staging.path)) from e


def _publish(
    store: Store,
    temps: anchored.Folder,
    name: str,
    *,
    tree: trees.Tree,
    archive: Digest,
    label: str,
) -> Path:
    """Rename the staged extraction into ``extracted/<archive hex>`` under the archive's lock;
    every rename is made between descriptors of folders opened through the path primitive."""
    final = extraction_path(store, archive)
    with store.folder("extracted", create=True) as extracted, store.lock(archive):
        if _exists(extracted, archive.hex):
            try:
                # Another process finished the same extraction first: keep theirs.
                return check_extraction(store, None, tree, archive_digest=archive, artifact=label)
            except UnsafeArchiveError:
                # A damaged one is moved aside in one rename, so no reader sees it half gone
                # (a link is renamed as a link: what it points to is never touched).
                old, _ = temps.mkdtemp("old-")
                with old:
                    extracted.replace(archive.hex, old, "x")
        temps.replace(name, extracted, archive.hex)
        extracted.fsync()
    return final / MEMBERS


def _exists(folder: anchored.Folder, name: str) -> bool:
    try:
        folder.lstat(name)
    except FileNotFoundError:
        return False
    return True


def _remove_temps(temps: anchored.Folder, staging: str) -> None:
    """Remove the staging folder if it is still there, and extractions moved aside."""
    temps.remove_tree(staging)
    for entry in list(temps.scandir()):
        if entry.name.startswith("old-"):
            with contextlib.suppress(OSError):
                temps.remove_tree(entry.name)


def _writer(members: anchored.Folder) -> MemberSink:
    def write(member: str, chunks: Iterator[bytes]) -> Digest:
        *parents, name = member.split("/")
        with members.folder(*parents, create=True) as folder:
            # A new name only (O_EXCL | O_NOFOLLOW): never follow or overwrite anything there.
            fd = folder.create(name, 0o644)
        h = digests.Hasher()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fchmod(out.fileno(), 0o444)
            os.fsync(out.fileno())
        return h.digest()

    return write


def check_extraction(
    store: Store,
    path: Source | None,
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

    def refuse(path: str, what: str) -> UnsafeArchiveError:
        return fail(
            artifact,
            "extraction-tampered",
            f"{path} is {what}; an extraction must be plain folders in the store",
        )

    store.plain("extracted")
    try:
        with (
            anchored.Folder.root(store.root, refuse=refuse) as root,
            root.folder("extracted", archive_digest.hex) as extraction,
        ):
            _check_sentinel(extraction, tree, archive_digest, artifact)
            if path is not None:
                if isinstance(path, PinnedFile):
                    actual = _hash_pinned(path)
                else:
                    actual = digests.of_file(Path(path))
                if actual != archive_digest:
                    raise fail(
                        artifact,
                        "archive-digest",
                        f"archive was edited: it is {actual}, the extraction is of "
                        f"{archive_digest}",
                    )
            members = extraction.find(MEMBERS)
            found = {} if members is None else _hash_members(members, "")
    except FileNotFoundError:
        raise fail(artifact, "extraction-sentinel", "extraction has no valid sentinel") from None
    if set(found) != set(tree.members):
        raise fail(
            artifact,
            "extraction-tampered",
            "extracted files differ from the manifest (added or removed files)",
        )
    for member, want in tree:
        if found[member] != want:
            raise fail(artifact, "extraction-tampered", f"extracted member {member!r} changed")
    return folder / MEMBERS


def _check_sentinel(
    extraction: anchored.Folder, tree: trees.Tree, archive_digest: Digest, artifact: str
) -> None:
    try:
        sentinel = bounded_json.loads(extraction.read_bytes(SENTINEL))
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


def _hash_members(folder: anchored.Folder, prefix: str) -> dict[str, Digest]:
    """Every file below ``folder`` by member path, hashed through the path primitive: a link or
    a special file anywhere is the folder's refusal (the extraction is tampered)."""
    found: dict[str, Digest] = {}
    with folder:
        for entry in sorted(folder.scandir(), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                found.update(_hash_members(folder.folder(entry.name), f"{prefix}{entry.name}/"))
            else:
                with folder.open(entry.name) as f:  # a link or a FIFO is refused here
                    found[f"{prefix}{entry.name}"] = digests.of_stream(f)
    return found
