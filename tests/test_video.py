"""Video artifacts: seeded generation, lazy frames after verification, corrupted frames named."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from fixture_store import video
from fixture_store.access import Fixtures
from fixture_store.errors import DigestMismatchError
from fixture_store.objects.store import Store
from fixture_store.regenerate import Verdict, regenerate
from fixture_store.registry import load
from tests.support.regen_project import MODELS, PYTHON, numpy_pin

NAME = "video/synthetic-seed7.npy"


@pytest.fixture
def clip(tmp_path: Path) -> tuple[Path, Store]:
    root = tmp_path / "proj"
    (root / "models").mkdir(parents=True)
    (root / "provenance").mkdir()
    shutil.copyfile(MODELS / "video_clip.py", root / "models" / "video_clip.py")
    params = {
        "regenerate": {
            "video": {
                "generator": "models/video_clip.py",
                "requirements": [numpy_pin()],
                "args": {"seed": 7, "frames": 48, "height": 24, "width": 32, "fps": 24},
            }
        }
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    store = Store.at(tmp_path / "store").ensure()
    report = regenerate(root, store, "video", scratch=tmp_path / "s", accept=True, python=PYTHON)
    assert [c.verdict for c in report.comparisons] == [Verdict.NEW]
    return root, store


def test_record_carries_frame_layout_and_digests(clip: tuple[Path, Store]) -> None:
    root, _ = clip
    record = load(root).get(NAME)
    assert record.kind == "video"
    vi = video.info(record)
    assert (vi.frames, vi.height, vi.width, vi.channels, vi.fps) == (48, 24, 32, 3, 24.0)
    assert len(set(vi.frame_digests)) == 48


def test_frames_are_lazy_and_deterministic(clip: tuple[Path, Store], tmp_path: Path) -> None:
    root, store = clip
    frames = video.frames(Fixtures(store, load(root)), NAME)
    first = next(frames)
    assert first.shape == (24, 32, 3) and first.dtype == np.uint8
    rest = list(frames)
    assert len(rest) == 47 and not np.array_equal(first, rest[0])
    again = regenerate(root, store, "video", scratch=tmp_path / "s2", python=PYTHON)
    assert [c.verdict for c in again.comparisons] == [Verdict.IDENTICAL]


def test_a_corrupted_frame_is_named(clip: tuple[Path, Store]) -> None:
    root, store = clip
    registry = load(root)
    record = registry.get(NAME)
    vi = video.info(record)
    path = store.object_path(record.digest)  # type: ignore[arg-type]
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[vi.header_bytes + 17 * vi.frame_bytes + 5] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DigestMismatchError, match=r"1 corrupted frame\(s\) of 48: 17;"):
        video.frames(Fixtures(store, registry, full=True), NAME)
