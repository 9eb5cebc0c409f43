"""The records of a family whose files the parsed-registry cache vouches for, each built from
its JSON when it is first asked for (see :mod:`.parsed_cache`).

A cache hit says the file's exact bytes parsed with every record valid, so loading it needs its
JSON and nothing else: building a :class:`~.records.Record` (with its source, digests and
member tree, about a dozen objects) is what the records' users pay, when they use them. The
names are the JSON's keys, so listing and selecting names, looking one record up or checking
that a name exists builds nothing else; ``values()`` and ``items()`` (what verify, sync and
collection walk) build every record still unbuilt in one pass, with the cyclic collector paused
as loading pauses it. A record that :func:`.parsed_cache.rebuild` cannot build is parsed, and a
record that would not parse (which a verdict never allows) raises its :class:`RegistryError`
when asked for, never a value.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any

from fixture_store.errors import RegistryError
from fixture_store.objects.gcpause import cyclic_gc_paused
from fixture_store.registry.parsed_cache import rebuild
from fixture_store.registry.records import Record, parse_record

_UNBUILT = object()


class LazyRecords(Mapping[str, Record]):
    """Records by name, in the order given (sorted by name, as a parse returns them): each
    either built already or the JSON a verdict vouches for; ``files``: the file each was read
    from (for the error of a record that does not parse)."""

    __slots__ = ("_built", "_complete", "_files", "_raw")

    def __init__(
        self, raw: dict[str, Any], built: dict[str, Record], files: dict[str, str]
    ) -> None:
        self._raw = raw  # every name, in order; its JSON (or _UNBUILT's place-holder if built)
        self._built = built
        self._files = files
        self._complete = False  # every record built, ``_built`` in the order of ``_raw``

    @classmethod
    def of_json(cls, raw: Mapping[str, Any], file: str) -> LazyRecords:
        """The records of one file, unbuilt."""
        return cls(dict(sorted(raw.items())), {}, dict.fromkeys(raw, file))

    @classmethod
    def combined(cls, parts: list[Mapping[str, Record]]) -> LazyRecords:
        """The records of several files (a sharded family's), some parsed, some unbuilt, as
        one mapping sorted by name (a name lives in one shard only)."""
        raw: dict[str, Any] = {}
        built: dict[str, Record] = {}
        files: dict[str, str] = {}
        for part in parts:
            if isinstance(part, LazyRecords):
                raw.update(part._raw)
                built.update(part._built)
                files.update(part._files)
            else:
                raw.update(dict.fromkeys(part, _UNBUILT))
                built.update(part)
        return cls(dict(sorted(raw.items())), built, files)  # names differ: never a JSON compared

    def __getitem__(self, name: str) -> Record:
        record = self._built.get(name)
        if record is None:
            record = self._built[name] = self._build(name, self._raw[name])
        return record

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"<{len(self._raw)} records, {len(self._built)} built>"

    def values(self) -> ValuesView[Record]:
        return self._every().values()

    def items(self) -> ItemsView[str, Record]:
        return self._every().items()

    def _every(self) -> dict[str, Record]:
        """Every record built, in order (one pass, the collector paused)."""
        if not self._complete:
            built = self._built
            with cyclic_gc_paused():
                self._built = {
                    name: built[name] if name in built else self._build(name, raw)
                    for name, raw in self._raw.items()
                }
            self._complete = True
        return self._built

    def _build(self, name: str, raw: Any) -> Record:
        """``rebuild``'s record, else the parser's (which raises if it does not parse)."""
        file = self._files[name]
        try:
            return rebuild(name, raw, file, parse_record)
        except RegistryError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return parse_record(name, raw, file=file)
