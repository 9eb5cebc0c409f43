"""The digests of a new reference's array ranges, taken in the read that stores its bytes.

``add`` finds each array's range from the checked headers (:mod:`.tensor_ranges`,
:mod:`.array_ranges`) before any byte is stored, but does not read the ranges then: it hands a
:class:`RangeDigests` to the store, whose one hashing read of the bytes it publishes (the read
that proves their SHA-256, :mod:`fixture_store.objects.hashcopy`) passes every chunk to
:meth:`RangeDigests.update` as well. :meth:`RangeDigests.fill` then puts the digests into the
manifest. So the recorded digests are of the published bytes, the same bytes the record's
SHA-256 is of, and they cost no read of their own (they used to cost one of the file and, to
check them, one more of the stored object).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fixture_store.errors import UnsafeArrayError
from fixture_store.readers.tensor_ranges import CHUNK_BYTES, chunk_spans

_FIX = "add it again once nothing writes to it"


@dataclass
class _Span:
    name: str
    start: int
    end: int
    hasher: Any = field(default_factory=hashlib.sha256)


class RangeDigests:
    """Ranges of one file whose sha256 is wanted (whole, or in :data:`CHUNK_BYTES` chunks), fed
    the file's bytes in order by :meth:`update`."""

    def __init__(self, artifact: str) -> None:
        self.artifact = artifact
        self._spans: list[_Span] = []
        self._entries: dict[str, tuple[int, int, bool]] = {}
        self._pos = 0
        self._next = 0
        self._active: list[_Span] = []

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, name: str, offset: int, length: int, *, chunked: bool) -> dict[str, Any]:
        """Want the digest(s) of array ``name``'s ``length`` bytes at ``offset``; return the
        manifest keys known now (the range, and the chunk size)."""
        self._entries[name] = (offset, length, chunked)
        spans = chunk_spans(offset, length, CHUNK_BYTES) if chunked else [(offset, length)]
        self._spans.extend(_Span(name, at, at + size) for at, size in spans)
        self._spans.sort(key=lambda s: s.start)
        entry: dict[str, Any] = {"offset": offset, "length": length}
        return {**entry, "chunk": CHUNK_BYTES} if chunked else entry

    def update(self, chunk: memoryview | bytes) -> None:
        """The next bytes of the file."""
        start, end = self._pos, self._pos + len(chunk)
        while self._next < len(self._spans) and self._spans[self._next].start < end:
            self._active.append(self._spans[self._next])
            self._next += 1
        for span in self._active:
            lo, hi = max(span.start, start), min(span.end, end)
            if lo < hi:
                span.hasher.update(chunk[lo - start : hi - start])
        self._active = [s for s in self._active if s.end > end]
        self._pos = end

    def fill(self, manifest: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """``manifest`` with the digests of every range added: ``sha256``, or ``chunks``."""
        out = {name: dict(spec) for name, spec in manifest.items()}
        if self._spans and self._pos < max(s.end for s in self._spans):
            raise UnsafeArrayError(
                self.artifact,
                "tensor-range",
                f"the file ends at byte {self._pos}, before the ranges its headers give",
                fix=_FIX,
            )
        for name, (_offset, _length, chunked) in self._entries.items():
            digests = [s.hasher.hexdigest() for s in self._spans if s.name == name]
            out[name].update({"chunks": digests} if chunked else {"sha256": digests[0]})
        return out


__all__ = ["RangeDigests"]
