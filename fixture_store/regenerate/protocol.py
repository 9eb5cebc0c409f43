"""Generator protocol 1: the files a generator writes, their JSON Schemas, and the kit.

A generator is a script the runner starts in its stage's pinned environment (see
:mod:`fixture_store.regenerate.envs`). It writes its candidates, ``outputs.json`` and
``environment.json`` under ``--out``; both files are checked here against the schemas shipped in
``schemas/`` before anything is compared, so a generator that breaks the protocol is refused
with the stage, the file and the field. The kit (``kit/fixture_store_generator.py``, standard
library only) is the helper a generator imports: the runner puts its folder on the generator's
``PYTHONPATH``, so it needs no fixture-store in the pinned environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fixture_store import bounded_json
from fixture_store.errors import EXIT_USAGE, FixtureStoreError

PROTOCOL = 1
OUTPUTS_FILE = "outputs.json"
ENVIRONMENT_FILE = "environment.json"
INPUTS_FILE = "inputs.json"
KIT_MODULE = "fixture_store_generator"


class ProtocolError(FixtureStoreError):
    """A generator wrote a file that does not follow the generator protocol."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        file: Path,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        where = f"stage {stage!r}: {file}" + (f": field {field}" if field else "")
        super().__init__(
            f"{where}: {message}",
            fix=fix
            or f"make the generator write {file.name} as generator protocol {PROTOCOL} says "
            f"(its JSON Schema: fixture_store/regenerate/schemas/{file.name})",
        )
        self.stage = stage
        self.file = file
        self.field = field
        self.reason = message


def kit_folder() -> Path:
    """The folder the runner puts on a generator's ``PYTHONPATH``: it holds the kit alone."""
    return Path(__file__).resolve().parent / "kit"


@cache
def schema(file: str) -> dict[str, Any]:
    """The JSON Schema of one protocol file (``outputs.json``, ``environment.json``, ...)."""
    text = resources.files(__package__).joinpath("schemas", file).read_text(encoding="utf-8")
    doc: dict[str, Any] = bounded_json.loads(text)
    return doc


def field_path(parts: Sequence[str | int]) -> str:
    """``['outputs', 0, 'kind']`` as ``outputs[0].kind``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def load(out: Path, file: str, *, stage: str) -> Any:
    """The JSON document ``file`` the generator wrote under ``out``, checked against its schema."""
    path = out / file
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProtocolError(
            f"the generator wrote no readable {file}: {e}", stage=stage, file=path
        ) from e
    try:
        doc = bounded_json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKeyError as e:
        raise ProtocolError(f"duplicate key {e.key!r}", stage=stage, file=path) from e
    except ValueError as e:
        raise ProtocolError(f"not JSON: {e}", stage=stage, file=path) from e
    _check(doc, file, stage=stage, path=path)
    return doc


def _check(doc: Any, file: str, *, stage: str, path: Path) -> None:
    import jsonschema  # only a regeneration pays for it

    validator = jsonschema.Draft202012Validator(schema(file))
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:
        return
    parts: list[str | int] = list(error.absolute_path)
    missing = _named_key(error)
    if missing is not None:
        parts.append(missing)
    raise ProtocolError(error.message, stage=stage, file=path, field=field_path(parts) or None)


def _named_key(error: Any) -> str | None:
    """The key a ``required`` or ``additionalProperties`` error is about, which jsonschema
    reports on the enclosing object."""
    instance = error.instance
    if not isinstance(instance, dict):
        return None
    if error.validator == "required":
        absent = [k for k in error.validator_value if k not in instance]
        return str(absent[0]) if absent else None
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in known)
        return str(extra[0]) if extra else None
    return None


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise _DuplicateKeyError(key)
        doc[key] = value
    return doc
