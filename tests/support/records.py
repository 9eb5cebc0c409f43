"""Small valid records for registry tests: a local fixture whose bytes are ``bytes {i}``."""

from __future__ import annotations

from fixture_store import registry as registry_mod
from fixture_store.objects import digests
from fixture_store.registry import Record


def local_record(name: str, i: int = 0) -> Record:
    data = f"bytes {i}".encode()
    raw = {
        "kind": "fixture",
        "source": {"type": "local", "path": f"data/{i}.bin"},
        "digest": digests.of_bytes(data).text,
        "size": len(data),
    }
    return registry_mod.parse_record(name, raw, file="<test>")
