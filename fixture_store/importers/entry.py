"""What every manifest format parses into: one frozen :class:`ManifestEntry` per listed file.

An entry carries the digests the manifest states (the bytes are checked against them, never
adopted), where in the manifest it was read (so a refusal names the line), and whatever the
manifest says about the file besides its identity (url, arrays, tolerance, upstream, ...).

Every manifest is read under the bounds registry files keep (:mod:`fixture_store.registry.nesting`):
:func:`read_manifest` takes only a regular file of at most :data:`MAX_MANIFEST_BYTES`,
:func:`load_json` parses JSON with integers of at most 20 digits, no ``NaN`` or ``Infinity``,
nesting of at most 64 levels and text UTF-8 can hold, and an entry checks every value it carries
the same way, whatever format it came from, so a refusal names the manifest and the entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from fixture_store import bounded_json
from fixture_store.errors import RegistryError, UsageError
from fixture_store.importers.fields import Mapped
from fixture_store.objects import digests, names
from fixture_store.objects.trees import TreePathError, check_member_path
from fixture_store.registry import nesting
from fixture_store.registry import upstream as upstream_mod
from fixture_store.registry.frozen import freeze, thaw
from fixture_store.registry.where import Where

# A manifest lists files, a line or an entry each: 64 MiB lists hundreds of thousands. More is
# not a manifest, and would be read into memory whole.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024

# Hex length of each algorithm a manifest may state. SHA-256 is the identity; md5 and sha1 are
# weak (collisions are practical): one policy for every format (DVC, pooch, md5sum, a Hub
# cache's git blob id). They check bytes that are present, beside the SHA-256 computed from the
# same bytes, which is what gets recorded; a file absent with only a weak digest is a gap marked
# weak (see :func:`weak_only`).
HEX_LENGTHS: Mapping[str, int] = {
    "sha256": 64,
    "sha384": 96,
    "sha512": 128,
    "sha3_256": 64,
    "sha3_512": 128,
    "blake2b": 128,
    "blake2s": 64,
    "md5": 32,
    "sha1": 40,
}
WEAK = digests.WEAK  # the one set of weak algorithms, the registry's too
_HEX = re.compile(r"[0-9a-f]+")


class ManifestError(UsageError):
    """A manifest (or one of its lines) is malformed or hostile; nothing was imported."""

    def __init__(self, where: str, message: str, *, fix: str | None = None) -> None:
        # A manifest is reviewed text, as a registry file is: editing it is the repair.
        fix = fix or "fix the manifest where named (or import another one), then import again"
        super().__init__(f"{where}: {message}", fix=fix)
        self.where = where


@dataclass(frozen=True, slots=True)
class ExpectedDigest:
    """A digest as a manifest states it: the algorithm (a hashlib name) and lower-case hex."""

    algorithm: str
    hex: str

    @classmethod
    def parse(cls, algorithm: str, text: str, where: str, *, weak_ok: bool = True) -> Self:
        """Check the hex against its algorithm; a ManifestError names ``where`` otherwise.
        md5 and sha1 are read like any other (they check the bytes; SHA-256 is what a record
        keeps); ``weak_ok=False`` refuses them where a digest must pin bytes on its own."""
        # Lower case, as pooch and sha256sum --check compare: the spelling is not the digest.
        algorithm, text = algorithm.lower(), text.lower()
        length = HEX_LENGTHS.get(algorithm)
        if algorithm in WEAK and not weak_ok:
            raise ManifestError(
                where,
                f"{algorithm} cannot vouch for bytes (collisions are practical): nothing is "
                "trusted on an md5 or sha1 alone",
                fix="list the file's sha256 instead (pooch.make_registry, sha256sum)",
            )
        if length is None:
            known = ", ".join(sorted(HEX_LENGTHS))
            raise ManifestError(
                where,
                f"unsupported digest algorithm {algorithm!r}",
                fix=f"state the file's sha256 (one of: {known})",
            )
        if _HEX.fullmatch(text) is None:
            raise ManifestError(where, f"{algorithm} digest {text!r} contains non-hex characters")
        if len(text) != length:
            raise ManifestError(
                where,
                f"{algorithm} digest {text!r} has {len(text)} hex characters, {algorithm} has "
                f"{length}",
            )
        return cls(algorithm, text)

    def hasher(self) -> Any:
        # md5 is DVC's content address, never a security claim of ours.
        return hashlib.new(self.algorithm, usedforsecurity=self.algorithm not in WEAK)

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hex}"


@dataclass(frozen=True)
class Refused:
    """A listed entry that cannot be registered, and why (DESIGN 20): it is reported by itself,
    and its neighbours are judged on their own (``--strict`` makes any refusal fatal)."""

    path: str  # as listed
    where: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "where": self.where, "reason": self.reason}

    def __str__(self) -> str:
        named = repr(self.path)
        where = self.where if self.where.endswith(named) else f"{self.where}: {named}"
        return f"{where}: {self.reason}"  # a JSON manifest's place names the entry already


_EMPTY: Mapping[str, Any] = freeze({})


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One file a manifest lists: its path (a name of the one grammar, in NFC), the digests the
    bytes must have, and what else the manifest says about it. ``where`` is the manifest and
    line it came from. A path outside the grammar does not refuse the manifest: the entry
    carries the reason (``refused``) and its path as listed, and is never looked up."""

    path: str
    digests: tuple[ExpectedDigest, ...]
    where: str
    size: int | None = None
    url: str | None = None
    arrays: Mapping[str, Any] | None = None
    # A number (mean absolute error) or a metric object, as written; see register._tolerance.
    tolerance: float | Mapping[str, Any] | None = None
    # The pinned upstreams (parsed and checked when the manifest is read), and an upstream the
    # manifest states that is no pin (no revision), kept as written.
    upstream: tuple[upstream_mod.Upstream, ...] = ()
    stated_upstream: Any = None
    seed: int | None = None
    input_shape: tuple[int, ...] | None = None
    generator: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Another place that may hold the same bytes (a DVC cache object), read when the file itself
    # is absent and checked against the same digests.
    cached_at: str | None = None
    # Fields no table of :mod:`.fields` knows (JSON pointer -> value, verbatim) and the ones read
    # under another name; ``pointer`` is the entry's own (``None``: the format has no objects).
    unknown: Mapping[str, Any] = field(default_factory=dict)
    mapped: tuple[Mapped, ...] = ()
    pointer: str | None = None
    refused: str | None = None  # why its path is no name (then the path is as listed)

    def __post_init__(self) -> None:
        if self.refused is None:
            try:
                object.__setattr__(self, "path", str(names.parse(self.path)))
            except names.NameRefusedError as e:
                object.__setattr__(self, "refused", e.reason)
        if not self.digests:
            raise ManifestError(self.where, f"{self.path!r} has no digest")
        # Before anything is frozen (recursively): every value within the registry's bounds.
        # A line of a checksum list states nothing besides its digest: nothing to walk.
        stated = {k: v for k, v in self._stated().items() if v is not None and v != {}}
        if stated:
            check_values(stated, self.where)
            object.__setattr__(self, "arrays", freeze(self.arrays))
            object.__setattr__(self, "metadata", freeze(dict(self.metadata)))
            object.__setattr__(self, "tolerance", freeze(self.tolerance))
            object.__setattr__(self, "unknown", freeze(dict(self.unknown)))
            object.__setattr__(self, "stated_upstream", freeze(self.stated_upstream))
        else:
            object.__setattr__(self, "metadata", _EMPTY)
            object.__setattr__(self, "unknown", _EMPTY)

    def _stated(self) -> dict[str, Any]:
        """What the manifest states besides the digests, by field name."""
        return {
            "size": self.size,
            "url": self.url,
            "arrays": self.arrays,
            "tolerance": self.tolerance,
            "upstream": [up.to_json() for up in self.upstream] or None,
            "stated_upstream": self.stated_upstream,
            "seed": self.seed,
            "input_shape": self.input_shape,
            "generator": self.generator,
            "metadata": self.metadata,
            "cached_at": self.cached_at,
            "unknown": self.unknown,
        }

    @property
    def sha256(self) -> str | None:
        """The SHA-256 hex the manifest states, if it states one."""
        return next((d.hex for d in self.digests if d.algorithm == "sha256"), None)

    @property
    def weak_only(self) -> bool:
        """Whether every digest the manifest states is weak (md5, sha1): the bytes, when they
        come, are checked by it and their SHA-256 recorded; until then nothing pins them."""
        return all(d.algorithm in WEAK for d in self.digests)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Self:
        """The entry :meth:`to_json` printed (a plan saved for review, read back)."""
        where = str(raw.get("where", "<entry>"))
        try:
            digests = tuple(
                ExpectedDigest.parse(alg, hexpart, where, weak_ok=True)
                for alg, _, hexpart in (str(text).partition(":") for text in raw["digests"])
            )
            upstream = raw.get("upstream")
            pinned = upstream_mod.parse_list(upstream, Where(where)) if upstream else ()
            shape = raw.get("input_shape")
            return cls(
                raw["path"],
                digests,
                where,
                size=raw.get("size"),
                url=raw.get("url"),
                arrays=raw.get("arrays"),
                tolerance=raw.get("tolerance"),
                upstream=pinned,
                stated_upstream=raw.get("stated_upstream"),
                seed=raw.get("seed"),
                input_shape=tuple(shape) if shape is not None else None,
                generator=raw.get("generator"),
                metadata=raw.get("metadata") or {},
                cached_at=raw.get("cached_at"),
                unknown=raw.get("unknown") or {},
                mapped=tuple(
                    Mapped(m["field"], m["as"], m.get("note")) for m in raw.get("mapped") or ()
                ),
                pointer=raw.get("pointer"),
            )
        except RegistryError as e:
            raise ManifestError(where, f"not a manifest entry: {e.message}") from e
        except (KeyError, TypeError, ValueError) as e:
            raise ManifestError(where, f"not a manifest entry: {e!r}") from e

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "digests": [str(d) for d in self.digests],
            "where": self.where,
        }
        optional: dict[str, Any] = {
            "size": self.size,
            "url": self.url,
            "arrays": thaw(self.arrays),
            "tolerance": thaw(self.tolerance),
            "upstream": [up.to_json() for up in self.upstream] or None,
            "stated_upstream": thaw(self.stated_upstream),
            "seed": self.seed,
            "input_shape": list(self.input_shape) if self.input_shape is not None else None,
            "generator": self.generator,
            "metadata": thaw(self.metadata) or None,
            "cached_at": self.cached_at,
            "unknown": thaw(self.unknown) or None,
            "mapped": [m.to_json() for m in self.mapped] or None,
            "pointer": self.pointer,
        }
        out.update((k, v) for k, v in optional.items() if v is not None)
        return out


def check_values(values: Any, where: str) -> None:
    """Refuse a value past the registry's bounds (:func:`.nesting.first_flaw`), naming
    ``where`` (the manifest and entry) and the field inside it."""
    flaw = nesting.first_flaw(values)
    if flaw is not None:
        path, message = flaw
        raise ManifestError(
            where,
            f"field {nesting.field_name(path)!r}: {message}" if path else message,
            fix="fix that value in the manifest: registry values nest a few levels, hold "
            "integers of at most 20 digits, finite numbers and Unicode text",
        )


def read_manifest(path: str | os.PathLike[str], shown: str) -> bytes:
    """The bytes of the manifest at ``path``, refused unless it is a regular file of at most
    :data:`MAX_MANIFEST_BYTES` (a FIFO would block the import forever, ``/dev/zero`` never
    end). Opened without blocking and checked with ``fstat``: the check and the read are about
    the same file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ManifestError(shown, f"cannot read: {e.strerror}") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ManifestError(
            shown,
            "is not a regular file (a folder, FIFO, device or a link to one)",
            fix="name the manifest file itself",
        )
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_MANIFEST_BYTES + 1)
        except OSError as e:
            raise ManifestError(shown, f"cannot read: {e.strerror or e}") from e
    return check_size(data, shown)


def check_size(data: bytes, shown: str) -> bytes:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            shown,
            f"is larger than {MAX_MANIFEST_BYTES // (1024 * 1024)} MiB; a manifest lists files, "
            "it does not hold them",
            fix="split it, one manifest per folder, and import each",
        )
    return data


def load_json(
    text: str, shown: str, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
) -> Any:
    """The JSON document ``text`` (read from ``shown``) under the registry's bounds, every
    value of it checked; a ManifestError names the manifest, the line or the value's path."""
    try:
        doc, _ = nesting.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{shown} line {e.lineno}", f"not valid JSON: {e.msg}") from e
    except bounded_json.TooDeep:
        deep = nesting.first_too_deep(text) or ()
        too_deep = f"nested more than {nesting.MAX_DEPTH} levels deep"
        raise _flaw_error(shown, deep, too_deep) from None
    except bounded_json.TooLarge as e:
        raise ManifestError(shown, f"{e}: not read") from None
    except ValueError:  # an integer past Python's own 4,300 digits
        raise _flaw_error(shown, _huge_integer(text), _TOO_LONG) from None
    flaw = nesting.first_flaw(doc)
    if flaw is not None:
        raise _flaw_error(shown, *flaw)
    return doc


_TOO_LONG = (
    f"an integer with more than {nesting.MAX_INTEGER_DIGITS} digits; no registry value needs one"
)


class _Huge(int):
    """An integer literal past Python's digit limit, as :func:`_huge_integer` parses it."""


def _huge_integer(text: str) -> nesting.Path:
    """Where the first integer too long for Python to parse is, in JSON ``text`` it refused."""
    doc = bounded_json.loads(
        text,
        cap=nesting.TEXT_CAP,
        parse_int=lambda s: _Huge() if len(s) > nesting.MAX_INTEGER_DIGITS else 0,
    )
    return nesting.first_path(doc, lambda v: isinstance(v, _Huge)) or ()


def _flaw_error(shown: str, path: nesting.Path, message: str) -> ManifestError:
    field = nesting.field_name(path, keep=4)
    return ManifestError(
        f"{shown}: field {field!r}" if path else shown,
        message,
        fix="fix that value in the manifest: registry values nest a few levels, hold integers "
        "of at most 20 digits, finite numbers and Unicode text",
    )


def check_path(path: object, where: str) -> str:
    """``path`` if it is a safe relative POSIX path inside the manifest's root (no ``..``, not
    absolute, no backslash, no control characters); a ManifestError naming ``where`` otherwise."""
    try:
        return check_member_path(path)
    except TreePathError as e:
        raise ManifestError(
            where, e.message, fix="list files by their path relative to the manifest's root"
        ) from e


def refuse_duplicates(entries: Iterable[ManifestEntry]) -> tuple[ManifestEntry, ...]:
    """``entries`` (read once: a generator of a manifest's lines will do) as a tuple, each path
    listed again (or another spelling of it, in case or Unicode normalisation) refused by
    itself, naming the first place; the first is judged on its own."""
    seen: dict[str, ManifestEntry] = {}  # collision key -> the first entry of that name
    out = []
    for entry in entries:
        if entry.refused is None:
            first = seen.setdefault(names.key(entry.path), entry)
            if first is not entry:
                reason = (
                    f"is listed twice (first at {first.where})"
                    if first.path == entry.path
                    else f"{names.collision_reason(first.path)} (at {first.where})"
                )
                entry = dataclasses.replace(entry, refused=reason)  # noqa: PLW2901
        out.append(entry)
    return tuple(out)
