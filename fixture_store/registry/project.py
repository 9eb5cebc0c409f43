"""What ``init`` writes into a project besides ``provenance/``: the ``.gitignore`` lines for the
pipeline's outputs; and the project's orphan ignore list (``orphans-ignore`` in
``[tool.fixture-store]`` of its ``pyproject.toml``).

The regeneration stages write ``reports/``, the summary ``metrics/`` and ``plots/``. Committed,
they make a fresh clone's ``dvc repro`` find every stage's outputs present and matching
``dvc.lock``, so it says "up to date" and runs no generator, while the generator-made fixtures
those stages put into the store never reach that clone's store. Ignored, the clone lacks them and
``dvc repro`` runs the stages.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixture_store.errors import UsageError

PIPELINE_OUTPUTS = ("/reports/", "/metrics/", "/plots/")
_HEADER = "# fixture-store: pipeline outputs, rebuilt by dvc repro (never committed)"


def uses_dvc(project: str | os.PathLike[str]) -> bool:
    """Whether the project runs DVC pipelines: it has a ``dvc.yaml`` or a ``.dvc/`` folder."""
    root = Path(project)
    return (root / "dvc.yaml").is_file() or (root / ".dvc").is_dir()


def ignore_pipeline_outputs(project: str | os.PathLike[str]) -> tuple[str, ...]:
    """Add the lines of :data:`PIPELINE_OUTPUTS` the project's ``.gitignore`` lacks (the rest
    of the file is kept as it is); return the lines added. A project without DVC (no
    ``dvc.yaml`` and no ``.dvc/``) has no pipeline outputs: nothing is added."""
    if not uses_dvc(project):
        return ()
    path = Path(project) / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = tuple(
        line
        for line in PIPELINE_OUTPUTS
        if line not in present and line.strip("/") not in present and line[1:] not in present
    )
    if missing:
        lead = "" if not text or text.endswith("\n") else "\n"
        lead += "\n" if text else ""
        path.write_text(text + lead + "\n".join((_HEADER, *missing)) + "\n", encoding="utf-8")
    return missing


ORPHANS_IGNORE = "orphans-ignore"


def _setting(project: str | os.PathLike[str], key: str, default: Any) -> Any:
    """``key`` of the project's ``[tool.fixture-store]`` (``default`` without the file or key)."""
    path = Path(project) / "pyproject.toml"
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        return default
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}", fix=f"fix the TOML in {path}") from e
    tool = doc.get("tool")
    table = tool.get("fixture-store") if isinstance(tool, dict) else None
    return table.get(key, default) if isinstance(table, dict) else default


UPSTREAM_HOST = "upstream-host"
UPSTREAM_HOSTS = ("hf", "github")


def upstream_host(project: str | os.PathLike[str]) -> str | None:
    """``upstream-host`` of the project's ``[tool.fixture-store]``: where a bare ``OWNER/NAME``
    upstream lives (``hf``: the Hugging Face Hub, ``github``), or ``None``: asked."""
    value = _setting(project, UPSTREAM_HOST, None)
    if value is not None and (not isinstance(value, str) or value not in UPSTREAM_HOSTS):
        path = Path(project) / "pyproject.toml"
        raise UsageError(
            f"{path}: [tool.fixture-store] {UPSTREAM_HOST} must be one of "
            f"{', '.join(UPSTREAM_HOSTS)}, not {value!r}",
            fix=f'edit {path}: {UPSTREAM_HOST} = "hf"',
        )
    return value


def orphans_ignored(project: str | os.PathLike[str]) -> tuple[str, ...]:
    """The glob patterns of ``orphans-ignore`` in the project's ``[tool.fixture-store]``: paths
    from the project root, matched by :func:`fnmatch.fnmatchcase` (``*`` crosses folders, so
    ``*README.md`` matches a README in any folder). No file or no key: none."""
    path = Path(project) / "pyproject.toml"
    value = _setting(project, ORPHANS_IGNORE, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(
            f"{path}: [tool.fixture-store] {ORPHANS_IGNORE} must be a list of glob patterns "
            "(non-empty strings)",
            fix=f'edit {path}: {ORPHANS_IGNORE} = ["*README.md", "data/*.txt"]',
        )
    return tuple(value)


def ignored(path: str, patterns: Iterable[str]) -> bool:
    """Whether the project-relative ``path`` matches one of the ignore ``patterns``."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)
