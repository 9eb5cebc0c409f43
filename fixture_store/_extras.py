"""Optional dependencies: which extra brings which module, and the check every import site makes.

The core install (store, registry, verify, safe readers, CLI, pytest plugin) needs none of these.
Code that imports an optional module calls ``require`` first, so a missing extra is a
``MissingExtraError`` naming the extra and the install command, never an ``ImportError``::

    require("onnx", for_what="fixture-store compare")
    import onnx

``EXTRAS`` and ``[project.optional-dependencies]`` in pyproject.toml are kept in step by a test.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fixture_store.errors import UsageError

# extra -> the top-level modules code imports from it (not every distribution the extra installs).
EXTRAS = MappingProxyType(
    {
        "onnx": ("onnx", "onnxruntime", "ml_dtypes"),
        "hub": ("huggingface_hub", "tqdm", "httpx2"),
        # pip is run as ``python -m pip download`` to fetch package sources, never imported.
        "package": ("pip",),
        "regenerate": ("yaml",),
        "s3": ("boto3", "botocore"),
        "video": ("av",),
        "attest": ("securesystemslib", "cryptography"),
    }
)


class MissingExtraError(UsageError):
    """Something was asked for that needs an optional dependency this environment lacks."""

    def __init__(self, extra: str, missing: str, *, for_what: str) -> None:
        super().__init__(
            f"{for_what} needs the {extra!r} extra ({missing} is not installed)",
            fix=install_command(extra),
        )
        self.extra = extra
        self.missing = missing


_PYPROJECT_CAP = 1 << 20  # a project file larger than this is not read for the hint
_NAME = re.compile(r"\s*(fixture[-_.]store)\s*(?:\[([^\]]*)\])?", re.IGNORECASE)


def install_command(extra: str, start: Path | None = None) -> str:
    """How to add ``extra`` the way fixture-store was added to the project around ``start``
    (default: here): ``uv add --dev`` for a dev dependency (a dependency group, uv's
    ``dev-dependencies``), ``--group``/``--optional`` for others, ``uv add`` for a runtime one,
    pip where uv does not manage the project; the extras it already has are kept."""
    found = _declared(start or Path.cwd())
    if found is None:
        return f"uv add 'fixture-store[{extra}]'  (or: pip install 'fixture-store[{extra}]')"
    how, extras, uv = found
    spec = f"'fixture-store[{','.join(sorted({*extras, extra}))}]'"
    return f"uv add {how}{spec}" if uv else f"pip install {spec}"


def _declared(start: Path) -> tuple[str, set[str], bool] | None:
    """Where the nearest pyproject.toml declares fixture-store (the ``uv add`` flag that puts
    it there), the extras it has, and whether uv manages the project; ``None`` if it does not
    declare it (or cannot be read)."""
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        try:
            if not path.is_file():
                continue
            if path.stat().st_size > _PYPROJECT_CAP:
                return None
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        uv = (folder / "uv.lock").is_file() or "uv" in _table(doc.get("tool"))
        project = _table(doc.get("project"))
        if _NAME.fullmatch(str(project.get("name", ""))):  # fixture-store's own checkout
            return None
        places: list[tuple[str, Any]] = [("", project.get("dependencies"))]
        places += [
            ("--dev " if g == "dev" else f"--group {g} ", reqs)
            for g, reqs in _table(doc.get("dependency-groups")).items()
        ]
        places.append(("--dev ", _table(_table(doc.get("tool")).get("uv")).get("dev-dependencies")))
        places += [
            (f"--optional {e} ", reqs)
            for e, reqs in _table(project.get("optional-dependencies")).items()
        ]
        for how, reqs in places:
            extras = _extras_of(reqs)
            if extras is not None:
                return how, extras, uv
        return None
    return None


def _table(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _extras_of(requirements: object) -> set[str] | None:
    """The extras of the fixture-store requirement among ``requirements``, if there is one."""
    if not isinstance(requirements, list):
        return None
    for req in requirements:
        m = _NAME.match(req) if isinstance(req, str) else None
        if m is not None and req[m.end() :].lstrip()[:1] in ("", *"<>=!~;@("):
            return {e.strip() for e in (m[2] or "").split(",") if e.strip()}
    return None


def available(module: str) -> bool:
    """Whether top-level ``module`` can be imported here (without importing it)."""
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None entry in sys.modules, a broken parent
        return False


def require(extra: str, *, for_what: str, modules: Sequence[str] | None = None) -> None:
    """Raise ``MissingExtraError`` unless ``modules`` of ``extra`` (default: all) are importable.

    ``for_what`` says what needed them, as the user would name it ("fixture-store compare",
    "fetching a hub source").
    """
    known = EXTRAS[extra]
    for module in known if modules is None else modules:
        if module not in known:
            raise ValueError(f"{module!r} is not a module of the {extra!r} extra")
        if not available(module):
            raise MissingExtraError(extra, module, for_what=for_what)
