"""Per-tensor ranges and digests in a large safetensors record's ``arrays`` manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save

from fixture_store import ingest
from fixture_store import registry as registry_mod
from fixture_store.errors import InvalidRecordError
from fixture_store.objects.store import Store
from fixture_store.readers.safetensors import read_header
from fixture_store.readers.tensor_ranges import MIN_BYTES
from fixture_store.registry.files import write_family
from fixture_store.verify import verify_names

BIG: dict[str, np.ndarray[Any, Any]] = {
    "a": np.ones((512, MIN_BYTES // 2048), np.float32),  # 1 MiB: the file is past the threshold
    "b": np.linspace(0, 1, 1000, dtype=np.float64),
}


def _add(
    project: Path, store: Store, weights: dict[str, np.ndarray[Any, Any]], name: str = "ckpt/big"
) -> bytes:
    path = project / "model.safetensors"
    data = save(weights)
    path.write_bytes(data)
    ingest.add(store, registry_mod.load(project), path, name=name, kind="checkpoint")
    return data


def test_a_large_safetensors_record_carries_each_tensors_range_and_digest(
    project: Path, store: Store
) -> None:
    data = _add(project, store, BIG)
    record = registry_mod.load(project).get("ckpt/big")
    header = read_header(project / "model.safetensors")
    assert record.arrays is not None
    for name, info in header.tensors.items():
        spec = record.arrays[name]
        offset = header.data_offset + info.begin
        assert (spec["offset"], spec["length"]) == (offset, info.nbytes)
        assert spec["sha256"] == hashlib.sha256(data[offset : offset + info.nbytes]).hexdigest()
    assert verify_names(store, registry_mod.load(project), ["ckpt/big"], full=True)[0].ok


def test_a_small_safetensors_record_keeps_the_plain_manifest(project: Path, store: Store) -> None:
    _add(project, store, {"w": np.ones(4, np.float32)}, name="ckpt/small")
    arrays = registry_mod.load(project).get("ckpt/small").arrays
    assert arrays is not None and set(arrays["w"]) == {"dtype", "shape"}


def _rewrite(project: Path, tensor: str, **changed: object) -> None:
    registry = registry_mod.load(project)
    record = registry.get("ckpt/big")
    assert record.arrays is not None
    arrays = {k: dict(v) for k, v in record.arrays.items()}
    arrays[tensor].update(changed)
    write_family(registry, "ckpt", [dataclasses.replace(record, arrays=arrays)])


def test_full_verify_refuses_a_tensor_digest_the_object_does_not_have(
    project: Path, store: Store
) -> None:
    _add(project, store, BIG)
    _rewrite(project, "b", sha256="0" * 64)
    registry = registry_mod.load(project)
    result = verify_names(store, registry, ["ckpt/big"], full=True)[0]
    assert not result.ok
    assert "tensor-digest" in str(result.error) and "'b'" in str(result.error)


def test_verify_refuses_a_range_the_header_does_not_give(project: Path, store: Store) -> None:
    _add(project, store, BIG)
    record = registry_mod.load(project).get("ckpt/big")
    assert record.arrays is not None
    # a hand edit: the ranges no longer tile the data section after the header, so the record
    # is refused when the registry reads it (and never written by fixture-store itself)
    family = project / "provenance" / "ckpt.json"
    doc = json.loads(family.read_text())
    doc["records"]["ckpt/big"]["arrays"]["a"]["offset"] += 8
    family.write_text(json.dumps(doc))
    with pytest.raises(InvalidRecordError, match=r"arrays\.a\.offset"):
        registry_mod.load(project).get("ckpt/big")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"offset": 8}, "arrays.x"),  # a range without its length and digest
        ({"offset": -1, "length": 4, "sha256": "0" * 64}, "arrays.x.offset"),
        ({"offset": 8, "length": True, "sha256": "0" * 64}, "arrays.x.length"),
        ({"offset": 8, "length": 4, "sha256": "F" * 64}, "arrays.x.sha256"),
    ],
)
def test_a_malformed_range_is_refused_when_the_registry_is_read(
    project: Path, extra: dict[str, object], field: str
) -> None:
    raw = {
        "kind": "checkpoint",
        "source": {"type": "url", "url": "https://example.org/m.safetensors"},
        "digest": "sha256:" + "0" * 64,
        "size": 12,
        "media_type": "application/vnd.safetensors",
        "arrays": {"x": {"dtype": "float32", "shape": [1], **extra}},
    }
    from tests.support.fetchutil import make_registry

    with pytest.raises(InvalidRecordError, match=field.replace(".", r"\.")):
        make_registry(project, {"ckpt/x": raw}).get("ckpt/x")


def test_a_stated_tensor_digest_is_hashed_against_the_stored_bytes(
    project: Path, store: Store
) -> None:
    """Digests add takes from the stored bytes are not read twice; digests a caller states are."""
    from fixture_store.errors import UsageError
    from fixture_store.registry import Annotations

    path = project / "model.safetensors"
    path.write_bytes(save(BIG))
    ingest.add(store, registry_mod.load(project), path, name="ckpt/big", kind="checkpoint")
    taken = registry_mod.load(project).get("ckpt/big").arrays
    assert taken is not None
    lying = {n: {**dict(s), "sha256": "0" * 64} for n, s in taken.items()}
    with pytest.raises(UsageError, match="the arrays manifest given for ckpt/other is not what"):
        ingest.add(
            store,
            registry_mod.load(project),
            path,
            name="ckpt/other",
            kind="checkpoint",
            annotations=Annotations(arrays=lying),
        )
