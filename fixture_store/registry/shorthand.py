"""The command-line forms of record fields, parsed into the JSON the registry checks.

``--source pypi:NAME==VERSION/PATH`` is a file inside a pinned distribution
(:func:`package_source`), the distribution's file and digest given beside it.
``--tolerance`` takes the JSON object or ``METRIC``, ``METRIC:BOUND`` (``mean_abs:5e-4``: the
metric's one bound, ``max``) or ``METRIC:KEY=VALUE,...`` (``allclose:atol=1e-6,rtol=1e-4``); the
metrics and their fields are :class:`~fixture_store.registry.tolerance.Tolerance`'s to check, not
this module's. ``--metadata`` takes ``KEY=TEXT`` or ``KEY:=JSON``; ``--input-shape`` a JSON value
or ``1,3,224,224``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from fixture_store import bounded_json
from fixture_store.registry import nesting, upstream_notation
from fixture_store.registry import upstream as upstream_mod
from fixture_store.registry.records import Annotations
from fixture_store.registry.sources import PackageSource
from fixture_store.registry.tolerance import Tolerance
from fixture_store.registry.where import Where

BOUND_KEY = "max"  # the one bound of a single-bound metric, as ``METRIC:BOUND`` gives it


def stated(  # noqa: PLR0913 - one keyword per command-line option
    where: Where,
    *,
    license: str | None = None,
    description: str | None = None,
    tolerance: str | None = None,
    metadata: Iterable[str] = (),
    metadata_file: str | None = None,
    upstream: Iterable[str] = (),
    upstream_license: str | None = None,
    seed: int | None = None,
    input_shape: str | None = None,
    command: str | None = None,
    inputs: Iterable[str] = (),
) -> Annotations:
    """The fields a record states, from their command-line forms (``None``/empty: not given),
    checked by the rules a record's JSON is checked by."""
    raw: dict[str, Any] = {"license": license, "description": description, "seed": seed}
    if tolerance is not None:
        raw["tolerance"] = tolerance_json(tolerance, where)
    if inputs:
        raw["tolerance"] = with_inputs(raw.get("tolerance"), list(inputs), where)
    pairs = list(metadata)
    if pairs or metadata_file is not None:
        base = metadata_file_json(metadata_file, where) if metadata_file is not None else {}
        raw["metadata"] = metadata_json(pairs, base, where)
    pins = [upstream_notation.parse_uri(text, where).to_json() for text in upstream]
    if upstream_license is not None and not pins:
        raise where.fail("upstream", "--upstream-license needs an --upstream to apply to")
    license_of = {"license": upstream_license} if upstream_license is not None else {}
    raw["upstream"] = [{**p, **license_of} for p in pins] or None
    if input_shape is not None:
        raw["input_shape"] = input_shape_json(input_shape, where)
    if command is not None:
        raw["command"] = command_json(command, where)
    return Annotations.from_json({k: v for k, v in raw.items() if v is not None}, where)


def package_source(
    text: str, where: Where, *, file: str, file_digest: str, file_size: int | None = None
) -> PackageSource:
    """``pypi:NAME==VERSION/PATH`` (the upstream form) as the source of a file inside the
    distribution ``file`` whose SHA-256 is ``file_digest``, checked by the pin rules."""
    if not text.startswith(upstream_mod.PYPI_SCHEME):
        raise where.fail("source", f"{text!r} is not pypi:NAME==VERSION/PATH")
    requirement, _, path = text[len(upstream_mod.PYPI_SCHEME) :].partition("/")
    if not path:
        raise where.fail(
            "source", f"{text!r} names no file inside the distribution: pypi:NAME==VERSION/PATH"
        )
    source = PackageSource(requirement, file, file_digest, path, file_size)
    source.check(where)
    return source


def with_inputs(tolerance: Any, inputs: list[str], where: Where) -> Any:
    """The tolerance JSON with ``--inputs`` as its ``inputs`` (registry/roles.py)."""
    if not isinstance(tolerance, Mapping):
        raise where.fail(
            "tolerance.inputs",
            "--inputs names the arrays no rule judges: it needs the --tolerance that judges the "
            "others",
            fix="give --tolerance too (mean_abs:5e-4, or the JSON object)",
        )
    if "inputs" in tolerance:
        raise where.fail("tolerance.inputs", "given twice: in the --tolerance JSON and as --inputs")
    return {**tolerance, "inputs": inputs}


def tolerance(text: str, where: Where) -> Tolerance:
    """A tolerance from its JSON or its short form, checked by :meth:`Tolerance.from_json`."""
    return Tolerance.from_json(tolerance_json(text, where), where)


def tolerance_json(text: str, where: Where) -> Any:
    if text.lstrip().startswith("{"):
        return _json(text, where, "tolerance")
    metric, sep, rest = text.partition(":")
    doc: dict[str, Any] = {"metric": metric.strip()}
    if not sep:
        return doc
    if "=" not in rest:
        bound = _value(rest)
        if isinstance(bound, str):
            raise where.fail(
                "tolerance",
                f"{rest!r} is not a bound (in {text!r}): write METRIC:NUMBER or "
                "METRIC:KEY=VALUE,...",
            )
        doc[BOUND_KEY] = bound
        return doc
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise where.fail("tolerance", f"{item!r} is not KEY=VALUE (in {text!r})")
        if key.strip() in doc:
            raise where.fail("tolerance", f"{key.strip()!r} is given twice (in {text!r})")
        doc[key.strip()] = _value(value)
    return doc


def metadata_json(pairs: Iterable[str], base: Mapping[str, Any], where: Where) -> dict[str, Any]:
    """``base`` (a metadata file's object) with each ``KEY=TEXT`` / ``KEY:=JSON`` set; a key
    given twice on the command line is refused."""
    out = dict(base)
    seen: set[str] = set()
    for pair in pairs:
        key, eq, value = pair.partition("=")
        as_json = key.endswith(":")
        key = key.removesuffix(":")
        if not eq or not key:
            raise where.fail("metadata", f"{pair!r} is not KEY=VALUE or KEY:=JSON")
        if key in seen:
            raise where.fail(f"metadata.{key}", "is given twice")
        seen.add(key)
        out[key] = _json(value, where, f"metadata.{key}") if as_json else value
    return out


def metadata_file_json(text: str, where: Where) -> dict[str, Any]:
    doc = _json(text, where, "metadata")
    if not isinstance(doc, dict):
        raise where.fail("metadata", "a metadata file must hold a JSON object")
    return doc


def input_shape_json(text: str, where: Where) -> Any:
    """``[1, 3, 224, 224]``, ``{"pixel_values": [1, 3, 224, 224]}`` or ``1,3,224,224``."""
    if text.lstrip()[:1] in ("[", "{"):
        return _json(text, where, "input_shape")
    try:
        return [int(d) for d in text.split(",")]
    except ValueError:
        raise where.fail(
            "input_shape", f"{text!r} is not a shape: write 1,3,224,224 or JSON"
        ) from None


def command_json(text: str, where: Where) -> list[str]:
    """A command line split as a POSIX shell splits it."""
    try:
        return shlex.split(text)
    except ValueError as e:
        raise where.fail("command", f"{text!r} is not a command line: {e}") from e


def _value(text: str) -> Any:
    """A number when it reads as one, else the text (a metric's option such as ``same_kind``)."""
    try:
        return bounded_json.loads(text)
    except ValueError:  # not JSON, or past the bounds
        return text.strip()


def _json(text: str, where: Where, field: str) -> Any:
    """JSON given on the command line (or in a file it names), under the registry's bounds:
    what it states becomes a record's field, and must read back as one."""
    try:
        doc, _ = nesting.loads(text)
    except json.JSONDecodeError as e:
        raise where.fail(field, f"not valid JSON: {e.msg} at column {e.colno}") from e
    except bounded_json.TooDeep:
        raise where.fail(field, f"nested more than {nesting.MAX_DEPTH} levels deep") from None
    except bounded_json.TooLarge as e:
        raise where.fail(field, f"{e}: not read") from None
    except ValueError:  # an integer past Python's own 4,300 digits
        limit = nesting.MAX_INTEGER_DIGITS
        raise where.fail(field, f"an integer with more than {limit} digits") from None
    nesting.check_value(doc, where, field)
    return doc
