"""The plan of one import: every listed file's bytes found and checked against the digests
the manifest states, before anything is registered.

Where the bytes are is an :class:`Origin`: a folder of the project (:class:`LocalOrigin`, the
records get local sources) or a folder inside a pinned distribution (:class:`PackageOrigin`,
package sources). Each file is read once, streamed through SHA-256 and every hash the manifest
states; the :class:`Plan` says which files are accepted (with their SHA-256 and size), which are
absent, which do not match (naming the algorithm and both digests), and which files sit unlisted
beside listed ones (orphans). It is a value: print it, then register it.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from fixture_store.errors import UsageError
from fixture_store.importers import held, report
from fixture_store.importers.entry import (
    MAX_MANIFEST_BYTES,
    ManifestEntry,
    ManifestError,
    Refused,
    check_size,
    read_manifest,
)
from fixture_store.objects import digests
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.registry import Kind, LocalSource, PackageSource, Record, Source
from fixture_store.registry import project as project_mod
from fixture_store.sources import FetchContext
from fixture_store.sources.members import SafeArchive

# Formats that list downloads rather than the files of a folder.
DOWNLOAD_LISTS = frozenset({"tfds"})


@dataclass(frozen=True)
class Located:
    """A readable file holding an entry's bytes, the source its record will name, and the
    file the user gave as every message names it (``shown``): ``path`` may be a copy in the
    import's scratch folder, which means nothing to them and is gone when the command ends."""

    path: Path
    source: Source
    shown: str


class Origin(Protocol):
    """Where the manifest and the files it lists are read from."""

    def manifest(self, path: str) -> tuple[str, str]:
        """The manifest's text and the name to show for it."""
        ...

    def name(self, manifest: str) -> str:
        """The manifest as records name it: no machine path in a reviewed registry."""
        ...

    def locate(self, entry: ManifestEntry) -> Located | None:
        """The entry's bytes, or ``None`` if the file is absent."""
        ...

    def unlisted(self, listed: frozenset[str], manifest: str) -> list[str]:
        """Files in the folders of ``listed`` that are not listed (nor the manifest)."""
        ...

    def source(self, path: str) -> Source:
        """The source a record of the file at ``path`` names."""
        ...


@dataclass(frozen=True)
class LocalOrigin:
    """Files under ``root``, a folder inside the ``project`` whose registry receives them."""

    project: Path
    root: Path

    def __post_init__(self) -> None:
        try:
            self.root.absolute().relative_to(self.project.absolute())
        except ValueError:
            raise UsageError(
                f"{self.root} is outside the project {self.project}; imported files get local "
                "sources, which are paths inside it",
                fix="copy the files into the project, or import from a package source",
            ) from None
        if not self.root.is_dir():
            raise UsageError(f"{self.root} is not a folder", fix="pass --root DIR")

    def _rel(self, path: str) -> str:
        folder = _folder(self.root, self.project)
        return path if folder == "." else f"{folder}/{path}"

    def manifest(self, path: str) -> tuple[str, str]:
        return _text(read_manifest(path, str(path)), str(path)), str(path)

    def name(self, manifest: str) -> str:
        try:
            return Path(manifest).absolute().relative_to(self.project.absolute()).as_posix()
        except ValueError:
            return Path(manifest).name

    def locate(self, entry: ManifestEntry) -> Located | None:
        path = self.root / entry.path
        try:
            st: os.stat_result | None = path.lstat()
        except (FileNotFoundError, NotADirectoryError):
            st = None
        source = self.source(entry.path)
        if st is not None and stat.S_ISREG(st.st_mode):
            return Located(path, source, str(path))
        if entry.cached_at is not None and (st is None or stat.S_ISLNK(st.st_mode)):
            # Absent, or a link DVC made into its cache: the cache object itself is read (and
            # checked), the link is not followed.
            return Located(Path(entry.cached_at), source, entry.cached_at)
        if st is not None:
            raise ManifestError(
                entry.where,
                f"{path} is not a regular file (a link, folder or device); nothing is followed",
                fix="replace it with the file itself",
            )
        return None

    def unlisted(self, listed: frozenset[str], manifest: str) -> list[str]:
        skip = {Path(manifest).absolute()}
        ignore = project_mod.orphans_ignored(self.project)
        found: set[str] = set()
        for folder in {str(PurePosixPath(p).parent) for p in listed}:
            base = self.root / folder
            if not base.is_dir():
                continue
            for entry in os.scandir(base):
                rel = PurePosixPath(folder, entry.name).as_posix().removeprefix("./")
                if rel in listed or Path(entry.path).absolute() in skip:
                    continue
                if project_mod.ignored(self._rel(rel), ignore):
                    continue
                if entry.is_file(follow_symlinks=False) and not _sidecar(entry.name):
                    found.add(rel)
        return sorted(found)

    def source(self, path: str) -> Source:
        return LocalSource(self._rel(path))


@dataclass(frozen=True)
class PackageOrigin:
    """Files under ``root`` inside a pinned distribution (its ``path`` is ignored); members are
    copied to ``scratch`` to be read."""

    distribution: PackageSource
    archive: SafeArchive
    root: str
    scratch: Path

    def _member(self, path: str) -> str:
        return f"{self.root.strip('/')}/{path}" if self.root.strip("/") else path

    def manifest(self, path: str) -> tuple[str, str]:
        entry = self.archive.entries.get(path)
        shown = f"{self.distribution.file}:{path}"
        if entry is None:
            raise UsageError(f"{shown}: no such member", fix="name the manifest by its path inside")
        with self.archive.open(path, entry.size) as stream:
            data = check_size(stream.read(MAX_MANIFEST_BYTES + 1), shown)
        return _text(data, shown), shown

    def name(self, manifest: str) -> str:
        return f"{self.distribution.requirement}:{manifest}"

    def locate(self, entry: ManifestEntry) -> Located | None:
        member = self._member(entry.path)
        if member in self.archive.refused:
            raise ManifestError(entry.where, f"{member}: {self.archive.refused[member]}")
        found = self.archive.entries.get(member)
        if found is None:
            return None
        fd, name = tempfile.mkstemp(dir=self.scratch, prefix="member-")
        with os.fdopen(fd, "wb") as out, self.archive.open(member, found.size) as stream:
            shutil.copyfileobj(stream, out, digests.CHUNK)
        return Located(Path(name), self.source(entry.path), f"{self.distribution.file}:{member}")

    def unlisted(self, listed: frozenset[str], manifest: str) -> list[str]:
        folders = {str(PurePosixPath(p).parent) for p in listed}
        prefix = f"{self.root.strip('/')}/" if self.root.strip("/") else ""
        out = []
        for name in self.archive.names():
            if not name.startswith(prefix) or name == manifest:
                continue
            rel = name[len(prefix) :]
            parent = str(PurePosixPath(rel).parent)
            if parent in folders and rel not in listed and not _sidecar(PurePosixPath(rel).name):
                out.append(rel)
        return sorted(out)

    def source(self, path: str) -> Source:
        d = self.distribution
        return PackageSource(d.requirement, d.file, d.file_digest, self._member(path), d.file_size)


@functools.cache
def _folder(root: Path, project: Path) -> str:
    """``root`` relative to ``project``, as POSIX (asked once per listed file)."""
    return root.absolute().relative_to(project.absolute()).as_posix()


def _text(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(shown, f"not UTF-8 text: {e}") from e


def package_origin(
    store: Store, project: Path, distribution: PackageSource, root: str, scratch: Path
) -> PackageOrigin:
    """The origin of files inside ``distribution``, fetched (or found in the store) and checked
    against its pinned digest first."""
    from fixture_store.sources import package

    probe = Record(
        f"package/{distribution.name_and_version[0].lower()}", Kind.FIXTURE, distribution
    )
    archive = package.ensure_distribution(FetchContext(store, project), probe)
    return PackageOrigin(distribution, archive, root, scratch)


def _sidecar(name: str) -> bool:
    """Files a manifest's own tool writes beside the data: never orphans."""
    return name.endswith(".dvc") or name in (".gitignore", "dvc.lock", "dvc.yaml")


@dataclass(frozen=True)
class Accepted:
    """A listed file whose bytes matched every digest the manifest states."""

    entry: ManifestEntry
    digest: Digest
    located: Located


@dataclass(frozen=True)
class Mismatch:
    """A listed file whose bytes do not match the manifest."""

    entry: ManifestEntry
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.entry.path, "where": self.entry.where, "reason": self.reason}


@dataclass(frozen=True)
class Unverified:
    """A file found but not imported: its bytes cannot be checked, or cannot have the source its
    record would name (a folder import says which, and why)."""

    path: str  # as found
    where: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "where": self.where, "reason": self.reason}


@dataclass(frozen=True)
class Plan:
    """What an import would do, before it does anything."""

    format: str
    manifest: str  # as records name it (see Origin.name)
    accepted: tuple[Accepted, ...]
    absent: tuple[ManifestEntry, ...]
    mismatched: tuple[Mismatch, ...]
    orphans: tuple[str, ...]
    unverified: tuple[Unverified, ...] = ()
    # Entries that cannot be registered (a path that is no name, one listed twice), each with
    # its reason; a refusal while its record is built joins them (see register.prepare).
    refused: tuple[Refused, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "manifest": self.manifest,
            "accepted": [
                {"path": a.entry.path, "digest": a.digest.text, "size": a.digest.size}
                for a in self.accepted
            ],
            "absent": [e.path for e in self.absent],
            "mismatched": [m.to_json() for m in self.mismatched],
            "orphans": list(self.orphans),
            "unverified": [u.to_json() for u in self.unverified],
            "refused": [r.to_json() for r in self.refused],
            **report.fields_json(self.entries()),
        }

    def entries(self) -> tuple[ManifestEntry, ...]:
        """The entries an import registers or reports (accepted, then absent)."""
        return (*(a.entry for a in self.accepted), *self.absent)


def make_plan(
    fmt: str,
    manifest: str,
    entries: Iterable[ManifestEntry],
    origin: Origin,
    selection: held.Selection = held.EVERY,
) -> Plan:
    """Check the bytes of every entry ``selection`` keeps against the manifest; an entry whose
    path is no name is refused by itself, never looked up. Nothing is stored or registered."""
    entries = tuple(entries)
    accepted: list[Accepted] = []
    absent: list[ManifestEntry] = []
    mismatched: list[Mismatch] = []
    refused: list[Refused] = []
    for entry in entries:
        if not selection.keeps(entry.path):
            continue
        if entry.refused is not None:
            refused.append(Refused(entry.path, entry.where, entry.refused))
            continue
        located = origin.locate(entry)
        if located is None:
            absent.append(entry)
            continue
        outcome = check_bytes(entry, located)
        (accepted if isinstance(outcome, Accepted) else mismatched).append(outcome)  # type: ignore[arg-type]
    # A list of downloads (TFDS) says nothing of the files beside it: no orphans.
    listed = frozenset(e.path for e in entries if e.refused is None)
    orphans = (
        []
        if fmt in DOWNLOAD_LISTS
        else [o for o in origin.unlisted(listed, manifest) if selection.keeps(o)]
    )
    return Plan(
        fmt,
        origin.name(manifest),
        tuple(accepted),
        tuple(absent),
        tuple(mismatched),
        tuple(orphans),
        refused=tuple(refused),
    )


def check_bytes(entry: ManifestEntry, located: Located) -> Accepted | Mismatch:
    """Stream the file once through SHA-256 and every stated hash; compare each."""
    sha = digests.Hasher()
    # SHA-256 is hashed once, by the identity hasher; every other stated hash beside it.
    others = [(d, d.hasher()) for d in entry.digests if d.algorithm != "sha256"]
    for chunk in _chunks(located.path):
        sha.update(chunk)
        for _, h in others:
            h.update(chunk)
    digest = sha.digest()
    actual = {"sha256": digest.hex, **{d.algorithm: h.hexdigest() for d, h in others}}
    for expected in entry.digests:
        if actual[expected.algorithm] != expected.hex:
            return Mismatch(
                entry,
                f"{expected.algorithm} of the bytes is {actual[expected.algorithm]}, the "
                f"manifest says {expected.hex}",
            )
    if entry.size is not None and entry.size != digest.size:
        return Mismatch(entry, f"the file has {digest.size} bytes, the manifest says {entry.size}")
    return Accepted(entry, digest, located)


def _chunks(path: Path) -> Iterator[memoryview]:
    """The file's bytes in large reads into one reused buffer: each chunk is valid until the
    next is asked for."""
    with open(path, "rb", buffering=0) as f:
        view = digests.read_buffer()
        while n := f.readinto(view):
            yield view[:n]
