"""Verified partial fetch: one tensor of a large safetensors reference, without the rest.

A record whose ``arrays`` manifest carries a tensor's ``offset``, ``length`` and ``sha256`` (see
:mod:`fixture_store.readers.tensor_ranges`) lets a reader fetch exactly those bytes from the
record's source and verify them alone:

- a ``url`` source: one HTTPS ``GET`` with ``Range: bytes=A-B``. Only a ``206 Partial Content``
  whose ``Content-Range`` is exactly that range of a file of the record's size is read, through the
  one bounded reader (at most the range's length and one byte, under the download policy). A
  server that ignores ``Range`` (``200`` with the whole body) is refused before its body is read:
  reading gigabytes to keep a few megabytes is what partial fetch exists to avoid, and the fix
  (``fixture-store fetch NAME``) fetches the whole object verified;
- a ``local`` source: a ``pread`` of the range from the project's file.

The bytes must then hash to the tensor's sha256 (an :class:`~fixture_store.errors.IntegrityError`
naming the record and the tensor otherwise) before the array is made, and nothing is written to
the store: partial bytes are never an object, and the whole-object digest still governs every
reader of the whole object. The tensor's dtype and shape are the record's (held to the object's
header by verification when the record was made); the header is not fetched.
"""

from __future__ import annotations

import hashlib
import http.client
import math
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

from fixture_store.errors import IntegrityError, UsageError
from fixture_store.registry import LocalSource, Record, UrlSource
from fixture_store.sources import FetchContext, SourceError
from fixture_store.sources.transfer import BelowMinimumRate, BodyCut, BoundedBody, DeadlineExceeded
from fixture_store.sources.url import TIMEOUT_S, SourceFailure, TransientError, default_opener

if TYPE_CHECKING:
    import numpy as np

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def ranged(record: Record, key: str) -> Mapping[str, Any] | None:
    """The manifest entry of tensor ``key`` if it carries a range and digest, else None."""
    spec = (record.arrays or {}).get(key)
    return spec if spec is not None and "sha256" in spec else None


def read_tensor(ctx: FetchContext, record: Record, key: str) -> np.ndarray[Any, Any]:
    """Tensor ``key`` of ``record``, from its source's bytes of that tensor alone, verified
    against the tensor's digest; a read-only array. Nothing is stored."""
    import numpy as np

    from fixture_store.readers.safetensors import DTYPES, numpy_dtype

    spec = ranged(record, key)
    if spec is None:
        raise UsageError(
            f"{record.name}: tensor {key!r} has no byte range and digest in its record",
            fix=f"fixture-store fetch {record.name}  (the whole object)",
        )
    dtype = numpy_dtype(spec["dtype"], artifact=record.name, tensor=key)
    shape = tuple(spec["shape"])
    offset, length = int(spec["offset"]), int(spec["length"])
    if dtype.itemsize * math.prod(shape) != length or not _known(spec["dtype"], DTYPES):
        raise IntegrityError(
            f"{record.name}: tensor {key!r}: the record's range of {length} bytes is not "
            f"shape {list(shape)} of {spec['dtype']}",
            fix=f"re-record {record.name} from its source (add --replace), then fetch again",
        )
    data = _source_bytes(ctx, record, key, offset, length)
    if hashlib.sha256(data).hexdigest() != spec["sha256"]:
        raise IntegrityError(
            f"{record.name}: tensor {key!r}: the {length} bytes at {offset} from "
            f"{record.source.describe()} do not have the tensor's sha256 {spec['sha256']}; "
            "nothing was kept",
            fix=f"fixture-store fetch {record.name}  (the whole object, verified by its digest)",
        )
    array = np.frombuffer(data, dtype).reshape(shape)
    array.flags.writeable = False
    return array


def _known(dtype: str, dtypes: Mapping[str, tuple[str, int]]) -> bool:
    return any(name == dtype for name, _size in dtypes.values())


def _source_bytes(ctx: FetchContext, record: Record, key: str, offset: int, length: int) -> bytes:
    source = record.source
    if isinstance(source, LocalSource):
        return _local(ctx, record, source, offset, length)
    if isinstance(source, UrlSource):
        ctx.require_online(record, f"tensor {key!r}")
        return _http(ctx, record, source.url, offset, length)
    raise UsageError(
        f"{record.name}: partial fetch reads url and local sources; this record's source is "
        f"{source.describe()}",
        fix=f"fixture-store fetch {record.name}  (the whole object)",
    )


def _local(
    ctx: FetchContext, record: Record, source: LocalSource, offset: int, length: int
) -> bytes:
    from fixture_store.sources.local import resolve

    path = resolve(ctx.root, source.path, record)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise SourceError(
            record.name, f"local source {source.path!r}: {e.strerror}", fix="restore it"
        ) from e
    try:
        data = os.pread(fd, length, offset)
    finally:
        os.close(fd)
    if len(data) != length:
        raise IntegrityError(
            f"{record.name}: local source {source.path!r} ends before the tensor's range "
            f"({len(data)} of {length} bytes at {offset})",
            fix=f"restore {source.path} (git checkout / git lfs pull), then read it again",
        )
    return data


def _http(ctx: FetchContext, record: Record, url: str, offset: int, length: int) -> bytes:
    last = offset + length - 1
    deadline = ctx.policy.start(length, read_timeout=TIMEOUT_S)
    try:
        response = default_opener(url, deadline, headers={"Range": f"bytes={offset}-{last}"})
    except (SourceFailure, TransientError, DeadlineExceeded) as e:
        raise SourceError(
            record.name, f"{url}: {e}", fix=f"fixture-store fetch {record.name}"
        ) from e
    try:
        _check_answer(record, url, response, offset, last)
        errors = (TimeoutError, OSError, http.client.HTTPException)
        meter = ctx.policy.meter()
        # not exact: a short body is read to its end and refused below as a short range
        body = BoundedBody(_read1(response), length, deadline, meter, errors=errors, exact=False)
        try:
            data = body.read_all()
        except (BodyCut, BelowMinimumRate, DeadlineExceeded) as e:
            raise SourceError(record.name, f"{url}: the range's body: {e}") from e
    finally:
        response.close()
    if len(data) != length:  # a short range, or a longer body cut at one byte more
        raise IntegrityError(
            f"{record.name}: {url} sent {len(data)} bytes for a range of {length}",
            fix=f"fixture-store fetch {record.name}  (the whole object)",
        )
    ctx.count_download(len(data))
    return data


def _read1(response: BinaryIO) -> Any:
    return getattr(response, "read1", None) or response.read


def _check_answer(record: Record, url: str, response: Any, first: int, last: int) -> None:
    """A 206 whose Content-Range is exactly ``first-last`` of a file of the record's size."""
    status = getattr(response, "status", None)
    asked = f"bytes {first}-{last}/{record.object.size}"
    if status != 206:  # noqa: PLR2004 - Partial Content
        raise IntegrityError(
            f"{record.name}: {url} answered {status} to a range request for {asked}, not 206 "
            "Partial Content (a server that ignores Range would send the whole file); "
            "nothing was read",
            fix=f"fixture-store fetch {record.name}  (the whole object, verified by its digest)",
        )
    got = str(response.headers.get("Content-Range") or "").strip()
    m = _CONTENT_RANGE.fullmatch(got)
    if m is None or (int(m[1]), int(m[2]), m[3]) != (first, last, str(record.object.size)):
        raise IntegrityError(
            f"{record.name}: {url} answered the range request for {asked} with "
            f"Content-Range {got or '(none)'!r}",
            fix=f"fixture-store fetch {record.name}  (the whole object, verified by its digest)",
        )


__all__ = ["ranged", "read_tensor"]
