"""The evidence a calibrated rule carries: what was observed when its bounds were chosen.

``fixture-store tolerance suggest --accept`` writes it beside the bounds it proposed::

    "evidence": {
      "observed": {"rms": 1.2e-06, "max_abs": 3.1e-05},
      "runs": 3,
      "environments": ["device:cpu,runtime:numpy", "device:cuda,runtime:torch"],
      "margin": "2x the largest observed, rounded up to one significant digit, ..."
    }

``observed`` maps each metric to the largest error seen over the runs (and, for a record-wide
rule, over its arrays); ``runs`` is how many candidates were compared; ``environments`` where
they were computed, as the environment language writes it (empty: not stated); ``margin`` how
the bounds were derived from the observations. A reader keeps it as written; it judges nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store import bounded_json
from fixture_store.registry.where import Where

KEY = "evidence"
_FIELDS = ("observed", "runs", "environments", "margin")


@dataclass(frozen=True)
class Evidence:
    """The evidence as written (JSON text: the value stays hashable and prints back)."""

    written: str

    def to_json(self) -> Any:
        return bounded_json.loads(self.written)


def parse(raw: Mapping[str, Any], where: Where, field: str) -> Evidence | None:
    """A rule's ``evidence`` (``None`` when it has none), its fields checked."""
    if KEY not in raw:
        return None
    value, at = raw[KEY], f"{field}.{KEY}"
    if not isinstance(value, Mapping) or set(value) != set(_FIELDS):
        raise where.fail(at, f"must be an object of exactly {', '.join(_FIELDS)}")
    observed = value["observed"]
    if (
        not isinstance(observed, Mapping)
        or not observed
        or not all(_is_error(v) for v in observed.values())
    ):
        raise where.fail(f"{at}.observed", "must map each metric to the error observed (>= 0)")
    runs = value["runs"]
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise where.fail(f"{at}.runs", "must be the number of runs observed (at least 1)")
    envs = value["environments"]
    if not isinstance(envs, list) or not all(isinstance(e, str) and e for e in envs):
        raise where.fail(f"{at}.environments", "must be a list of environments (may be empty)")
    if not isinstance(value["margin"], str) or not value["margin"].strip():
        raise where.fail(f"{at}.margin", "must say how the bounds were derived")
    return Evidence(json.dumps(value, sort_keys=True))


def _is_error(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and value >= 0
        and math.isfinite(value)
    )
