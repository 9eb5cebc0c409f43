"""The per-member rules shared by the tar walk and the zip reader.

Each member must be a regular file with a safe relative path that the manifest lists, with the
manifest's size and digest; duplicates, extras and missing members are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from fixture_store.limits import Limits
from fixture_store.objects import trees
from fixture_store.objects.digests import Digest
from fixture_store.readers.archives._common import fail

ManifestLike = trees.Tree | Mapping[str, Digest]
# Receives a member's path and its bytes; returns the digest of what it received.
MemberSink = Callable[[str, Iterator[bytes]], Digest]
_NAME_MAX = 255
_PATH_MAX = 4096


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
        if "\\" in name:
            raise fail(self.artifact, "backslash", f"member {name!r} contains a backslash")
        if name.startswith("/"):
            raise fail(self.artifact, "absolute-path", f"member {name!r} is absolute")
        if name[1:2] == ":" and name[0].isalpha():
            raise fail(self.artifact, "drive-letter", f"member {name!r} starts with a drive")
        if ".." in name.split("/"):
            raise fail(self.artifact, "traversal", f"member {name!r} escapes with '..'")
        if len(name.encode()) > _PATH_MAX or any(
            len(seg.encode()) > _NAME_MAX for seg in name.split("/")
        ):
            raise fail(
                self.artifact,
                "member-path",
                f"member path {name[:64]!r}... is longer than a filesystem allows",
            )
        try:
            return trees.check_member_path(name)
        except trees.TreePathError as e:
            raise fail(self.artifact, "member-path", e.message) from None

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
