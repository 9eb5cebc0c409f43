"""The output samples of the docs are what the program prints: each documented command is run
as written (in-process) in a small project made for it, and every line the page shows after it
must be a line it printed. Counts and digests of the small project differ from the page's, so
a number matches any number and a full digest any full digest; everything else is to the letter
(``1,957`` where the program prints ``1957``, or a digest cut short, matches nothing)."""

from __future__ import annotations

import glob
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.support.cli import run
from tests.test_docs import ROOT, _console_commands, assert_shown


def _documented(page: str, prefix: str) -> tuple[str, list[str]]:
    """The first command of ``page``'s console blocks starting with ``prefix``, and the lines
    the page shows after it."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```console\n(.*?)^```$", text, re.M | re.S)
    for command, shown in (c for b in blocks for c in _console_commands(b)):
        if command.startswith(prefix):
            return command, shown
    raise AssertionError(f"docs/{page} has no command starting with {prefix!r}")


def _npz(path: Path, seed: int) -> None:
    """An NPZ (or, named ``.npy``, an NPY) of a few random numbers at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x = np.random.default_rng(seed).random(4)
    with path.open("wb") as f:
        (np.save if path.suffix == ".npy" else np.savez)(f, x)


def _registering(project: Path) -> None:
    for i, name in enumerate(("dinov2_vits14_reg_reference.npz", "siglip_base_reference.npz")):
        _npz(project / "tests" / "data" / name, i)


def _importing(project: Path) -> None:
    import hashlib

    data = project / "tests" / "data"
    for i, name in enumerate(("block1.npz", "block2.npz", "scratch.npy")):
        _npz(data / name, i)
    listed = ["block1.npz", "block2.npz"]
    lines = [f"{hashlib.sha256((data / n).read_bytes()).hexdigest()}  {n}\n" for n in listed]
    (data / "SHA256SUMS").write_text("".join(lines) + f"{'ab' * 32}  block3.npz\n")


def _report(project: Path) -> None:
    for family in ("a", "b"):
        _npz(project / "data" / f"{family}.npz", 0)
        added = run("add", f"data/{family}.npz", "--name", f"{family}/x.npz", "--kind", "fixture")
        assert added[0] == 0, added


SAMPLES: dict[str, tuple[str, str, Callable[[Path], None]]] = {
    "registering: add many files": (
        "registering.md",
        "fixture-store add tests/data/",
        _registering,
    ),
    "import: a SHA256SUMS": ("import.md", "fixture-store import tests/data/SHA256SUMS", _importing),
    "reports: the provenance report": ("reports.md", "fixture-store report --html", _report),
}


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("sample", list(SAMPLES))
def test_a_documented_sample_is_what_the_command_prints(project: Path, sample: str) -> None:
    page, prefix, make = SAMPLES[sample]
    make(project)
    command, shown = _documented(page, prefix)
    assert shown, f"docs/{page}: {command!r} shows no output to check"
    # the shell's part: a pattern becomes the files it matches, in order
    args = [m for a in shlex.split(command)[1:] for m in (sorted(glob.glob(a)) or [a])]
    code, out, err = run(*args)
    assert code in (0, 1), err
    assert_shown(command, shown, out + err, numbers=True)
