"""Small real encoded clips for the video tests, made with PyAV's own encoders (no download),
and a throwaway project whose ``video`` stage runs the real generator in this interpreter."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import av
import numpy as np
import yaml

from fixture_store import ingest
from fixture_store.objects.store import Store
from fixture_store.readers.video import block_means, encode_blocks
from fixture_store.regenerate import Verdict, regenerate
from fixture_store.registry import load
from tests.support.regen_project import MODELS, PYTHON, numpy_pin

NAME = "video/clip.mp4"


def scene(
    frames: int, width: int, height: int, *, noise: int = 0
) -> Iterator[np.ndarray[Any, Any]]:
    """A smooth gradient with a moving bright square: every frame differs from the last;
    ``noise`` adds seeded noise of that amplitude (a clip that compresses badly)."""
    y, x = np.mgrid[0:height, 0:width]
    rng = np.random.default_rng(0)
    for i in range(frames):
        rgb = np.stack([(x * 4 + i * 8) % 256, (y * 4) % 256, (x + y + i * 3) % 256], axis=-1)
        side = max(4, height // 4)
        top, left = (i * 3) % (height - side), (i * 5) % (width - side)
        rgb[top : top + side, left : left + side] = 250
        if noise:
            rgb = rgb + rng.integers(0, noise, size=rgb.shape)
        yield np.clip(rgb, 0, 255).astype(np.uint8)


def encode(
    path: Path,
    *,
    frames: int = 12,
    width: int = 64,
    height: int = 48,
    codec: str = "libx264",
    options: dict[str, str] | None = None,
    noise: int = 0,
) -> Path:
    """An H.264 clip (yuv420p) at ``path``; ``options`` go to the muxer (e.g. faststart)."""
    with av.open(str(path), "w", options=options or {}) as out:
        stream = out.add_stream(codec, rate=24)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.options = {"threads": "1"}
        for rgb in scene(frames, width, height, noise=noise):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")))
        out.mux(stream.encode(None))
    return path


def project(tmp_path: Path, *, clip: Path | None = None) -> tuple[Path, Store]:
    """A project with the real ``video`` stage, a registered clip and its accepted description."""
    root = tmp_path / "proj"
    (root / "models").mkdir(parents=True)
    (root / "provenance").mkdir()
    shutil.copyfile(MODELS / "video_clip.py", root / "models" / "video_clip.py")
    params = {
        "regenerate": {
            "video": {
                "generator": "models/video_clip.py",
                "requirements": [
                    f"{dist}=={importlib.metadata.version(dist)}" for dist in ("av", "blake3")
                ]
                + [numpy_pin()],
                "inputs": ["video/*"],
                "tolerance": {"metric": "allclose", "atol": 1.0, "rtol": 0.0},
            }
        }
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    store = Store.at(tmp_path / "store").ensure()
    clip = clip or encode(root / "clip.mp4")
    ingest.add(store, load(root), clip, name=NAME, kind="video")
    report = regenerate(root, store, "video", scratch=tmp_path / "s", accept=True, python=PYTHON)
    assert [c.verdict for c in report.comparisons] == [Verdict.NEW]
    return root, store


def edit_record(root: Path, name: str, **metadata: Any) -> None:
    """Rewrite fields of a record's decoded description in the project's family file (a test
    simulating a reviewed change; the project's own registry is never edited by hand)."""
    path = root / "provenance" / "video.json"
    doc = json.loads(path.read_text())
    doc["records"][name]["metadata"].update(metadata)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def shifted(blocks: str, delta: float, *, only: int | None = None) -> str:
    """A frame_blocks string with every block mean (or only value ``only``) moved by ``delta``."""
    means = list(block_means(blocks))
    for i in range(len(means)) if only is None else (only,):
        means[i] = min(means[i] + delta, 255.0)
    return encode_blocks(means)


class Endless:
    """A file that never ends: a Y4M header, then frame after frame, forever."""

    def __init__(self, width: int = 64, height: int = 48) -> None:
        header = f"YUV4MPEG2 W{width} H{height} F24:1 Ip A1:1 C420jpeg\n".encode()
        self._frame = b"FRAME\n" + bytes(width * height * 3 // 2)
        self._pending = header
        self.served = 0

    def read(self, n: int = -1) -> bytes:
        n = 1 << 16 if n is None or n < 0 else n
        while len(self._pending) < n:
            self._pending += self._frame
        out, self._pending = self._pending[:n], self._pending[n:]
        self.served += len(out)
        return out

    def seekable(self) -> bool:
        return False

    def seek(self, _offset: int, _whence: int = 0) -> int:
        raise OSError("not seekable")

    def tell(self) -> int:
        return self.served


def as_binary(endless: Endless) -> BinaryIO:
    return endless  # type: ignore[return-value]
