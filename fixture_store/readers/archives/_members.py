"""The per-member rules shared by the tar walk and the zip reader.

Each member must be a regular file with a safe relative path that the manifest lists, with the
manifest's size and digest; duplicates (a path twice, or a file and a folder), extras and missing
members are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping

from fixture_store.limits import Limits
from fixture_store.objects import trees
from fixture_store.objects.digests import Digest
from fixture_store.readers.archives._common import fail

ManifestLike = trees.Tree | Mapping[str, Digest]
# Receives a member's path and its bytes; returns the digest of what it received.
MemberSink = Callable[[str, Iterator[bytes]], Digest]
# The member readers parse as JSON (a checkpoint's tensor manifest): held, at any depth, to the
# profile's metadata bytes, the bound on what a JSON parser is given.
METADATA_MEMBER = "metadata.json"


def manifest_members(manifest: ManifestLike | None) -> Mapping[str, Digest] | None:
    if manifest is None:
        return None
    if isinstance(manifest, trees.Tree):
        return manifest.members
    return trees.Tree(dict(manifest)).members


class Checker:
    """The per-member rules shared by tar and zip."""

    def __init__(self, limits: Limits, artifact: str, manifest: Mapping[str, Digest] | None):
        self.limits = limits
        self.artifact = artifact
        self.manifest = manifest
        self.seen: dict[str, Digest] = {}
        # Folder entries: not members, but never also a file (tools replace one by the other).
        self.folders: set[str] = set()
        self.count = 0

    def admit(self, name: str, size: int) -> str:
        self.count += 1
        if self.count > self.limits.member_count:
            raise fail(
                self.artifact,
                "member-count",
                f"more than the profile's {self.limits.member_count} members",
            )
        path = self.check_path(name)
        if path in self.seen:
            raise fail(self.artifact, "duplicate", f"member {path!r} appears twice")
        if size < 0 or size > self.limits.member_bytes:
            raise fail(
                self.artifact,
                "member-bytes",
                f"member {path!r} declares {size} bytes; the profile allows "
                f"{self.limits.member_bytes}",
            )
        if size > self.limits.metadata_bytes and path.rsplit("/", 1)[-1] == METADATA_MEMBER:
            raise fail(
                self.artifact,
                "metadata-size",
                f"member {path!r} declares {size} bytes of metadata; the profile allows "
                f"{self.limits.metadata_bytes}",
            )
        if self.manifest is not None:
            want = self.manifest.get(path)
            if want is None:
                raise fail(
                    self.artifact,
                    "extra-member",
                    f"member {path!r} is not in the record's manifest",
                )
            if want.size != size:
                raise fail(
                    self.artifact,
                    "size-lie",
                    f"member {path!r} declares {size} bytes, the manifest {want.size}",
                )
        return path

    def check_path(self, name: str) -> str:
        return check_path(self.artifact, name)

    def done(self, path: str, actual: Digest) -> None:
        if self.manifest is not None:
            want = self.manifest[path]
            if actual.size != want.size:
                raise fail(
                    self.artifact,
                    "size-lie",
                    f"member {path!r} holds {actual.size} bytes, the manifest {want.size}",
                )
            if actual != want:
                raise fail(
                    self.artifact,
                    "member-digest",
                    f"member {path!r} is {actual}, the manifest says {want}",
                )
        self.seen[path] = actual

    def finish(self) -> trees.Tree:
        check_folders(self.artifact, self.folders, self.seen)
        if self.manifest is not None:
            missing = sorted(set(self.manifest) - set(self.seen))
            if missing:
                raise fail(
                    self.artifact,
                    "missing-member",
                    f"{len(missing)} manifest member(s) not in the archive, first {missing[0]!r}",
                )
        try:
            return trees.Tree(self.seen)
        except trees.TreePathError as e:
            raise fail(self.artifact, "member-path", e.message) from None


def check_path(artifact: str, name: str) -> str:
    """A member's or a folder entry's path, by the one rule tar and zip share: relative, no
    ``..``, no backslash or drive, short enough for a filesystem (see
    :func:`trees.check_member_path`)."""
    if "\\" in name:
        raise fail(artifact, "backslash", f"member {name!r} contains a backslash")
    if name.startswith("/"):
        raise fail(artifact, "absolute-path", f"member {name!r} is absolute")
    if name[1:2] == ":" and name[0].isalpha():
        raise fail(artifact, "drive-letter", f"member {name!r} starts with a drive")
    if ".." in name.split("/"):
        raise fail(artifact, "traversal", f"member {name!r} escapes with '..'")
    # A tar name may hold undecodable bytes (surrogate escapes): count the stored bytes.
    if len(name.encode(errors="surrogateescape")) > trees.PATH_MAX or any(
        len(seg.encode(errors="surrogateescape")) > trees.NAME_MAX for seg in name.split("/")
    ):
        raise fail(
            artifact,
            "member-path",
            f"member path {name[:64]!r}... is longer than a filesystem allows",
        )
    try:
        return trees.check_member_path(name)
    except trees.TreePathError as e:
        raise fail(artifact, "member-path", e.message) from None


def check_folders(artifact: str, folders: Iterable[str], files: Container[str]) -> None:
    """A path is a file or a folder, never both (the tools replace one by the other)."""
    for folder in folders:
        parts = folder.split("/")
        for n in range(1, len(parts) + 1):
            if "/".join(parts[:n]) in files:
                raise fail(
                    artifact,
                    "duplicate",
                    f"{folder!r} is a folder entry, {'/'.join(parts[:n])!r} a file",
                )
