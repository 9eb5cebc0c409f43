"""Verified partial fetch: one tensor of a large safetensors, NPY or NPZ reference, or rows of
it, without the rest.

A record whose ``arrays`` manifest carries a tensor's ``offset``, ``length`` and ``sha256`` (or
the sha256 of each fixed ``chunk`` of it: an NPY; see :mod:`fixture_store.readers.tensor_ranges`)
lets a reader fetch exactly those bytes (the chunks that cover the rows asked for) from the
record's source and verify them alone:

- a ``url`` source: one HTTPS ``GET`` with ``Range: bytes=A-B``. Only a ``206 Partial Content``
  whose ``Content-Range`` is exactly that range of a file of the record's size is read, through the
  one bounded reader (at most the range's length and one byte, under the download policy). A
  server that ignores ``Range`` (``200`` with the whole body) is refused before its body is read:
  reading gigabytes to keep a few megabytes is what partial fetch exists to avoid, and the fix
  (``fixture-store fetch NAME``) fetches the whole object verified;
- a ``hub`` source: the Hub's metadata first, checked as a whole fetch checks it
  (:func:`~fixture_store.sources.hub.announced_problem`: the pinned commit, the size, the LFS
  sha256), then one ``GET`` of the range on the client's session, under the same rules;
- a ``local`` source: a ``pread`` of the range from the project's file.

The bytes must then hash to the tensor's sha256, or each chunk to its own (an
:class:`~fixture_store.errors.IntegrityError` naming the record, the tensor and the chunk
otherwise) before the array is made, and nothing is written to the store: partial bytes are
never an object, and the whole-object digest still governs every reader of the whole object.
The tensor's dtype and shape are the record's (held to the object's header by verification when
the record was made); the header is not fetched.
"""

from __future__ import annotations

import hashlib
import http.client
import math
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

from fixture_store import display
from fixture_store._extras import require
from fixture_store.errors import IntegrityError, UsageError
from fixture_store.registry import FORMAT_MEDIA_TYPES, HubSource, LocalSource, Record, UrlSource
from fixture_store.registry.pins import revision_problem
from fixture_store.sources import FetchContext, SourceError
from fixture_store.sources.transfer import (
    BelowMinimumRate,
    BodyCut,
    BoundedBody,
    Chunks,
    DeadlineExceeded,
)
from fixture_store.sources.url import TIMEOUT_S, SourceFailure, TransientError, default_opener

if TYPE_CHECKING:
    import numpy as np

    from fixture_store.readers.tensor_ranges import Plan

SAFETENSORS_MEDIA_TYPE = FORMAT_MEDIA_TYPES["safetensors"]
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def ranged(record: Record, key: str) -> Mapping[str, Any] | None:
    """The manifest entry of tensor ``key`` if it carries a range and digests, else None."""
    spec = (record.arrays or {}).get(key)
    return spec if spec is not None and "offset" in spec else None


def read_tensor(
    ctx: FetchContext, record: Record, key: str, rows: tuple[int, int] | None = None
) -> np.ndarray[Any, Any]:
    """Tensor ``key`` of ``record`` (or ``rows`` ``[start, stop)`` of its first axis), from its
    source's bytes of that tensor alone (of the chunks that cover those rows, where the record
    has chunk digests), each verified against its recorded digest; a read-only array. Nothing
    is stored."""
    import numpy as np

    from fixture_store.readers.tensor_ranges import plan_read, row_span

    spec = ranged(record, key)
    if spec is None:
        raise UsageError(
            f"{record.name}: tensor {key!r} has no byte range and digest in its record",
            fix=f"fixture-store fetch {record.name}  (the whole object)",
        )
    dtype = _dtype(record, key, spec)
    shape = tuple(spec["shape"])
    length = int(spec["length"])
    if dtype is None or dtype.itemsize * math.prod(shape) != length:
        raise IntegrityError(
            f"{record.name}: tensor {key!r}: the record's range of {length} bytes is not "
            f"shape {list(shape)} of {spec['dtype']}",
            fix=f"re-record {record.name} from its source (add --replace), then fetch again",
        )
    first, stop, out_shape = row_span(record.name, key, shape, dtype.itemsize, rows)
    data = b""
    if first < stop:
        plan = plan_read(spec, key, first, stop)
        data = _verified(record, plan, _source_bytes(ctx, record, key, plan.offset, plan.length))
    array = np.frombuffer(data, dtype).reshape(out_shape)
    array.flags.writeable = False
    return array


def _verified(record: Record, plan: Plan, fetched: bytes) -> bytes:
    """The bytes asked for, once every recorded digest the fetched range covers holds."""
    for piece in plan.pieces:
        part = fetched[piece.start : piece.start + piece.length]
        if hashlib.sha256(part).hexdigest() != piece.sha256:
            its = "chunk" if "chunk " in piece.what else "tensor"
            raise IntegrityError(
                f"{record.name}: {piece.what}: the {piece.length} bytes at "
                f"{plan.offset + piece.start} from {record.source.describe()} do not have the "
                f"{its}'s sha256 {piece.sha256}; nothing was kept",
                fix=f"fixture-store fetch {record.name}  (the whole object, verified by its "
                "digest)",
            )
    return fetched[plan.begin : plan.end]


def _dtype(record: Record, key: str, spec: Mapping[str, Any]) -> np.dtype[Any] | None:
    """The dtype of a manifest entry: a safetensors name, or an NPY/NPZ plain dtype."""
    from fixture_store.readers.npy import plain_dtype
    from fixture_store.readers.safetensors import DTYPES, numpy_dtype

    if record.media_type != SAFETENSORS_MEDIA_TYPE:
        return plain_dtype(spec["dtype"], artifact=record.name)
    dtype = numpy_dtype(spec["dtype"], artifact=record.name, tensor=key)
    return dtype if _known(spec["dtype"], DTYPES) else None


def _known(dtype: str, dtypes: Mapping[str, tuple[str, int]]) -> bool:
    return any(name == dtype for name, _size in dtypes.values())


def _source_bytes(ctx: FetchContext, record: Record, key: str, offset: int, length: int) -> bytes:
    source = record.source
    if isinstance(source, LocalSource):
        return _local(ctx, record, source, offset, length)
    if isinstance(source, UrlSource):
        ctx.require_online(record, f"tensor {key!r}")
        return _http(ctx, record, source.url, offset, length)
    if isinstance(source, HubSource):
        ctx.require_online(record, f"tensor {key!r}")
        return _hub(ctx, record, source, offset, length)
    raise UsageError(
        f"{record.name}: partial fetch reads url, hub and local sources; this record's source is "
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
            record.name, f"{display.url(url)}: {e}", fix=f"fixture-store fetch {record.name}"
        ) from e
    try:
        answer: Any = response  # an http.client response
        got_range = str(answer.headers.get("Content-Range") or "")
        _check_answer(record, url, getattr(answer, "status", None), got_range, offset, last)
        errors = (TimeoutError, OSError, http.client.HTTPException)
        meter = ctx.policy.meter()
        # not exact: a short body is read to its end and refused below as a short range
        body = BoundedBody(_read1(response), length, deadline, meter, errors=errors, exact=False)
        try:
            data = body.read_all()
        except (BodyCut, BelowMinimumRate, DeadlineExceeded) as e:
            raise SourceError(record.name, f"{display.url(url)}: the range's body: {e}") from e
    finally:
        response.close()
    return _counted(ctx, record, url, data, length)


def _counted(ctx: FetchContext, record: Record, where: str, data: bytes, length: int) -> bytes:
    if len(data) != length:  # a short range, or a longer body cut at one byte more
        raise IntegrityError(
            f"{record.name}: {where} sent {len(data)} bytes for a range of {length}",
            fix=f"fixture-store fetch {record.name}  (the whole object)",
        )
    ctx.count_download(len(data))
    return data


def _hub(ctx: FetchContext, record: Record, source: HubSource, offset: int, length: int) -> bytes:
    """The range from the Hub: its metadata first (the pinned commit, the record's size and LFS
    sha256, as a whole fetch checks them), then one GET of the range on the client's session."""
    require("hub", for_what="reading a tensor of a hub source")
    import httpx2 as httpx  # the HTTP client huggingface_hub is built on
    from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_url

    from fixture_store.sources.hub import announced_problem, download_headers, endpoint

    where = source.describe()
    if (problem := revision_problem(source.revision)) is not None:
        raise SourceError(record.name, f"{where}: revision is not a full commit ({problem})")
    url = hf_hub_url(
        source.repo_id,
        source.path,
        repo_type=source.resolved_repo_type,
        revision=source.revision,
        endpoint=endpoint(),
    )
    fix = f"fixture-store fetch {record.name}"
    try:
        meta = get_hf_file_metadata(url, timeout=constants.HF_HUB_ETAG_TIMEOUT, endpoint=endpoint())
    except Exception as e:
        raise SourceError(record.name, f"{where}: metadata request failed: {e}", fix=fix) from e
    problem = announced_problem(meta, source.revision, record.object.size, record.object.hex)
    if problem is not None:
        raise SourceError(record.name, f"{where}: {problem}", fix=fix)
    last = offset + length - 1
    headers = {**download_headers(url, meta.location), "Range": f"bytes={offset}-{last}"}
    deadline = ctx.policy.start(length, read_timeout=float(constants.HF_HUB_DOWNLOAD_TIMEOUT))
    try:
        with get_session().stream(
            "GET", meta.location, headers=headers, timeout=deadline.next_read_timeout()
        ) as response:
            response.raise_for_status()
            got_range = str(response.headers.get("Content-Range") or "")
            _check_answer(record, where, response.status_code, got_range, offset, last)
            chunks = Chunks(iter(response.iter_bytes()))
            meter = ctx.policy.meter()
            body = BoundedBody(chunks.read1, length, deadline, meter, errors=(), exact=False)
            data = body.read_all()
    except (httpx.HTTPError, BelowMinimumRate, DeadlineExceeded) as e:
        raise SourceError(record.name, f"{where}: the range request failed: {e}", fix=fix) from e
    return _counted(ctx, record, where, data, length)


def _read1(response: BinaryIO) -> Any:
    return getattr(response, "read1", None) or response.read


def _check_answer(  # noqa: PLR0917 - the answer's two headers and the range asked
    record: Record, url: str, status: int | None, got: str, first: int, last: int
) -> None:
    """A 206 whose Content-Range is exactly ``first-last`` of a file of the record's size."""
    asked = f"bytes {first}-{last}/{record.object.size}"
    if status != 206:  # noqa: PLR2004 - Partial Content
        raise IntegrityError(
            f"{record.name}: {display.url(url)} answered {status} to a range request for "
            f"{asked}, not 206 Partial Content (a server that ignores Range would send the whole "
            "file); nothing was read",
            fix=f"fixture-store fetch {record.name}  (the whole object, verified by its digest)",
        )
    got = got.strip()
    m = _CONTENT_RANGE.fullmatch(got)
    if m is None or (int(m[1]), int(m[2]), m[3]) != (first, last, str(record.object.size)):
        raise IntegrityError(
            f"{record.name}: {display.url(url)} answered the range request for {asked} with "
            f"Content-Range {got or '(none)'!r}",
            fix=f"fixture-store fetch {record.name}  (the whole object, verified by its digest)",
        )


__all__ = ["ranged", "read_tensor"]
