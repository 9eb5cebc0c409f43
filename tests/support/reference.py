"""Reference decoders for differential tests of the archive readers.

What ``zstd -dc``, ``lz4 -dc``, GNU ``tar``, ``bsdtar`` and ``unzip`` produce from an archive is
what the archive holds. :func:`differ` runs our reader first and the tools only when it ACCEPTED the
archive, so a hostile archive is never extracted by anything; each tool extracts into a fresh
folder and the two sides are compared as ``{member path: sha256 of the bytes}`` of regular files.

Directories are not members (a tree lists files only): the folders a tool creates, for an explicit
directory entry or as the parent of a file, are listed but not compared. Anything else a tool
creates (a symbolic link, a FIFO, a device) is a disagreement, as is a path one side has as a file
and the other does not.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_store.errors import FixtureStoreError
from fixture_store.limits import Limits
from fixture_store.objects.digests import Digest
from fixture_store.objects.store import Store
from fixture_store.readers import archives
from fixture_store.readers import npy as arrays

# The command each reference runner needs, and the Debian package that installs it.
PACKAGES = {
    "zstd": "zstd",
    "lz4": "lz4",
    "tar": "tar",
    "bsdtar": "libarchive-tools",
    "unzip": "unzip",
}
SUFFIX = {"tar": ".tar", "tar.lz4": ".tar.lz4", "tar.zst": ".tar.zst", "zip": ".zip"}
_TIMEOUT = 60
_ENV = {**os.environ, "LC_ALL": "C.UTF-8", "TZ": "UTC"}


APT_INSTALL = "apt-get update && apt-get install -y zstd lz4 libarchive-tools unzip"


def missing_tools() -> list[str]:
    """The reference tools this machine lacks, in the order of :data:`PACKAGES`."""
    return [tool for tool in PACKAGES if shutil.which(tool) is None]


def missing_message(missing: list[str]) -> str:
    """One sentence naming the missing tools and the command that installs all of them."""
    return (
        f"reference tools not installed: {', '.join(missing)}; the differential archive tests "
        f"need them: {APT_INSTALL}"
    )


def require(tool: str) -> str:
    """The path of a reference tool. A missing one fails the test in CI (``CI=true``) and skips it
    elsewhere, with one message for every such test (pytest's summary shows it once, counted),
    naming every missing tool and the apt-get command that installs them."""
    found = shutil.which(tool)
    if found is not None:
        return found
    message = missing_message(missing_tools())
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# -- what a folder holds -----------------------------------------------------------------------
@dataclass(frozen=True)
class Listing:
    files: dict[str, str]
    dirs: frozenset[str] = frozenset()
    others: dict[str, str] = field(default_factory=dict)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def listing(root: Path) -> Listing:
    """Regular files (hashed), directories and anything else under ``root``, never followed."""
    files: dict[str, str] = {}
    dirs: set[str] = set()
    others: dict[str, str] = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        # A tool may have restored a mode that a non-root user cannot read or enter.
        os.chmod(folder, 0o700)
        for entry in os.scandir(folder):
            rel = Path(entry.path).relative_to(root).as_posix()
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                dirs.add(rel)
                stack.append(Path(entry.path))
            elif stat.S_ISREG(st.st_mode):
                os.chmod(entry.path, 0o600)
                files[rel] = _sha256(Path(entry.path))
            elif stat.S_ISLNK(st.st_mode):
                others[rel] = f"symlink -> {os.readlink(entry.path)}"
            else:
                others[rel] = f"special file (mode {st.st_mode:o})"
    return Listing(files, frozenset(dirs), others)


def of_tree(tree: Mapping[str, Digest]) -> Listing:
    return Listing({path: digest.hex for path, digest in tree.items()})


# -- the reference runners ---------------------------------------------------------------------
@dataclass(frozen=True)
class Reference:
    """One tool's reading of an archive: its folder listing, or why it failed."""

    tool: str
    listing: Listing | None
    detail: str = ""


def _run(argv: list[str], *, stdout: Any = subprocess.DEVNULL) -> tuple[int, str]:
    code, _, err = _capture(argv, stdout=stdout)
    return code, err


def _capture(argv: list[str], *, stdout: Any = subprocess.PIPE) -> tuple[int, bytes, str]:
    """Run a reference tool: its exit status, its standard output (if piped), its errors."""
    require(argv[0])
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=_ENV,
            timeout=_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, b"", f"timed out after {_TIMEOUT} s"
    return done.returncode, done.stdout or b"", done.stderr.decode(errors="replace").strip()


def _extract_with(tool: str, argv: list[str], dest: Path) -> Reference:
    dest.mkdir()
    code, err = _run(argv)
    if code != 0:
        return Reference(tool, None, f"exit status {code}: {err}")
    return Reference(tool, listing(dest), err)


def _decode(fmt: str, archive: Path, out: Path) -> tuple[str, str | None]:
    """Decompress a .tar.zst/.tar.lz4 with its reference CLI; the error, if it fails."""
    tool = {"tar.zst": "zstd", "tar.lz4": "lz4"}[fmt]
    with open(out, "wb") as sink:
        code, err = _run([tool, "-d", "-c", "-q", str(archive)], stdout=sink)
    command = f"{tool} -dc"
    return command, (None if code == 0 else f"{command}: exit status {code}: {err}")


def gnu_tar(tar: Path, dest: Path, label: str = "tar -x") -> Reference:
    argv = ["tar", "-x", "-f", str(tar), "-C", str(dest)]
    return _extract_with(label, [*argv, "--no-same-owner", "--no-same-permissions"], dest)


def bsdtar(archive: Path, dest: Path) -> Reference:
    argv = ["bsdtar", "-x", "-f", str(archive), "-C", str(dest), "-o", "--no-same-permissions"]
    return _extract_with("bsdtar -x", argv, dest)


def unzip(archive: Path, dest: Path) -> Reference:
    return _extract_with("unzip", ["unzip", "-qq", "-o", str(archive), "-d", str(dest)], dest)


def references(fmt: str, archive: Path, work: Path) -> list[Reference]:
    """Every reference tool's reading of ``archive`` (only ever called on accepted archives).

    A compressed tar is decoded by its CLI and the result extracted by GNU tar, and separately
    extracted by bsdtar with its own (libarchive) decoder: two decoders, two tar readers.
    """
    work.mkdir(parents=True, exist_ok=True)
    if fmt == "zip":
        return [unzip(archive, work / "unzip"), bsdtar(archive, work / "bsdtar")]
    out: list[Reference] = []
    if fmt == "tar":
        out.append(gnu_tar(archive, work / "gnu-tar"))
    else:
        decoded = work / "decoded.tar"
        command, failed = _decode(fmt, archive, decoded)
        if failed is not None:
            out.append(Reference(command, None, failed))
        else:
            out.append(gnu_tar(decoded, work / "gnu-tar", f"{command} | tar -x"))
    out.append(bsdtar(archive, work / "bsdtar"))
    return out


# -- our side and the comparison ---------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """Our reader's answer and, when it accepted, every disagreement with a reference tool."""

    accepted: bool
    rule: str = ""
    disagreements: tuple[str, ...] = ()


def _describe(side: str, got: Listing) -> str:
    lines = [f"  {side}:"]
    lines += [f"    {path}  {sha[:16]}" for path, sha in sorted(got.files.items())]
    lines += [f"    {path}  ({what})" for path, what in sorted(got.others.items())]
    return "\n".join(lines)


def compare(label: str, ours: Listing, ref: Reference) -> str | None:
    """A description of the disagreement between our reading and one tool's, or None."""
    if ref.listing is None:
        return f"{label}: our reader accepted it, {ref.tool} failed: {ref.detail}\n" + _describe(
            "ours", ours
        )
    if ref.listing.files == ours.files and not ref.listing.others:
        return None
    theirs = ref.listing
    only_ours = sorted(set(ours.files) - set(theirs.files))
    only_theirs = sorted(set(theirs.files) - set(ours.files))
    changed = sorted(
        p for p in set(ours.files) & set(theirs.files) if ours.files[p] != theirs.files[p]
    )
    return (
        f"{label}: our reader and {ref.tool} disagree (only ours {only_ours}, only "
        f"{ref.tool} {only_theirs}, different bytes {changed}, other entries "
        f"{sorted(theirs.others)})\n"
        + _describe("ours", ours)
        + "\n"
        + _describe(ref.tool, theirs)
        + (f"\n  {ref.tool} said: {ref.detail}" if ref.detail else "")
    )


def _array_key(arr: np.ndarray[Any, Any]) -> tuple[str, tuple[int, ...], str]:
    return arr.dtype.str, arr.shape, hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def differ(
    fmt: str,
    data: bytes,
    limits: Limits,
    manifest: Mapping[str, Digest] | None = None,
    *,
    label: str = "archive",
    npz: bool = False,
) -> Verdict:
    """Run our reader on ``data``; when it accepts, every reference tool too, and compare.

    Accepted archives are also extracted by :func:`archives.extract`, whose folder must hold the
    same files as the scan. With ``npz``, whatever :func:`npy.read_npz` accepts (it may accept
    array names the scan refuses as paths) is compared with numpy reading the members as
    ``unzip -p`` pipes them (nothing is written).
    """
    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        work = Path(tmp)
        archive = work / f"input{SUFFIX[fmt]}"
        archive.write_bytes(data)
        problems: list[str] = []
        if npz and fmt == "zip":
            problems += _compare_npz(label, archive, limits)
        try:
            tree = archives.scan(archive, limits, manifest, artifact=label)
        except FixtureStoreError as e:
            return Verdict(False, getattr(e, "rule", type(e).__name__), tuple(problems))
        ours = of_tree(tree.members)
        store = Store.at(work / "store")
        folder = archives.extract(store, archive, tree, limits, artifact=label)
        problems += filter(None, [compare(label, ours, Reference("extract", listing(folder)))])
        refs = references(fmt, archive, work / "ref")
        problems += filter(None, (compare(label, ours, ref) for ref in refs))
        return Verdict(True, "", tuple(problems))


def _compare_npz(label: str, archive: Path, limits: Limits) -> list[str]:
    try:
        got = arrays.read_npz(archive, limits, artifact=label)
    except FixtureStoreError:
        return []  # refused: nothing is read
    mine = {name: _array_key(arr) for name, arr in got.items()}
    code, listed, err = _capture(["unzip", "-Z1", str(archive)])
    # Folder entries are not arrays (nor members): read_npz skips them, and so does this.
    entries = listed.decode(errors="surrogateescape").splitlines() if code == 0 else []
    names = sorted(n for n in entries if not n.endswith("/"))
    if code != 0 or names != sorted(f"{name}.npy" for name in got):
        return [f"{label}: read_npz read {sorted(got)}, unzip -Z1 lists {names} ({code}: {err})"]
    want: dict[str, tuple[str, tuple[int, ...], str]] = {}
    for name in got:
        # unzip takes member names as patterns: escape its wildcards.
        pattern = "".join(f"[{c}]" if c in "[*?" else c for c in f"{name}.npy")
        code, raw, err = _capture(["unzip", "-p", str(archive), pattern])
        if code != 0:
            return [f"{label}: read_npz accepted it, unzip -p {name}.npy failed ({code}: {err})"]
        want[name] = _array_key(np.load(io.BytesIO(raw), allow_pickle=False))
    if mine != want:
        return [f"{label}: read_npz and numpy on unzip -p disagree:\n  ours {mine}\n  numpy {want}"]
    return []


# -- tallies for the report --------------------------------------------------------------------
@dataclass
class Tally:
    """Counts per format: accepted and agreeing, refused (by rule), disagreeing."""

    agreed: dict[str, int] = field(default_factory=dict)
    refused: dict[str, dict[str, int]] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)

    def add(self, fmt: str, verdict: Verdict) -> None:
        self.disagreements.extend(verdict.disagreements)
        if not verdict.accepted:
            rules = self.refused.setdefault(fmt, {})
            rules[verdict.rule] = rules.get(verdict.rule, 0) + 1
        elif not verdict.disagreements:
            self.agreed[fmt] = self.agreed.get(fmt, 0) + 1

    def summary(self) -> str:
        fmts = sorted(set(self.agreed) | set(self.refused))
        parts = []
        for fmt in fmts:
            refused = self.refused.get(fmt, {})
            parts.append(
                f"{fmt}: {self.agreed.get(fmt, 0)} agree, {sum(refused.values())} refused "
                f"{dict(sorted(refused.items()))}"
            )
        return "; ".join(parts) + f"; {len(self.disagreements)} disagreements"


def npy_file(arr: np.ndarray[Any, Any]) -> bytes:
    """The bytes ``numpy.save`` writes for ``arr`` (what ``numpy.savez`` stores per member)."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()
