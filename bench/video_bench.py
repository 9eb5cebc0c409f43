"""Benchmark: checked, lazy video frames vs PyAV alone, and peak memory on hostile clips.

- Decoding: ``fixture_store.video.frames`` (container verified warm, header checked against the
  limits, every RGB24 frame hashed and compared with its record) vs what a user would write
  with PyAV alone (``av.open``, ``decode``, ``to_ndarray(format="rgb24")``), on the registered
  clips of the ``video`` family. Target: per-frame checking costs at most 10% over bare decoding.
- Hostile inputs, each in its own process so its peak RSS is its own: a stream that never ends,
  a header claiming 65,536 x 65,536, a truncated MP4; beside the RSS of a process that only
  imports PyAV.

Usage (after ``fixture-store fetch --family video``, with the same store):
``uv run python -m bench.video_bench [--repeat 9]``
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av

from fixture_store import limits, video
from fixture_store import registry as registry_mod
from fixture_store.access import Fixtures
from fixture_store.errors import HostileContentError
from fixture_store.objects.store import Store
from fixture_store.readers.video import describe, open_clip
from tests.support.clips import Endless, as_binary

ROOT = Path(__file__).resolve().parents[1]
CLIPS = ("video/carphone_pristine.mp4", "video/carphone_distorted.mp4", "video/bikes.mp4")


def bare(path: Path) -> int:
    n = 0
    with av.open(str(path)) as container:
        for frame in container.decode(container.streams.video[0]):
            frame.to_ndarray(format="rgb24")
            n += 1
    return n


def timings(
    repeat: int, ours: Callable[[], object], theirs: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Seconds of ``repeat`` runs each, alternating, after one untimed run of each."""
    ours()
    theirs()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((ours, times[0]), (theirs, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return times


def _refused(fn: Callable[[], object]) -> str:
    try:
        fn()
    except HostileContentError as e:
        return e.rule
    return ""


def child_import(_clip: str) -> str:
    return ""  # PyAV and fixture-store imported, nothing else: the baseline


def child_endless(_clip: str) -> str:
    profile = limits.DEFAULT

    def run() -> None:
        endless = as_binary(Endless(640, 480))
        with open_clip(endless, artifact="v/e", size=profile.video_bytes, limits=profile) as c:
            for _ in c.rgb_frames():
                pass

    return _refused(run)


def child_huge_header(_clip: str) -> str:
    data = b"YUV4MPEG2 W65536 H65536 F30:1 C420jpeg\nFRAME\n" + bytes(1 << 20)
    return _refused(
        lambda: describe(
            io.BytesIO(data),
            artifact="v/h",
            size=len(data),
            limits=limits.DEFAULT,
            filename="h.y4m",
        )
    )


def child_truncated(clip: str) -> str:
    data = Path(clip).read_bytes()[:300_000]
    return _refused(
        lambda: describe(
            io.BytesIO(data),
            artifact="v/t",
            size=len(data),
            limits=limits.DEFAULT,
            filename="t.mp4",
        )
    )


# Each runs in a child process (``--child CASE CLIP``) so its peak RSS is its own.
CHILD: dict[str, Callable[[str], str]] = {
    "import": child_import,
    "endless": child_endless,
    "huge-header": child_huge_header,
    "truncated": child_truncated,
}


def child(case: str, clip: str) -> None:
    start = time.perf_counter()
    refused = CHILD[case](clip)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "rss": rss, "refused": refused}))


def run_child(case: str, clip: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.video_bench", "--child", case, clip],
        capture_output=True,
        text=True,
        check=True,
    )
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--store", help="object store (default: $FIXTURE_STORE_DIR or cache)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    store = Store.at(args.store)
    registry = registry_mod.load(ROOT)
    fx = Fixtures(store, registry)
    print(f"PyAV {av.__version__} (FFmpeg {av.ffmpeg_version_info}), {args.repeat} runs each")
    # On a shared machine other jobs only ever add time: the minimum is the steadier estimate.
    totals = {"median": [0.0, 0.0], "min": [0.0, 0.0]}
    for name in CLIPS:
        path = fx.path(name)  # verified once; the warm state cache serves the timed runs

        def ours(n: str = name) -> int:
            return sum(1 for _ in video.frames(fx, n))

        def theirs(p: Path = path) -> int:
            return bare(p)

        frames = ours()
        runs = timings(args.repeat, ours, theirs)
        cells = []
        for stat, fn in (("median", statistics.median), ("min", min)):
            t_ours, t_theirs = fn(runs[0]), fn(runs[1])
            totals[stat][0] += t_ours
            totals[stat][1] += t_theirs
            cells.append(
                f"{stat} {t_ours * 1000:7.1f} / {t_theirs * 1000:7.1f} ms "
                f"{(t_ours / t_theirs - 1) * 100:+5.1f}%"
            )
        print(f"{name:<30} {frames:4d} frames  checked / PyAV alone: {'   '.join(cells)}")
    overall = "   ".join(f"{stat} {(t[0] / t[1] - 1) * 100:+5.1f}%" for stat, t in totals.items())
    print(f"{'all clips':<30} overhead: {overall}")
    pristine = str(fx.path(CLIPS[0]))
    for case in CHILD:
        got = run_child(case, pristine)
        refused = f"refused [{got['refused']}]" if got["refused"] else ""
        print(
            f"{case:<12} peak RSS {got['rss'] / (1 << 20):7.1f} MiB  "
            f"{got['seconds'] * 1000:8.1f} ms  {refused}"
        )


if __name__ == "__main__":
    main()
