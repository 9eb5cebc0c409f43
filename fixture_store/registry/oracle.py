"""An oracle: judge a candidate by the upstream's own error against a better computation.

``"oracle": {"record": "upstream/out_f64.npz", "metric": "max_abs", "factor": 2, "floor": 1e-7}``
in a tolerance says: for every array, ``error(candidate, oracle) <= factor * error(reference,
oracle) + floor``, the error measured by ``metric`` (one of :data:`METRICS`), where ``oracle`` is
the array of the same name in the record ``record`` (the upstream run in float64, say) and
``reference`` the registered one. FlashAttention's rule ("at most twice PyTorch's own error
against a float64 reference") is ``factor: 2``. ``floor`` (default 0) keeps an upstream that is
exact against the oracle from demanding exactness. The oracle judges beside the rule: both must
hold. It is a field of the record's rule (and of an ``expectations`` entry), not of a per-array one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fixture_store.registry.metrics import did_you_mean
from fixture_store.registry.where import Where

KEY = "oracle"
# The error metrics an oracle may compare by: what every comparison reports per array.
METRICS = ("max_abs", "mean_abs", "rms", "max_rel", "ulp", "cosine")
_FIELDS = ("record", "metric", "factor", "floor")


@dataclass(frozen=True)
class Oracle:
    record: str
    metric: str
    factor: float
    floor: float = 0.0

    @classmethod
    def from_json(cls, raw: Any, where: Where, field: str) -> Oracle:
        at = f"{field}.{KEY}"
        if not isinstance(raw, Mapping):
            raise where.fail(at, 'must be an object {"record", "metric", "factor"[, "floor"]}')
        unknown = sorted(set(raw) - set(_FIELDS), key=str)
        if unknown:
            raise where.fail(f"{at}.{unknown[0]}", f"unknown field; one of {list(_FIELDS)}")
        record = raw.get("record")
        if not isinstance(record, str) or not record:
            raise where.fail(f"{at}.record", "must name the registered record of the oracle")
        if raw.get("metric") not in METRICS:
            raise where.fail(
                f"{at}.metric",
                f"must be one of {METRICS}, not {raw.get('metric')!r}"
                + did_you_mean(raw.get("metric"), METRICS),
            )
        for key in ("factor", "floor"):
            if (key in raw or key == "factor") and not _finite(raw.get(key)):
                raise where.fail(f"{at}.{key}", "must be a finite, non-negative number")
        return cls(record, str(raw["metric"]), float(raw["factor"]), float(raw.get("floor", 0)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"record": self.record, "metric": self.metric, "factor": self.factor}
        if self.floor:
            out["floor"] = self.floor
        return out


def _finite(value: Any) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value >= 0
    )
