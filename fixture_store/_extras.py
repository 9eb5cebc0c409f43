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
import sys
from collections.abc import Sequence
from types import MappingProxyType

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
            fix=f"uv add 'fixture-store[{extra}]'  (or: pip install 'fixture-store[{extra}]')",
        )
        self.extra = extra
        self.missing = missing


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
