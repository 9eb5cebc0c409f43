"""One entry of a record's ``arrays`` manifest: its written forms, and its optional byte range and
digests.

The arrays with only a dtype and a shape are written grouped by them: the key is the dtype and
shape as one string, ``"DTYPE[D0,D1,...]"`` (``"float64[1,12]"``; a 0-d array ``"float32[]"``),
the value the sorted names of the arrays that have them, one line each. A record of thousands of
arrays of a few shapes costs a name per array in its family file, instead of an object of seven
lines (:func:`manifest_json`, :func:`expand`). Also read: ``"NAME": "DTYPE[...]"`` (what is
written when an array's own name reads as a dtype and shape, so that no group key can meet it)
and the object form ``{"dtype": ..., "shape": [...]}``, which older families keep until
``fixture-store migrate`` rewrites them, and which an entry with a range always has.

A large safetensors, NPY or NPZ reference records, per array, where its bytes are in the object
(``offset``, ``length``) and either their sha256 (a tensor of safetensors, a stored member of an
NPZ) or the sha256 of each fixed ``chunk`` of them in order (``chunks``: the one array of an NPY,
so a range of rows is fetched and verified by the chunks that cover it); see
:mod:`fixture_store.readers.tensor_ranges`. All keys of a kind together, or none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from fixture_store.registry.where import Where

PLAIN_KEYS = frozenset({"dtype", "shape"})
RANGED_KEYS = PLAIN_KEYS | {"offset", "length", "sha256"}
CHUNKED_KEYS = PLAIN_KEYS | {"offset", "length", "chunk", "chunks"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SHAPES = (
    "{dtype, shape}, {dtype, shape, offset, length, sha256} or "
    "{dtype, shape, offset, length, chunk, chunks}"
)


_DIMS = r"(?:0|[1-9][0-9]*)"
# The dtype is everything before the last bracket pair (``datetime64[ns][3]`` is a datetime64[ns]).
ENTRY_TEXT = re.compile(rf"(.+)\[((?:{_DIMS}(?:,{_DIMS})*)?)\]")
ENTRY_TEXT_FORM = "'DTYPE[D0,D1,...]' (such as 'float64[1,12]'; a 0-d array: 'float32[]')"


def entry_text(spec: Mapping[str, Any]) -> str | None:
    """The one-string form of a plain entry (dtype and shape only); ``None`` for an entry with a
    range, which keeps its object form."""
    if set(spec) != PLAIN_KEYS:
        return None
    return f"{spec['dtype']}[{','.join(str(int(d)) for d in spec['shape'])}]"


def parse_entry_text(text: str, name: str, where: Where) -> dict[str, Any]:
    """The ``{dtype, shape}`` entry a string of :func:`entry_text`'s form writes."""
    found = ENTRY_TEXT.fullmatch(text)
    if found is None:
        raise where.fail(f"arrays.{name}", f"must be {ENTRY_TEXT_FORM} or an object")
    dims = found.group(2)
    return {"dtype": found.group(1), "shape": [int(d) for d in dims.split(",")] if dims else []}


def expand(raw: Mapping[str, Any], where: Where) -> dict[str, Any]:
    """name -> entry of a manifest as written: each group's names given its dtype and shape,
    each ``"NAME": "DTYPE[...]"`` its object, objects as they are (checked by the caller)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, list | tuple):
            spec = parse_entry_text(key, key, where)
            for name in value:
                if not isinstance(name, str) or not name:
                    raise where.fail(f"arrays.{key}", "must list array names (non-empty strings)")
                if name in out or name in raw:
                    raise where.fail(f"arrays.{key}", f"names {name!r} twice in the manifest")
                out[name] = dict(spec)
        elif isinstance(value, str):
            if key in out:
                raise where.fail(f"arrays.{key}", "names the array twice in the manifest")
            out[key] = parse_entry_text(value, key, where)
        else:
            if key in out:
                raise where.fail(f"arrays.{key}", "names the array twice in the manifest")
            out[key] = value
    return out


def manifest_json(
    manifest: Mapping[str, Mapping[str, Any]], *, as_objects: bool = False
) -> dict[str, Any]:
    """A manifest as a record writes it: the plain entries grouped by dtype and shape (each as
    its own ``"NAME": "DTYPE[...]"`` if some array's name reads as a group's key; ``as_objects``:
    as the objects a manifest read in that form had), each ranged entry as its object."""
    out: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for name, spec in manifest.items():
        text = None if as_objects else entry_text(spec)
        if text is None:
            out[name] = {k: _thawed(v) for k, v in spec.items()}
        else:
            groups.setdefault(text, []).append(name)
    if any(ENTRY_TEXT.fullmatch(name) for name in manifest):
        out.update((name, text) for text, names in groups.items() for name in names)
    else:
        out.update((text, sorted(names)) for text, names in groups.items())
    return out


def _thawed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_hex(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def check_entry_keys(spec: Mapping[str, Any], name: str, where: Where) -> None:
    """An entry is exactly {dtype, shape}; or that with a range of non-negative integers and a
    lowercase sha256 hex; or with a range, a positive chunk size and one sha256 hex per chunk
    (as many as chunks of that size cover the range)."""
    if set(spec) not in (PLAIN_KEYS, RANGED_KEYS, CHUNKED_KEYS):
        raise where.fail(f"arrays.{name}", f"must be exactly {_SHAPES}")
    if set(spec) == PLAIN_KEYS:
        return
    for key in ("offset", "length"):
        if not _is_count(spec[key]):
            raise where.fail(f"arrays.{name}.{key}", "must be a non-negative integer")
    if "sha256" in spec:
        if not _is_hex(spec["sha256"]):
            raise where.fail(f"arrays.{name}.sha256", "must be 64 lowercase hex digits")
        return
    chunk, chunks = spec["chunk"], spec["chunks"]
    if not _is_count(chunk) or chunk == 0:
        raise where.fail(f"arrays.{name}.chunk", "must be a positive integer (bytes per chunk)")
    if not isinstance(chunks, list | tuple) or not all(_is_hex(c) for c in chunks):
        raise where.fail(f"arrays.{name}.chunks", "must be a list of 64-lowercase-hex digests")
    want = -(-spec["length"] // chunk)
    if len(chunks) != want:
        raise where.fail(
            f"arrays.{name}.chunks",
            f"lists {len(chunks)} digests; {spec['length']} bytes in chunks of {chunk} are {want}",
        )


# -- a safetensors record's header and the layout of its ranges ------------------------------
# A safetensors record whose tensors carry ranges also carries its header: the ``length`` of the
# bytes before the data section (the 8-byte length and the JSON header) and their ``sha256``.
# A range is served only after those bytes, fetched and verified by that digest, place the
# tensor exactly there (:mod:`fixture_store.remotes.ranges`); when the record is read, its
# ranges must already tile the data section after the header, in order, without overlap.
HEADER_KEYS = frozenset({"length", "sha256"})
_SAFETENSORS_PREFIX = 8  # the header's own length, before its JSON
_RERECORD = "re-record it from its source (fixture-store add FILE --name NAME --replace)"


def parse_header(raw: Any, where: Where) -> Mapping[str, Any]:
    """A record's ``header``: exactly {length, sha256}, a length of more than the 8 bytes
    that give it and the sha256 of those bytes."""
    if not isinstance(raw, Mapping) or set(raw) != HEADER_KEYS:
        raise where.fail("header", "must be exactly {length, sha256}")
    if not _is_count(raw["length"]) or raw["length"] <= _SAFETENSORS_PREFIX:
        raise where.fail("header.length", "must be an integer above 8 (its length and its JSON)")
    if not _is_hex(raw["sha256"]):
        raise where.fail("header.sha256", "must be 64 lowercase hex digits")
    return MappingProxyType({"length": raw["length"], "sha256": raw["sha256"]})


def check_layout(
    arrays: Mapping[str, Any] | None,
    header: Mapping[str, Any] | None,
    size: int | None,
    *,
    safetensors: bool,
    where: Where,
) -> None:
    """The ranges of a record's tensors against its header, when the record is read: a
    safetensors record whose tensors carry ranges carries its header, every tensor carries
    one, and sorted by offset they tile the data section (from the header's end to the
    object's) exactly, without overlap or gap. ``header`` belongs to nothing else."""
    ranged = {n: s for n, s in (arrays or {}).items() if "offset" in s}
    if not safetensors or not ranged:
        if header is not None:
            raise where.fail(
                "header",
                "only a safetensors record whose tensors carry byte ranges records its header",
                fix="remove it",
            )
        return
    if header is None:
        raise where.fail(
            "header",
            "missing: a safetensors record whose tensors carry byte ranges records its header's "
            "length and sha256, which place each range before it is served",
            fix=_RERECORD,
        )
    bare = sorted(set(arrays or {}) - set(ranged))
    if bare:
        raise where.fail(f"arrays.{bare[0]}", "carries no byte range while the others do")
    at = int(header["length"])
    for name, spec in sorted(ranged.items(), key=lambda kv: (kv[1]["offset"], kv[1]["length"])):
        if spec["offset"] != at:
            how = "overlaps what is before it" if spec["offset"] < at else "leaves a gap"
            raise where.fail(
                f"arrays.{name}.offset",
                f"is {spec['offset']}; the tensors' ranges tile the data section in order from "
                f"the end of the {header['length']}-byte header, so it must be {at} (it {how})",
                fix=_RERECORD,
            )
        at += spec["length"]
    if size is not None and at != size:
        raise where.fail(
            "arrays",
            f"the tensors' ranges end at byte {at}; the object has {size} bytes",
            fix=_RERECORD,
        )
