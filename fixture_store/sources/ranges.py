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

The checks are this module's, one of each, whatever place the bytes come from: the answer is
the range asked (:func:`range_problem`), exactly its length (:func:`counted`), every recorded
digest (:func:`verified`). :mod:`fixture_store.remotes.ranges` asks the remotes first, as a fetch
does, and reads a Hub remote's range by :func:`hub_range` and an https mirror's by
:func:`http_range`, the sources' own.
"""

from __future__ import annotations

import hashlib
import http.client
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from fixture_store import display
from fixture_store._extras import require
from fixture_store.errors import IntegrityError, UsageError
from fixture_store.objects import names
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
HEADER_PART = "the header"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True)
class Span:
    """What a partial fetch reads and verifies, whatever the format calls it: ``plan.length``
    bytes at ``plan.offset`` of a record's object, and the recorded digests they must satisfy
    (:class:`~fixture_store.readers.tensor_ranges.Plan`: one sha256 of a safetensors tensor or
    an NPZ member, the sha256 of each chunk of an NPY that the rows asked for cover).

    ``part`` is how messages name it (``tensor 'w'``). Wherever the bytes come from (the
    record's source here, a remote in :mod:`fixture_store.remotes.ranges`), they pass the same
    checks: the answer is the range asked (:func:`range_problem`), exactly ``length`` bytes
    (:func:`counted`), every recorded digest (:func:`verified`)."""

    record: Record
    part: str
    plan: Plan

    @property
    def offset(self) -> int:
        return self.plan.offset

    @property
    def length(self) -> int:
        return self.plan.length

    @property
    def last(self) -> int:
        return self.plan.offset + self.plan.length - 1

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def whole_fix(self) -> str:
        return (
            f"fixture-store fetch {names.shell(self.name)}  (the whole object, verified by its "
            "digest)"
        )


def ranged(record: Record, key: str) -> Mapping[str, Any] | None:
    """The manifest entry of tensor ``key`` if it carries a range and digests, else None."""
    spec = (record.arrays or {}).get(key)
    return spec if spec is not None and "offset" in spec else None


def tensor_span(
    record: Record, key: str, rows: tuple[int, int] | None = None
) -> tuple[Span | None, np.dtype[Any], tuple[int, ...]]:
    """What to read of tensor ``key`` of ``record`` (or of ``rows`` ``[start, stop)`` of its
    first axis; ``None``: nothing, no rows), with the dtype and shape of the array it makes; a
    :class:`UsageError` if the record carries no range and digest for it, an
    :class:`IntegrityError` if the range cannot be that tensor."""
    from fixture_store.readers.tensor_ranges import plan_read, row_span

    spec = ranged(record, key)
    if spec is None:
        raise UsageError(
            f"{record.name}: tensor {key!r} has no byte range and digest in its record",
            fix=f"fixture-store fetch {names.shell(record.name)}  (the whole object)",
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
    if first >= stop:
        return None, dtype, out_shape
    return Span(record, f"tensor {key!r}", plan_read(spec, key, first, stop)), dtype, out_shape


def header_span(record: Record) -> Span | None:
    """What to read to place a safetensors record's ranges: the bytes before its data section,
    of the record's ``header`` length and sha256 (``None``: the record carries none; only a
    ranged safetensors record does, and it must)."""
    from fixture_store.readers.tensor_ranges import Piece, Plan

    header = record.header
    if header is None:
        return None
    length, sha256 = int(header["length"]), str(header["sha256"])
    piece = Piece(HEADER_PART, 0, length, sha256)
    return Span(record, HEADER_PART, Plan(0, length, (piece,), 0, length))


def check_placed(record: Record, key: str, header_bytes: bytes) -> None:
    """Tensor ``key``'s range, dtype and shape in ``record`` are those its header gives (the
    header's bytes verified by the record's ``header.sha256``), and every other ranged tensor's
    too: a record naming another tensor's range (or the header's bytes) for this one is an
    :class:`IntegrityError` before any byte of the range is read."""
    import io

    from fixture_store import limits
    from fixture_store.readers import safetensors
    from fixture_store.readers.tensor_ranges import header_ranges

    header = safetensors.parse_header(
        io.BytesIO(header_bytes), record.object.size, limits.profile(record.profile), record.name
    )
    placed = header_ranges(header)
    arrays = record.arrays or {}
    for name in sorted(arrays, key=lambda n: (n != key, n)):  # the one asked for first
        spec = arrays[name]
        info = header.tensors.get(name)
        said = (spec.get("offset"), spec.get("length"), spec["dtype"], list(spec["shape"]))
        given = (*placed[name], info.dtype, list(info.shape)) if info is not None else None
        if said != given:
            where = (
                "it is not in the header"
                if given is None
                else f"the header gives {given[1]} bytes at {given[0]}, {given[2]} {given[3]}"
            )
            raise IntegrityError(
                f"{record.name}: tensor {name!r}: the record gives {said[1]} bytes at "
                f"{said[0]}, {said[2]} {said[3]}; {where} (the header verified by the record's "
                "header.sha256); nothing was read",
                fix=f"re-record {record.name} from its source (add --replace), then fetch again",
            )
    extra = sorted(set(header.tensors) - set(arrays))
    if extra:
        raise IntegrityError(
            f"{record.name}: the header has tensors the record does not list: {extra}; nothing "
            "was read",
            fix=f"re-record {record.name} from its source (add --replace), then fetch again",
        )


def as_array(data: bytes, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Verified bytes as a read-only array."""
    import numpy as np

    array = np.frombuffer(data, dtype).reshape(shape)
    array.flags.writeable = False
    return array


def verified(span: Span, where: str, fetched: bytes) -> bytes:
    """The bytes asked for of ``fetched`` (the span's range from ``where``), once every recorded
    digest it covers holds; an :class:`IntegrityError` naming the record, the tensor (and chunk)
    and where the bytes came from otherwise (nothing is kept)."""
    plan = span.plan
    for piece in plan.pieces:
        part = fetched[piece.start : piece.start + piece.length]
        if hashlib.sha256(part).hexdigest() != piece.sha256:
            its = "chunk" if "chunk " in piece.what else "tensor"
            its = "header" if piece.what == HEADER_PART else its
            raise IntegrityError(
                f"{span.name}: {piece.what}: the {piece.length} bytes at "
                f"{plan.offset + piece.start} from {display.text(where)} do not have the "
                f"{its}'s sha256 {piece.sha256}; nothing was kept",
                fix=span.whole_fix,
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


def source_bytes(ctx: FetchContext, span: Span) -> bytes:
    """The span's bytes from its record's source (answer and length checked, not the digest:
    :func:`verified` does that for every place the bytes come from)."""
    record = span.record
    source = record.source
    if isinstance(source, LocalSource):
        return _local(ctx, span, source)
    if isinstance(source, UrlSource):
        ctx.require_online(record, span.part)
        return http_range(ctx, span, source.url)
    if isinstance(source, HubSource):
        ctx.require_online(record, span.part)
        if (problem := revision_problem(source.revision)) is not None:
            raise SourceError(
                record.name, f"{source.describe()}: revision is not a full commit ({problem})"
            )
        repo = (source.repo_id, source.path, source.resolved_repo_type)
        return hub_range(ctx, span, source.describe(), repo, source.revision)
    raise UsageError(
        f"{record.name}: partial fetch reads url, hub and local sources; this record's source is "
        f"{source.describe()}",
        fix=f"fixture-store fetch {names.shell(record.name)}  (the whole object)",
    )


def _local(ctx: FetchContext, span: Span, source: LocalSource) -> bytes:
    from fixture_store.sources.local import resolve

    record = span.record
    path = resolve(ctx.root, source.path, record)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise SourceError(
            record.name, f"local source {source.path!r}: {e.strerror}", fix="restore it"
        ) from e
    try:
        data = os.pread(fd, span.length, span.offset)
    finally:
        os.close(fd)
    if len(data) != span.length:
        raise IntegrityError(
            f"{record.name}: {span.part}: local source {source.path!r} ends before its range "
            f"({len(data)} of {span.length} bytes at {span.offset})",
            fix=f"restore {source.path} (git checkout / git lfs pull), then read it again",
        )
    return data


def http_range(ctx: FetchContext, span: Span, url: str) -> bytes:
    """The span's bytes by one HTTPS ``GET`` with ``Range`` (a url source, an https mirror)."""
    deadline = ctx.policy.start(span.length, read_timeout=TIMEOUT_S)
    headers = {"Range": f"bytes={span.offset}-{span.last}"}
    try:
        response = default_opener(url, deadline, headers=headers)
    except (SourceFailure, TransientError, DeadlineExceeded) as e:
        raise SourceError(
            span.name,
            f"{display.url(url)}: {e}",
            fix=f"fixture-store fetch {names.shell(span.name)}",
        ) from e
    try:
        answer: Any = response  # an http.client response
        got_range = str(answer.headers.get("Content-Range") or "")
        check_answer(span, url, getattr(answer, "status", None), got_range)
        errors = (TimeoutError, OSError, http.client.HTTPException)
        meter = ctx.policy.meter()
        # not exact: a short body is read to its end and refused below as a short range
        body = BoundedBody(
            read1_of(response), span.length, deadline, meter, errors=errors, exact=False
        )
        try:
            data = body.read_all()
        except (BodyCut, BelowMinimumRate, DeadlineExceeded) as e:
            raise SourceError(span.name, f"{display.url(url)}: the range's body: {e}") from e
    finally:
        response.close()
    return counted(ctx, span, url, data)


def counted(ctx: FetchContext, span: Span, where: str, data: bytes) -> bytes:
    """``data`` if it is exactly the span's length (counted as downloaded); an
    :class:`IntegrityError` otherwise."""
    if len(data) != span.length:  # a short range, or a longer body cut at one byte more
        raise IntegrityError(
            f"{span.name}: {span.part}: {display.text(where)} sent {len(data)} bytes for a "
            f"range of {span.length}",
            fix=span.whole_fix,
        )
    ctx.count_download(len(data))
    return data


def hub_range(
    ctx: FetchContext, span: Span, where: str, file: tuple[str, str, str | None], revision: str
) -> bytes:
    """The span's bytes from the Hub file ``file`` (repo id, path, repo type) at the commit
    ``revision``: its metadata first (that commit, the record's size and LFS sha256, as a whole
    fetch checks them), then one GET of the range on the client's session. The hub source and
    the Hub remote both read here."""
    require("hub", for_what="reading a range of a Hub file")
    import httpx2 as httpx  # the HTTP client huggingface_hub is built on
    from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_url

    from fixture_store.sources.hub import announced_problem, download_headers, endpoint

    repo_id, path, repo_type = file
    url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=endpoint())
    fix = f"fixture-store fetch {names.shell(span.name)}"
    record = span.record
    try:
        meta = get_hf_file_metadata(url, timeout=constants.HF_HUB_ETAG_TIMEOUT, endpoint=endpoint())
    except Exception as e:
        raise SourceError(record.name, f"{where}: metadata request failed: {e}", fix=fix) from e
    problem = announced_problem(meta, revision, record.object.size, record.object.hex)
    if problem is not None:
        raise SourceError(record.name, f"{where}: {problem}", fix=fix)
    headers = {**download_headers(url, meta.location), "Range": f"bytes={span.offset}-{span.last}"}
    deadline = ctx.policy.start(span.length, read_timeout=float(constants.HF_HUB_DOWNLOAD_TIMEOUT))
    try:
        with get_session().stream(
            "GET", meta.location, headers=headers, timeout=deadline.next_read_timeout()
        ) as response:
            response.raise_for_status()
            got_range = str(response.headers.get("Content-Range") or "")
            check_answer(span, where, response.status_code, got_range)
            chunks = Chunks(iter(response.iter_bytes()))
            meter = ctx.policy.meter()
            body = BoundedBody(chunks.read1, span.length, deadline, meter, errors=(), exact=False)
            data = body.read_all()
    except (httpx.HTTPError, BelowMinimumRate, DeadlineExceeded) as e:
        raise SourceError(record.name, f"{where}: the range request failed: {e}", fix=fix) from e
    return counted(ctx, span, where, data)


def read1_of(response: BinaryIO) -> Any:
    """The read a bounded reader takes from a server's answer: ``read1`` (what has arrived, at
    most the size asked) where the stream has one, else ``read``."""
    return getattr(response, "read1", None) or response.read


def range_problem(status: int | None, got: str, first: int, last: int, size: int) -> str | None:
    """What is wrong with an answer to a request for bytes ``first``-``last`` of a file of
    ``size`` bytes, or ``None``: only a 206 whose Content-Range is exactly that range of a file
    of that size is read. The one check of every ranged read (a source, a remote, a pack)."""
    asked = f"bytes {first}-{last}/{size}"
    if status != 206:  # noqa: PLR2004 - Partial Content
        return (
            f"answered {status} to a range request for {asked}, not 206 Partial Content (a "
            "server that ignores Range would send the whole file); nothing was read"
        )
    got = got.strip()
    m = _CONTENT_RANGE.fullmatch(got)
    if m is None or (int(m[1]), int(m[2]), m[3]) != (first, last, str(size)):
        return f"answered the range request for {asked} with Content-Range {got or '(none)'!r}"
    return None


def check_answer(span: Span, where: str, status: int | None, got: str) -> None:
    """An :class:`IntegrityError` naming the record and the part unless the answer is the
    span's range (:func:`range_problem`)."""
    problem = range_problem(status, got, span.offset, span.last, span.record.object.size)
    if problem is not None:
        raise IntegrityError(
            f"{span.name}: {span.part}: {display.text(where)} {problem}", fix=span.whole_fix
        )


__all__ = [
    "Span",
    "as_array",
    "check_answer",
    "check_placed",
    "counted",
    "header_span",
    "http_range",
    "hub_range",
    "range_problem",
    "ranged",
    "source_bytes",
    "tensor_span",
    "verified",
]
