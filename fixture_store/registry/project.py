"""What ``init`` writes into a project besides ``provenance/``: the ``.gitignore`` lines for the
pipeline's outputs.

The regeneration stages write ``reports/``, the summary ``metrics/`` and ``plots/``. Committed,
they make a fresh clone's ``dvc repro`` find every stage's outputs present and matching
``dvc.lock``, so it says "up to date" and runs no generator, while the generator-made fixtures
those stages put into the store never reach that clone's store. Ignored, the clone lacks them and
``dvc repro`` runs the stages.
"""

from __future__ import annotations

import os
from pathlib import Path

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
