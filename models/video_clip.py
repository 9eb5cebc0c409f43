"""A deterministic synthetic video clip: seeded, uint8 RGB frames as one .npy.

Each frame is a smooth colour gradient that drifts over time, a bright square moving on a
Lissajous path, and seeded noise, so consecutive frames differ everywhere and a corrupted frame
is detectable by its own digest.
"""

from __future__ import annotations

import hashlib
import io
import sys

import fixture_store_generator as kit

STAGE = "video"
UPSTREAM = ("numpy==2.4.6",)


def main() -> int:
    parser = kit.parser(__doc__, family="video")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--height", type=int, default=48)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--fps", type=int, default=24)
    parser.add_argument("--noise", type=int, default=12)
    args = kit.checked(parser, upstream=UPSTREAM, stage=STAGE)
    import numpy as np

    rng = np.random.default_rng(args.seed)
    t = np.arange(args.frames, dtype=np.float64)[:, None, None]
    y = np.linspace(0.0, 1.0, args.height)[None, :, None]
    x = np.linspace(0.0, 1.0, args.width)[None, None, :]
    phase = rng.uniform(0, 2 * np.pi, size=3)
    channels = [
        127.5 + 127.5 * np.sin(2 * np.pi * (x + 0.5 * y) + t / args.fps * 2 + phase[c] + c)
        for c in range(3)
    ]
    clip = np.stack(channels, axis=-1)
    side = max(4, args.height // 6)
    for i in range(args.frames):
        cy = int((args.height - side) * (0.5 + 0.5 * np.sin(2 * np.pi * i / args.frames)))
        cx = int((args.width - side) * (0.5 + 0.5 * np.sin(4 * np.pi * i / args.frames + 1)))
        clip[i, cy : cy + side, cx : cx + side, :] = 255.0
    clip += rng.normal(0.0, args.noise, size=clip.shape)
    frames = np.clip(np.rint(clip), 0, 255).astype(np.uint8)

    buf = io.BytesIO()
    np.lib.format.write_array(buf, frames, version=(1, 0), allow_pickle=False)
    data = buf.getvalue()
    header = len(data) - frames.nbytes
    rel = f"synthetic-seed{args.seed}.npy"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / rel).write_bytes(data)
    metadata = {
        "frames": args.frames,
        "height": args.height,
        "width": args.width,
        "channels": 3,
        "fps": args.fps,
        "dtype": "uint8",
        "layout": "npy [frames, height, width, channels]",
        "seed": args.seed,
        "header_bytes": header,
        "frame_digests": ["sha256:" + hashlib.sha256(f.tobytes()).hexdigest() for f in frames],
    }
    outputs = [
        {
            "name": f"{args.family}/{rel}",
            "kind": "video",
            "path": rel,
            "metadata": metadata,
            "arrays": {"frames": {"dtype": "uint8", "shape": list(frames.shape)}},
            "tolerance": {"metric": "exact"},
        }
    ]
    kit.write_outputs(args.out, outputs)
    kit.write_environment(args.out, {"stage": STAGE})
    sys.stderr.write(f"{args.frames} frames {args.width}x{args.height} @ {args.fps} fps\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
