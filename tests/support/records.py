"""Small valid records for registry tests: a local fixture whose bytes are ``bytes {i}``."""

from __future__ import annotations

from typing import Any

from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.registry import Record


def local_record(
    name: str, i: int = 0, *, data: bytes | None = None, path: str | None = None, **fields: Any
) -> Record:
    """A local fixture record of ``data`` (default ``bytes {i}``) at ``path`` (default
    ``data/{i}.bin``), with any other record ``fields`` as given."""
    data = f"bytes {i}".encode() if data is None else data
    raw = {
        "kind": "fixture",
        "source": {"type": "local", "path": f"data/{i}.bin" if path is None else path},
        "digest": digests.of_bytes(data).text,
        "size": len(data),
        **fields,
    }
    return registry_mod.parse_record(name, raw, file="<test>")
