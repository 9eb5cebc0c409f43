"""Verified partial fetch: one tensor of a large safetensors reference over a loopback server."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save

from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import IntegrityError, MissingObjectError
from fixture_store.fetch import fetch_names
from fixture_store.objects.store import Store
from fixture_store.readers import content
from fixture_store.registry import Kind
from fixture_store.sources import OfflineError
from tests.support.fetchutil import make_registry, online_env  # noqa: F401 - autouse
from tests.support.served import https_server

WEIGHTS: dict[str, np.ndarray[Any, Any]] = {
    "big": np.arange(512 * 512, dtype=np.float32).reshape(512, 512),  # 1 MiB
    "small": np.linspace(-1, 1, 300, dtype=np.float64),
}

# The bytes before the data section: read first, verified by the record's header digest, to
# place a tensor's range before it is read.
HEADER = 8 + int.from_bytes(save(WEIGHTS)[:8], "little")


@dataclass
class Server:
    """What the loopback server does with a range request, and the bytes it sent."""

    body: bytes = b""
    mode: str = "honest"  # "ignore-range", "lying", "short", "wrong-range"
    sent: list[int] = field(default_factory=list)


@pytest.fixture
def https(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Server]]:
    server_state = Server()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data, mode = server_state.body, server_state.mode
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
            if m is not None and int(m[1]) == 0:  # the header, read first to place the tensor
                mode = "honest"
            if m is None or mode == "ignore-range":
                self._answer(200, data, {})
                return
            first, last = int(m[1]), int(m[2])
            part = data[first : last + 1]
            if mode == "lying":
                part = bytes([part[0] ^ 0xFF]) + part[1:]
            if mode == "wrong-range":  # another range of the file, said to be that one
                first, last = first + 4, last + 4
                part = data[first : last + 1]
            declared = len(part)
            if mode == "short":
                part = part[: len(part) // 2]
                declared = len(part)
            headers = {"Content-Range": f"bytes {first}-{last}/{len(data)}"}
            self._answer(206, part, headers, declared)

        def _answer(
            self, status: int, part: bytes, headers: dict[str, str], length: int | None = None
        ) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(part) if length is None else length))
            self.end_headers()
            # Counted before it is written: a client that has read the whole body may assert
            # on ``sent`` before this thread would get to count it after the write.
            at = len(server_state.sent)
            server_state.sent.append(len(part))
            try:
                self.wfile.write(part)
            except OSError:
                server_state.sent[at] = 0  # the client left before the body: nothing read

    with https_server(tmp_path, monkeypatch, Handler) as base:
        yield base, server_state


def _project(tmp_path: Path, source: dict[str, str]) -> tuple[Fixtures, bytes]:
    """A project whose one record is the big safetensors file behind ``source``."""
    data = save(WEIGHTS)
    file = tmp_path / "p" / "model.safetensors"
    file.parent.mkdir(parents=True)
    file.write_bytes(data)
    described = content.describe(file, kind=Kind.CHECKPOINT, array_name="model")
    raw = {
        "kind": "checkpoint",
        "source": source,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "media_type": described.media_type,
        "arrays": described.arrays,
        "header": described.header,
    }
    registry = make_registry(tmp_path / "p", {"ckpt/big": raw})
    return Fixtures(Store.at(tmp_path / "store"), registry), data


def test_one_tensor_is_read_by_its_range_alone_and_nothing_is_stored(
    https: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    got = fixtures.tensor("ckpt/big", "small")
    np.testing.assert_array_equal(got, WEIGHTS["small"])
    assert not got.flags.writeable
    assert server.sent == [HEADER, WEIGHTS["small"].nbytes]  # the tensor's bytes, not the file's
    record = fixtures.record("ckpt/big")
    assert not fixtures.store.has(record.object)  # partial bytes are never an object
    np.testing.assert_array_equal(fixtures.tensor("ckpt/big", "big"), WEIGHTS["big"])
    # every reader of the whole object still needs the whole object
    with pytest.raises(MissingObjectError):
        fixtures.tensors("ckpt/big")
    with pytest.raises(MissingObjectError):
        fixtures.path("ckpt/big")
    # once the object is fetched (whole, by its digest), a tensor comes from the store
    assert fetch_names(fixtures.store, fixtures.registry, ["ckpt/big"]).results[0].ok
    server.sent.clear()
    again = Fixtures(fixtures.store, fixtures.registry).tensor("ckpt/big", "small")
    np.testing.assert_array_equal(again, WEIGHTS["small"])
    assert server.sent == []


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("lying", r"tensor 'small'.*do not have the tensor's sha256"),
        ("short", r"sent \d+ bytes for a range of 2400"),
        ("wrong-range", r"Content-Range 'bytes \d+-\d+/\d+'"),
        ("ignore-range", r"answered 200 to a range request.*not 206"),
    ],
)
def test_a_hostile_or_careless_server_is_refused_naming_the_record(
    https: tuple[str, Server], tmp_path: Path, mode: str, said: str
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body, server.mode = data, mode
    with pytest.raises(IntegrityError, match=r"ckpt/big: .*" + said) as caught:
        fixtures.tensor("ckpt/big", "small")
    assert caught.value.fix is not None and "fixture-store fetch ckpt/big" in caught.value.fix
    assert not fixtures.store.has(fixtures.record("ckpt/big").object)


def test_a_tensor_digest_the_bytes_do_not_have_is_refused(
    https: tuple[str, Server], tmp_path: Path
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    # the source serves other bytes than were recorded: the same layout, other values
    other = save({"big": WEIGHTS["big"], "small": WEIGHTS["small"] + 1})
    assert len(other) == len(data)
    server.body = other
    with pytest.raises(IntegrityError, match=r"ckpt/big: tensor 'small'.*sha256"):
        fixtures.tensor("ckpt/big", "small")


def test_a_local_source_is_read_by_pread_and_verified(tmp_path: Path) -> None:
    fixtures, _data = _project(tmp_path, {"type": "local", "path": "model.safetensors"})
    np.testing.assert_array_equal(fixtures.tensor("ckpt/big", "small"), WEIGHTS["small"])
    file = tmp_path / "p" / "model.safetensors"
    damaged = bytearray(file.read_bytes())
    damaged[-1] ^= 0xFF  # the last byte belongs to the last tensor
    file.write_bytes(bytes(damaged))
    arrays = fixtures.record("ckpt/big").arrays
    assert arrays is not None
    header_last = max(WEIGHTS, key=lambda k: int(arrays[k]["offset"]))
    with pytest.raises(IntegrityError, match=rf"tensor '{header_last}'"):
        fixtures.tensor("ckpt/big", header_last)


def test_a_range_whose_length_is_not_shape_times_dtype_is_refused_naming_the_tensor(
    tmp_path: Path,
) -> None:
    """A record's range one element short of its tensor, with the digest of those bytes: it
    is refused naming the record and the tensor, not read and then left to
    end in a traceback when the bytes cannot take the tensor's shape."""
    fixtures, data = _project(tmp_path, {"type": "local", "path": "model.safetensors"})
    family = tmp_path / "p" / "provenance" / "ckpt.json"
    doc = json.loads(family.read_text())
    small = doc["records"]["ckpt/big"]["arrays"]["small"]
    small["length"] -= WEIGHTS["small"].itemsize
    start = small["offset"]
    small["sha256"] = hashlib.sha256(data[start : start + small["length"]]).hexdigest()
    # the ranges still tile the data section after the header (else the record is refused
    # when it is read): the next tensor begins those bytes earlier
    big = doc["records"]["ckpt/big"]["arrays"]["big"]
    big["offset"] -= WEIGHTS["small"].itemsize
    big["length"] += WEIGHTS["small"].itemsize
    family.write_text(json.dumps(doc, indent=2, sort_keys=True))
    fixtures = Fixtures(fixtures.store, registry_mod.load(tmp_path / "p"))
    with pytest.raises(IntegrityError, match=r"ckpt/big: tensor 'small': .* is not shape \[300\]"):
        fixtures.tensor("ckpt/big", "small")


def test_offline_reads_no_range(
    https: tuple[str, Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, server = https
    fixtures, data = _project(tmp_path, {"type": "url", "url": f"{base}/model.safetensors"})
    server.body = data
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="ckpt/big"):
        fixtures.tensor("ckpt/big", "small")
    assert server.sent == []
