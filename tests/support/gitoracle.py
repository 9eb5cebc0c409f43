"""git itself as the oracle of ``.gitattributes``: ``git check-attr`` in a real repository, with
no system, global or user attributes file in the way (git-lfs is not needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }


def init(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, env=git_env(repo), check=True)


def check_attr(repo: Path, paths: list[str], attribute: str = "filter") -> dict[str, str]:
    """git's state of ``attribute`` for each path: ``set``, ``unset``, ``unspecified`` or the
    value."""
    done = subprocess.run(
        ["git", "check-attr", "-z", "--stdin", attribute],
        cwd=repo,
        env=git_env(repo),
        input=b"".join(p.encode() + b"\0" for p in paths),
        capture_output=True,
        check=True,
    )
    fields = done.stdout.split(b"\0")
    return {fields[i].decode(): fields[i + 2].decode() for i in range(0, len(fields) - 2, 3)}


def tracked(repo: Path, paths: list[str]) -> set[str]:
    """The paths git takes for LFS-tracked: ``filter`` is ``lfs``."""
    return {path for path, value in check_attr(repo, paths).items() if value == "lfs"}
