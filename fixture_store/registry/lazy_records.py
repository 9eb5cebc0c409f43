"""The records of a family whose files the parsed-registry cache vouches for, each built from
its JSON when it is first asked for (see :mod:`.parsed_cache`).

A cache hit says the file's exact bytes parsed with every record valid, so loading it needs its
JSON and nothing else: building a :class:`~.records.Record` (with its source, digests and
member tree, about a dozen objects) is what the records' users pay, when they use them. The
names are the JSON's keys, so listing and selecting names, looking one record up or checking
that a name exists builds nothing else; ``values()`` and ``items()`` (what verify, sync and
collection walk) build every record still unbuilt in one pass, with the cyclic collector paused
as loading pauses it, and so does a walk that looks every name up in turn once it has built a
sixteenth of them one by one. A record that :func:`.parsed_cache.rebuild` cannot build is
parsed, and a record that would not parse (which a verdict never allows) raises its
:class:`RegistryError` when asked for, never a value.
"""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.registry.parsed_cache import rebuild
from fixture_store.registry.records import KINDS, Record, parse_record

_UNBUILT = object()
_KINDS = frozenset(KINDS)
# Records built one by one before the rest are built in one pass (and a sixteenth of them):
# a command that looks up every name in turn (sync's plan, fetch) would otherwise build them
# with the collector running, which walks the growing heap again and again (4 s at 10^5
# against 1 s in one pass).
_FEW = 64


class LazyRecords(Mapping[str, Record]):
    """Records by name, sorted (as a parse returns them): each built already (parsed from a
    file the cache did not vouch for) or the JSON a verdict vouches for, kept as each file's
    ``records`` object, in the order the files were read."""

    __slots__ = ("_built", "_complete", "_files", "_lock", "_parts", "_raw", "_singles")

    def __init__(self, parts: list[tuple[str, dict[str, Any]]], built: dict[str, Record]) -> None:
        raw: dict[str, Any] = dict.fromkeys(built, _UNBUILT)
        files: dict[str, str] = {}
        for file, records in parts:
            raw.update(records)
            files.update(dict.fromkeys(records, file))
        self._raw = dict(sorted(raw.items()))  # names differ: no two JSON values compared
        self._parts = parts
        self._files = files  # the file each record was read from, for its errors
        self._built = built
        self._complete = False  # every record built, ``_built`` in the order of ``_raw``
        self._singles = 0  # records built one by one
        # Building is under a lock (threads may share a registry): a record is built once, and
        # a lookup never reads a file's JSON that a pass building them all has let go.
        self._lock = threading.RLock()

    @classmethod
    def of_json(cls, raw: object, file: str) -> LazyRecords:
        """The records of one file, unbuilt: its ``records`` object, which this keeps (and
        empties once they are all built)."""
        if not isinstance(raw, dict):
            raise TypeError("a file's records are a JSON object")
        return cls([(file, raw)], {})

    @classmethod
    def combined(cls, parts: list[Mapping[str, Record]]) -> LazyRecords:
        """The records of several files (a sharded family's), some parsed, some unbuilt, as
        one mapping (a name lives in one shard only)."""
        unbuilt: list[tuple[str, dict[str, Any]]] = []
        built: dict[str, Record] = {}
        for part in parts:
            if isinstance(part, LazyRecords):
                unbuilt.extend(part._parts)
                built.update(part._built)
            else:
                built.update(part)
        return cls(unbuilt, built)

    def __getitem__(self, name: str) -> Record:
        record = self._built.get(name)
        if record is not None:
            return record
        with self._lock:
            record = self._built.get(name)
            if record is None:
                raw = self._raw[name]
                if self._singles >= max(_FEW, len(self._raw) // 16):
                    return self._every()[name]  # a walk by name: build the rest in one pass
                self._singles += 1
                record = self._built[name] = self._build(name, raw, self._files[name])
            return record

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"<{len(self._raw)} records, {len(self._built)} built>"

    def kinds(self) -> dict[str, str]:
        """Each name, in order, with its record's kind, building no record: an unbuilt one's
        kind is its JSON's (a verdict vouches the record parsed, so it is one of the kinds);
        a JSON whose kind is not one of them is built, which raises what its parse says."""
        out: dict[str, str] = {}
        built = self._built
        for name, raw in self._raw.items():
            record = built.get(name)
            kind = raw.get("kind") if record is None and isinstance(raw, dict) else None
            if kind not in _KINDS:
                kind = (record or self[name]).kind.value
            out[name] = kind
        return out

    def values(self) -> ValuesView[Record]:
        return self._every().values()

    def items(self) -> ItemsView[str, Record]:
        return self._every().items()

    def _every(self) -> dict[str, Record]:
        """Every record built, in order: one pass, the collector paused, file by file in the
        order they were read (their JSON lies together in memory: a fifth faster at 10^5
        than in the order of the names, which spreads over every shard), each file's JSON let
        go once its records are built (it takes as much memory as they do: holding both
        would double the peak)."""
        with self._lock:
            if not self._complete:
                self._build_every()
            return self._built

    def _build_every(self) -> None:
        built, raw_of = self._built, self._raw
        with cyclic_gc_paused():
            for file, records in self._parts:
                for name, raw in records.items():
                    if name not in built:
                        built[name] = self._build(name, raw, file)
                    raw_of[name] = _UNBUILT
                records.clear()
            self._built = {name: built[name] for name in raw_of}
        self._raw, self._parts, self._files = self._built, [], {}
        self._complete = True

    @staticmethod
    def _build(name: str, raw: Any, file: str) -> Record:
        """``rebuild``'s record, else the parser's (which raises if it does not parse)."""
        try:
            return rebuild(name, raw, file, parse_record)
        except RegistryError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return parse_record(name, raw, file=file)
