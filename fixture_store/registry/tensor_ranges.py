"""The optional byte range and digest of one entry of a record's ``arrays`` manifest.

A large safetensors reference records, per tensor, where its bytes are in the object
(``offset``, ``length``) and their sha256 (see :mod:`fixture_store.readers.tensor_ranges`): all
three together, or none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fixture_store.registry.where import Where

PLAIN_KEYS = frozenset({"dtype", "shape"})
RANGED_KEYS = PLAIN_KEYS | {"offset", "length", "sha256"}
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_entry_keys(spec: Mapping[str, Any], name: str, where: Where) -> None:
    """An entry is exactly {dtype, shape}, or {dtype, shape, offset, length, sha256} with a
    range of non-negative integers and a lowercase sha256 hex."""
    if set(spec) not in (PLAIN_KEYS, RANGED_KEYS):
        raise where.fail(
            f"arrays.{name}",
            "must be exactly {dtype, shape} or {dtype, shape, offset, length, sha256}",
        )
    if set(spec) == PLAIN_KEYS:
        return
    for key in ("offset", "length"):
        if not _is_count(spec[key]):
            raise where.fail(f"arrays.{name}.{key}", "must be a non-negative integer")
    if not isinstance(spec["sha256"], str) or not _HEX64.fullmatch(spec["sha256"]):
        raise where.fail(f"arrays.{name}.sha256", "must be 64 lowercase hex digits")
