"""What every manifest format parses into: one frozen :class:`ManifestEntry` per listed file.

An entry carries the digests the manifest states (the bytes are checked against them, never
adopted), where in the manifest it was read (so a refusal names the line), and whatever the
manifest says about the file besides its identity (url, arrays, tolerance, upstream, ...).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from fixture_store.errors import UsageError
from fixture_store.objects.trees import TreePathError, check_member_path
from fixture_store.registry.frozen import freeze, thaw

# Hex length of each algorithm a manifest may state. SHA-256 is the identity; md5 is only ever
# DVC's own check, made before the SHA-256 of the same bytes is recorded.
HEX_LENGTHS: Mapping[str, int] = {
    "sha256": 64,
    "sha384": 96,
    "sha512": 128,
    "sha3_256": 64,
    "sha3_512": 128,
    "blake2b": 128,
    "blake2s": 64,
    "md5": 32,
}
WEAK = frozenset({"md5", "sha1"})
_HEX = re.compile(r"[0-9a-f]+")


class ManifestError(UsageError):
    """A manifest (or one of its lines) is malformed or hostile; nothing was imported."""

    def __init__(self, where: str, message: str, *, fix: str | None = None) -> None:
        super().__init__(f"{where}: {message}", fix=fix)
        self.where = where


@dataclass(frozen=True)
class ExpectedDigest:
    """A digest as a manifest states it: the algorithm (a hashlib name) and lower-case hex."""

    algorithm: str
    hex: str

    @classmethod
    def parse(cls, algorithm: str, text: str, where: str, *, weak_ok: bool = False) -> Self:
        """Check the hex against its algorithm; a ManifestError names ``where`` otherwise.
        ``weak_ok`` admits md5, for DVC's own check beside the SHA-256 computed from the bytes."""
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
class Upstream:
    """Where a fixture's reference implementation comes from, as the manifest writes it."""

    repository: str
    revision: str | None = None
    checkpoint: str | None = None

    @classmethod
    def from_json(cls, raw: Any, where: str) -> Self:
        if not isinstance(raw, Mapping) or not _text(raw.get("repository")):
            raise ManifestError(where, "upstream must be an object with a 'repository'")
        unknown = sorted(set(raw) - {"repository", "revision", "checkpoint"})
        if unknown:
            raise ManifestError(where, f"upstream has an unknown field {unknown[0]!r}")
        for key in ("revision", "checkpoint"):
            if key in raw and not _text(raw[key]):
                raise ManifestError(where, f"upstream.{key} must be a non-empty string")
        return cls(raw["repository"], raw.get("revision"), raw.get("checkpoint"))

    def to_json(self) -> dict[str, Any]:
        out = {"repository": self.repository}
        out.update(
            (k, v)
            for k, v in (("revision", self.revision), ("checkpoint", self.checkpoint))
            if v is not None
        )
        return out


@dataclass(frozen=True)
class ManifestEntry:
    """One file a manifest lists: its path (relative, checked), the digests the bytes must have,
    and what else the manifest says about it. ``where`` is the manifest and line it came from."""

    path: str
    digests: tuple[ExpectedDigest, ...]
    where: str
    size: int | None = None
    url: str | None = None
    arrays: Mapping[str, Any] | None = None
    # A number (mean absolute error) or a metric object, as written; see register._tolerance.
    tolerance: float | Mapping[str, Any] | None = None
    upstream: Upstream | None = None
    seed: int | None = None
    input_shape: tuple[int, ...] | None = None
    generator: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Another place that may hold the same bytes (a DVC cache object), read when the file itself
    # is absent and checked against the same digests.
    cached_at: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", check_path(self.path, self.where))
        if not self.digests:
            raise ManifestError(self.where, f"{self.path!r} has no digest")
        object.__setattr__(self, "arrays", freeze(self.arrays))
        object.__setattr__(self, "metadata", freeze(dict(self.metadata)))
        object.__setattr__(self, "tolerance", freeze(self.tolerance))

    @property
    def sha256(self) -> str | None:
        """The SHA-256 hex the manifest states, if it states one."""
        return next((d.hex for d in self.digests if d.algorithm == "sha256"), None)

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
            shape = raw.get("input_shape")
            return cls(
                raw["path"],
                digests,
                where,
                size=raw.get("size"),
                url=raw.get("url"),
                arrays=raw.get("arrays"),
                tolerance=raw.get("tolerance"),
                upstream=Upstream.from_json(upstream, where) if upstream is not None else None,
                seed=raw.get("seed"),
                input_shape=tuple(shape) if shape is not None else None,
                generator=raw.get("generator"),
                metadata=raw.get("metadata") or {},
                cached_at=raw.get("cached_at"),
            )
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
            "upstream": self.upstream.to_json() if self.upstream else None,
            "seed": self.seed,
            "input_shape": list(self.input_shape) if self.input_shape is not None else None,
            "generator": self.generator,
            "metadata": thaw(self.metadata) or None,
            "cached_at": self.cached_at,
        }
        out.update((k, v) for k, v in optional.items() if v is not None)
        return out


def check_path(path: object, where: str) -> str:
    """``path`` if it is a safe relative POSIX path inside the manifest's root (no ``..``, not
    absolute, no backslash, no control characters); a ManifestError naming ``where`` otherwise."""
    try:
        return check_member_path(path)
    except TreePathError as e:
        raise ManifestError(
            where, e.message, fix="list files by their path relative to the manifest's root"
        ) from e


def refuse_duplicates(entries: list[ManifestEntry]) -> tuple[ManifestEntry, ...]:
    """``entries`` as a tuple, refusing a path listed twice (naming both places)."""
    seen: dict[str, ManifestEntry] = {}
    for entry in entries:
        first = seen.setdefault(entry.path, entry)
        if first is not entry:
            raise ManifestError(
                entry.where, f"{entry.path!r} is listed twice (first at {first.where})"
            )
    return tuple(entries)


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
