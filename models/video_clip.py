"""Decode the verified video clips with the pinned decoder and describe them frame by frame.

Inputs are the ``video`` records' containers (verified by the caller). For each clip this
writes the container's bytes unchanged and its decoded description as the record's
``metadata``: container, codec, pixel format, size, frame rate, time base, the decoder's
versions (PyAV and the FFmpeg it bundles), and per frame the SHA-256 of its RGB24 pixels and
their BLAKE3 (for fast re-checks), and its block means: each colour's mean over a 4 x 4 grid of
blocks, 48 values written as one string of 4 hex digits each (``round(mean * 16)``).
``fixture_store.readers.video`` computes the same description; a test holds the two to the same
values.

``details.json`` carries what the registry does not: the agreement of a second, independent
decoder (``--second-decoder``: the FFmpeg binary of the pinned imageio-ffmpeg wheel, piping
rawvideo rgb24) with PyAV, frame by frame, and for each ``--pair REFERENCE:OTHER`` what one
clip's drift from another looks like (PSNR, max and mean absolute error per frame).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import fixture_store_generator as kit

STAGE = "video"
UPSTREAM = ("av==18.1.0", "numpy==2.4.6", "blake3==1.0.11")
SECOND_DECODER = "imageio-ffmpeg==0.6.0"
FRAME_FORMAT = "rgb24"
GRID = 4
BLOCK_SCALE = 16


def blocks(rgb: Any) -> list[float]:
    """Each colour's mean over a GRID x GRID grid of blocks, row by row, R, G, B in each."""
    import numpy as np

    h, w = rgb.shape[:2]
    out = []
    for i in range(GRID):
        rows = rgb[h * i // GRID : h * (i + 1) // GRID]
        for j in range(GRID):
            block = rows[:, w * j // GRID : w * (j + 1) // GRID]
            out += [float(m) for m in block.reshape(-1, 3).mean(axis=0, dtype=np.float64)]
    return out


def encode_blocks(means: list[float]) -> str:
    return "".join(f"{round(m * BLOCK_SCALE):04x}" for m in means)


def frames(path: Path) -> Iterator[Any]:
    import av

    with av.open(str(path)) as container:
        for frame in container.decode(container.streams.video[0]):
            yield frame.to_ndarray(format=FRAME_FORMAT)


def describe(path: Path) -> dict[str, Any]:
    import av
    import blake3
    import numpy as np

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        header = {
            "container": container.format.name,
            "codec": ctx.name,
            "pixel_format": ctx.pix_fmt,
            "width": ctx.width,
            "height": ctx.height,
            "frame_rate": str(Fraction(stream.average_rate or stream.guessed_rate or 0)),
            "time_base": str(Fraction(stream.time_base or 0)),
        }
    digests, grid, fast = [], [], []
    for rgb in frames(path):
        data = np.ascontiguousarray(rgb).data
        digests.append("sha256:" + hashlib.sha256(data).hexdigest())
        fast.append(blake3.blake3(data).hexdigest())
        grid.append(encode_blocks(blocks(rgb)))
    return {
        **header,
        "frames": len(digests),
        "decoder": {"av": av.__version__, "ffmpeg": av.ffmpeg_version_info},
        "frame_format": FRAME_FORMAT,
        "frame_digests": digests,
        "frame_blocks": grid,
        "frame_blake3": fast,
    }


def errors(a: Any, b: Any) -> dict[str, float]:
    """Max and mean absolute error and PSNR (dB, 8-bit peak) of two uint8 frames."""
    import numpy as np

    diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
    mse = float(np.mean(diff.astype(np.float64) ** 2))
    psnr = math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)
    # How far the block means (what a record's tolerance bounds) and whole-frame means move.
    block_delta = max(abs(x - y) for x, y in zip(blocks(a), blocks(b), strict=True))
    frame_delta = np.abs(a.reshape(-1, 3).mean(axis=0) - b.reshape(-1, 3).mean(axis=0)).max()
    return {
        "max_abs": int(diff.max()),
        "mean_abs": float(diff.mean()),
        "psnr": psnr,
        "block_mean_delta": block_delta,
        "frame_mean_delta": float(frame_delta),
    }


def summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    finite = [r["psnr"] for r in rows if math.isfinite(r["psnr"])]
    return {
        "frames": len(rows),
        "identical_frames": sum(1 for r in rows if r["max_abs"] == 0),
        "max_abs": max((r["max_abs"] for r in rows), default=0),
        "mean_abs": round(sum(r["mean_abs"] for r in rows) / max(len(rows), 1), 6),
        "psnr_min": round(min(finite), 3) if finite else None,
        "psnr_mean": round(sum(finite) / len(finite), 3) if finite else None,
        "block_mean_delta_min": round(min((r["block_mean_delta"] for r in rows), default=0), 3),
        "block_mean_delta_max": round(max((r["block_mean_delta"] for r in rows), default=0), 3),
        # Frames whose block means (and, for contrast, whole-frame means) lie within 1 level.
        "frames_blocks_within_1": sum(1 for r in rows if r["block_mean_delta"] <= 1.0),
        "frames_means_within_1": sum(1 for r in rows if r["frame_mean_delta"] <= 1.0),
    }


def ffmpeg_frames(exe: str, path: Path, width: int, height: int) -> Iterator[Any]:
    """The frames the FFmpeg binary decodes, read from its rawvideo rgb24 pipe one at a time."""
    import numpy as np

    size = width * height * 3
    cmd = [exe, "-v", "error", "-nostdin", "-i", str(path)]
    cmd += ["-f", "rawvideo", "-pix_fmt", FRAME_FORMAT, "-"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(size):
            if len(chunk) != size:
                raise SystemExit(f"error: ffmpeg wrote a partial frame of {path.name}")
            yield np.frombuffer(chunk, dtype=np.uint8).reshape(height, width, 3)
        if proc.wait() != 0:
            raise SystemExit(f"error: ffmpeg could not decode {path.name}")


def agreement(exe: str, path: Path, desc: dict[str, Any]) -> dict[str, Any]:
    rows = []
    second = ffmpeg_frames(exe, path, desc["width"], desc["height"])
    for ours, theirs in zip(frames(path), second, strict=False):
        rows.append(errors(ours, theirs))
    extra = sum(1 for _ in second)
    out = summary(rows)
    out["frame_counts"] = {"pyav": desc["frames"], "ffmpeg": len(rows) + extra}
    return out


def pair(reference: Path, other: Path) -> dict[str, Any]:
    rows = [errors(a, b) for a, b in zip(frames(reference), frames(other), strict=True)]
    per_frame = [
        {k: (round(v, 3) if math.isfinite(v) else None) for k, v in r.items()} for r in rows
    ]
    return {**summary(rows), "per_frame": per_frame}


def main() -> int:
    parser = kit.parser(__doc__, family="video", inputs_required=True)
    parser.add_argument(
        "--second-decoder",
        default="",
        help=f"'imageio-ffmpeg' to check agreement with its FFmpeg binary ({SECOND_DECODER})",
    )
    parser.add_argument(
        "--pairs",
        default="",
        help="REFERENCE:OTHER[,...]: clips of one scene, to show what drift between them is.",
    )
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    if args.second_decoder not in ("", "imageio-ffmpeg"):
        raise SystemExit(f"error: unknown --second-decoder {args.second_decoder!r}")
    inputs = kit.read_inputs(args.inputs)
    args.out.mkdir(parents=True, exist_ok=True)
    outputs, descs = [], {}
    for name, path in sorted(inputs.items()):
        rel = name.rsplit("/", 1)[-1]
        shutil.copyfile(path, args.out / rel)
        descs[name] = describe(args.out / rel)
        outputs.append({"name": name, "kind": "video", "path": rel, "metadata": descs[name]})
    import av

    details: dict[str, Any] = {
        "pinned_decoder": {"av": av.__version__, "ffmpeg": av.ffmpeg_version_info}
    }
    if args.second_decoder:
        kit.require([SECOND_DECODER], stage=STAGE)
        imageio_ffmpeg = importlib.import_module("imageio_ffmpeg")
        exe = imageio_ffmpeg.get_ffmpeg_exe()
        details["second_decoder"] = {
            "package": SECOND_DECODER,
            "ffmpeg": imageio_ffmpeg.get_ffmpeg_version(),
            "agreement": {n: agreement(exe, inputs[n], d) for n, d in descs.items()},
        }
    details["pairs"] = {}
    for text in filter(None, args.pairs.split(",")):
        ref, _, other = text.partition(":")
        if ref not in inputs or other not in inputs:
            raise SystemExit(f"error: --pairs {text!r} names a clip that is not an input")
        details["pairs"][text] = pair(inputs[ref], inputs[other])
    kit.write_outputs(args.out, outputs)
    (args.out / "details.json").write_text(json.dumps(details, indent=1, sort_keys=True) + "\n")
    kit.write_environment(args.out, {"stage": STAGE})
    for name, d in descs.items():
        sys.stderr.write(f"{name}: {d['frames']} frames {d['width']}x{d['height']} {d['codec']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
