"""``import --package NAME==VERSION`` with no manifest: the installed distribution's own
``RECORD`` (read with :mod:`importlib.metadata`) is the manifest of every file it installed,
each with its SHA-256.

The records get package sources pinned at that version: the wheel's file name is read from the
installed ``WHEEL`` tags (or ``--dist``), its SHA-256 from ``--dist-digest`` or, offline, from
the project's ``uv.lock``, which lists each locked wheel with its hash and size. A version other
than the one installed is refused. The installed bytes are checked against ``RECORD`` as any
manifest's are; rows that cannot be a package source are named, not imported: a row without a
hash (bytecode the installer compiled), a file the installer wrote (``INSTALLER``,
``direct_url.json``, ...: not in the wheel) and a file installed outside the distribution's
folder (a script in ``bin/``). ``--include GLOB`` keeps the rows whose path matches.
"""

from __future__ import annotations

import csv
import dataclasses
import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from fixture_store.errors import UsageError
from fixture_store.importers import held, wheelrecord
from fixture_store.importers.entry import ManifestEntry
from fixture_store.importers.plan import Located, Plan, Unverified, make_plan
from fixture_store.objects.anchored import Folder
from fixture_store.registry import PackageSource, Where
from fixture_store.registry.sources import PIN

FORMAT = "installed"
# Files an installer writes into the .dist-info folder: they are not in the wheel.
INSTALLER_FILES = frozenset(
    {"INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json", "uv_build.json"}
)
LOCK_FILE = "uv.lock"


@dataclass(frozen=True)
class InstalledOrigin:
    """The files of an installed distribution, read below its folder (site-packages)."""

    distribution: PackageSource
    base: Path
    scratch: Path

    def manifest(self, _path: str) -> tuple[str, str]:
        raise NotImplementedError  # the RECORD is read by importlib.metadata

    def name(self, manifest: str) -> str:
        return f"{self.distribution.requirement}:{manifest}"

    def locate(self, entry: ManifestEntry) -> Located | None:
        with Folder.root(self.base, refuse=held.refusal) as folder:
            copied = held.copy_in(folder, entry.path.split("/"), self.scratch)
        shown = str(self.base / entry.path)  # the installed file, not its copy
        return None if copied is None else Located(copied, self.source(entry.path), shown)

    def unlisted(self, _listed: frozenset[str], _manifest: str) -> list[str]:
        return []

    def source(self, path: str) -> PackageSource:
        return dataclasses.replace(self.distribution, path=path)


def plan(requirement: str, options: held.Options) -> tuple[Plan, InstalledOrigin]:
    """The plan of importing the installed files of ``requirement`` (``NAME==VERSION``)."""
    dist = installed(requirement)
    text = dist.read_text(wheelrecord.NAME)
    info = _dist_info(dist)
    if text is None or info is None:
        raise UsageError(
            f"{requirement} is installed without a RECORD (an egg or a development install): "
            "no manifest of its files",
            fix=f"pip install --force-reinstall {requirement}  (from a wheel), then import again",
        )
    manifest = f"{info}/{wheelrecord.NAME}"
    source = pinned(dist, requirement, info, options)
    entries, unverified = _rows(text, manifest, options.include)
    origin = InstalledOrigin(source, Path(str(dist.locate_file(""))), options.scratch)
    done = make_plan(FORMAT, manifest, entries, origin)
    return dataclasses.replace(done, unverified=tuple(unverified)), origin


def installed(requirement: str) -> metadata.Distribution:
    """The installed distribution of ``NAME==VERSION``, refused at another version."""
    if PIN.fullmatch(requirement) is None:
        raise UsageError(
            f"--package {requirement!r} is not an exact pin", fix="write --package NAME==VERSION"
        )
    name, _, version = requirement.partition("==")
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise UsageError(
            f"{name} is not installed in this environment, so it has no RECORD to import",
            fix=f"pip install {requirement}  (or uv add {requirement}), then import again",
        ) from None
    if dist.version != version:
        raise UsageError(
            f"{name} {dist.version} is installed, not {version}: its RECORD lists the files of "
            f"{dist.version}",
            fix=f"pip install {requirement}, or import --package {name}=={dist.version}",
        )
    return dist


def _dist_info(dist: metadata.Distribution) -> str | None:
    """The ``.dist-info`` folder, relative to the folder the distribution is installed in:
    RECORD's own row, else the folder importlib.metadata read it from."""
    for f in dist.files or ():
        path = PurePosixPath(f.as_posix())
        if path.name == wheelrecord.NAME and path.parent.name.endswith(wheelrecord.DIST_INFO):
            return str(path.parent)
    found = getattr(dist, "_path", None)  # a PathDistribution's folder (no public name)
    if isinstance(found, Path) and found.name.endswith(wheelrecord.DIST_INFO):
        return found.name
    return None


def _rows(
    text: str, manifest: str, include: tuple[str, ...]
) -> tuple[list[ManifestEntry], list[Unverified]]:
    entries: list[ManifestEntry] = []
    unverified: list[Unverified] = []
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or row[0] == manifest or not held.included(row[0], include):
            continue
        where = f"{manifest} line {number}"
        reason = _not_in_wheel(row[0], manifest)
        if reason is None:
            entry = wheelrecord.row_entry(row, where)
            if entry is not None:
                entries.append(entry)
                continue
            reason = "RECORD states no hash for it (the installer wrote it)"
        unverified.append(Unverified(row[0], where, reason))
    return entries, unverified


def _not_in_wheel(path: str, manifest: str) -> str | None:
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts:
        return (
            "installed outside the distribution's folder (a script or data file): no path "
            "inside the wheel"
        )
    if PurePosixPath(path).parent == PurePosixPath(manifest).parent and parts[-1] in (
        INSTALLER_FILES
    ):
        return "written by the installer: not in the wheel"
    return None


def pinned(
    dist: metadata.Distribution, requirement: str, info: str, options: held.Options
) -> PackageSource:
    """The pinned distribution file: ``--dist`` or the wheel named by the installed tags, its
    digest from ``--dist-digest`` or the project's ``uv.lock``."""
    file = options.dist or wheel_name(dist, info)
    digest, size = options.dist_digest, None
    if digest is None:
        digest, size, file = _locked(options.project, file) or (None, None, file)
    if digest is None:
        raise UsageError(
            f"the SHA-256 of {file}, the distribution the records pin, is not known here "
            f"({LOCK_FILE} does not list it)",
            fix=f"pass --dist-digest sha256:HEX: pip download --no-deps {requirement}, then "
            f"sha256sum {file}",
        )
    source = PackageSource(requirement, file, digest, f"{info}/{wheelrecord.NAME}", size)
    source.check(Where("--package", None))
    return source


def recorded_sha256(requirement: str, path: str) -> str | None:
    """The SHA-256 hex the installed ``requirement``'s RECORD states for ``path`` (``None``:
    not installed at that version, or not listed with a hash)."""
    name, _, version = requirement.partition("==")
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    text = dist.read_text(wheelrecord.NAME) if dist.version == version else None
    for number, row in enumerate(csv.reader((text or "").splitlines()), start=1):
        if row and row[0] == path:
            entry = wheelrecord.row_entry(row, f"{requirement} RECORD line {number}")
            return entry.sha256 if entry is not None else None
    return None


def distribution_file(
    requirement: str, project: Path, dist: str | None, dist_digest: str | None
) -> tuple[str, str, int | None]:
    """(file, ``sha256:HEX``, size or ``None``) of the distribution that pins ``requirement``:
    as given, the rest from the installed distribution's tags and the project's ``uv.lock``
    (``add --source pypi:...`` without ``--dist``/``--dist-digest``)."""
    if dist is not None and dist_digest is not None:
        return dist, dist_digest, None
    dist_ = installed(requirement)
    info = _dist_info(dist_) or f"{requirement.replace('==', '-')}{wheelrecord.DIST_INFO}"
    options = held.Options(project, project, dist=dist, dist_digest=dist_digest)
    source = pinned(dist_, requirement, info, options)
    return source.file, source.file_digest, source.file_size


def wheel_name(dist: metadata.Distribution, info: str) -> str:
    """``NAME-VERSION-PY-ABI-PLATFORM.whl`` from the installed ``WHEEL`` file's tags, each
    part the tags' values joined by ``.`` as wheel names compress them."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [ln.split(":", 1)[1].strip() for ln in wheel.splitlines() if ln.startswith("Tag:")]
    if not tags:
        raise UsageError(
            f"{info} has no WHEEL tags, so the wheel it came from cannot be named",
            fix="pass --dist FILE (the distribution's file name) and --dist-digest sha256:HEX",
        )
    parts = [t.split("-") for t in tags]
    joined = [".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3)]
    return f"{info.removesuffix(wheelrecord.DIST_INFO)}-{'-'.join(joined)}.whl"


def _canon(file: str) -> str:
    return re.sub(r"[-_.]+", "_", file).lower()


def _locked(project: Path, file: str) -> tuple[str, int | None, str] | None:
    """(digest, size, file name) of ``file`` as the project's ``uv.lock`` lists it."""
    lock = project / LOCK_FILE
    try:
        doc = tomllib.loads(lock.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    for package in doc.get("package", ()):
        for wheel in package.get("wheels", ()) if isinstance(package, dict) else ():
            url, digest = wheel.get("url"), wheel.get("hash")
            if not (isinstance(url, str) and isinstance(digest, str)):
                continue
            name = url.rsplit("/", 1)[-1]
            if _canon(name) == _canon(file):
                size = wheel.get("size")
                return digest, size if isinstance(size, int) else None, name
    return None
