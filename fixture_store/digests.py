"""SHA-256 + size: the identity of every object (DESIGN decision 1)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fixture_store.errors import DigestFormatError

PREFIX = "sha256:"
CHUNK = 1 << 20  # large reads: fewer syscalls, hashlib releases the GIL on big buffers
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, order=True)
class Digest:
    """``sha256:<64 lower-case hex>`` and the size in bytes, as one value."""

    hex: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.hex, str) or _HEX.fullmatch(self.hex) is None:
            raise DigestFormatError(
                f"not a SHA-256 hex digest: {self.hex!r} (need 64 lower-case hex characters)"
            )
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise DigestFormatError(f"size must be a non-negative integer, got {self.size!r}")

    @property
    def text(self) -> str:
        """The ``sha256:<hex>`` form used in records."""
        return PREFIX + self.hex

    @property
    def short(self) -> str:
        return self.hex[:12]

    def __str__(self) -> str:
        return f"{self.text} ({self.size} bytes)"


def parse_hex(text: object) -> str:
    """Validate ``sha256:<hex>`` and return the hex part.

    Upper-case hex is refused, not normalised: the registry is reviewed text and has one spelling
    for each digest, the same one Hub LFS oids and pip hashes use.
    """
    if not isinstance(text, str):
        raise DigestFormatError(f"a digest must be a string like 'sha256:<64 hex>', got {text!r}")
    if not text.startswith(PREFIX):
        algo, sep, _ = text.partition(":")
        if sep and algo.lower() != "sha256":
            raise DigestFormatError(f"unsupported digest algorithm {algo!r}: identity is sha256")
        raise DigestFormatError(f"digest {text!r} lacks the 'sha256:' prefix")
    hexpart = text[len(PREFIX) :]
    if len(hexpart) != 64:
        raise DigestFormatError(
            f"digest {text!r} has {len(hexpart)} hex characters, SHA-256 has 64"
        )
    if _HEX.fullmatch(hexpart) is None:
        if _HEX.fullmatch(hexpart.lower()) is not None:
            raise DigestFormatError(
                f"digest {text!r} is upper case; write it in lower case: "
                f"{PREFIX}{hexpart.lower()}"
            )
        raise DigestFormatError(f"digest {text!r} contains non-hex characters")
    return hexpart


def parse(text: object, size: object) -> Digest:
    """Build a Digest from its record fields, with a clear error for each malformed part."""
    hexpart = parse_hex(text)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise DigestFormatError(f"size must be a non-negative integer, got {size!r}")
    return Digest(hexpart, size)


class Hasher:
    """Incremental SHA-256 that also counts bytes."""

    __slots__ = ("_h", "size")

    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self.size = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._h.update(data)
        self.size += len(data)

    def digest(self) -> Digest:
        return Digest(self._h.hexdigest(), self.size)


def of_bytes(data: bytes | bytearray | memoryview) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest(), len(data))


def of_stream(stream: BinaryIO) -> Digest:
    """Hash a binary stream in constant memory."""
    h = Hasher()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = stream.readinto(view)  # type: ignore[attr-defined]
        if not n:
            break
        h.update(view[:n])
    return h.digest()


def of_file(path: str | Path) -> Digest:
    """Hash a file in constant memory with large unbuffered reads."""
    with open(path, "rb", buffering=0) as f:
        return of_stream(f)


def of_chunks(chunks: Iterable[bytes]) -> Digest:
    h = Hasher()
    for chunk in chunks:
        h.update(chunk)
    return h.digest()
