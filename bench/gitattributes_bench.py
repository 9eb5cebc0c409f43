"""Benchmark: deciding which files Git LFS tracks, against ``git check-attr filter --stdin``.

Run: uv run python bench/gitattributes_bench.py [--files 20000] [--repeat 3]

A tree of ``--files`` paths (50 folders, 7 subfolders each, four extensions) under Hugging
Face's default ``.gitattributes``: the CPU seconds of the importer's resolution
(``fixture_store.importers.gitattributes``) beside the wall seconds of git answering the same
question for the same paths in one ``check-attr --stdin`` process. Medians of ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from fixture_store.importers import gitattributes

HF_PATTERNS = [
    "*.7z",
    "*.arrow",
    "*.bin",
    "*.bz2",
    "*.ckpt",
    "*.ftz",
    "*.gz",
    "*.h5",
    "*.joblib",
    "*.lfs.*",
    "*.mlmodel",
    "*.model",
    "*.msgpack",
    "*.npy",
    "*.npz",
    "*.onnx",
    "*.ot",
    "*.parquet",
    "*.pb",
    "*.pickle",
    "*.pkl",
    "*.pt",
    "*.pth",
    "*.rar",
    "*.safetensors",
    "saved_model/**/*",
    "*.tar.*",
    "*.tar",
    "*.tflite",
    "*.tgz",
    "*.wasm",
    "*.xz",
    "*.zip",
    "*.zst",
    "*tfevents*",
]
EXTENSIONS = ("json", "bin", "txt", "safetensors")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in HF_PATTERNS)
    paths = [
        f"d{i % 50}/sub{i % 7}/file{i}.{EXTENSIONS[i % len(EXTENSIONS)]}" for i in range(args.files)
    ]
    attributes = gitattributes.Attributes({b"": gitattributes.parse(text.encode(), macros=True)})
    ours, theirs = [], []
    with tempfile.TemporaryDirectory(prefix="bench-gitattributes-") as tmp:
        repo = Path(tmp)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        (repo / ".gitattributes").write_text(text)
        stdin = "".join(f"{p}\n" for p in paths).encode()
        for _ in range(args.repeat):
            start = time.process_time()
            mine = sum(attributes.value(os.fsencode(p), b"filter") == b"lfs" for p in paths)
            ours.append(time.process_time() - start)
            start = time.perf_counter()
            out = subprocess.run(
                ["git", "check-attr", "--stdin", "filter"],
                cwd=repo,
                input=stdin,
                capture_output=True,
                check=True,
            ).stdout
            theirs.append(time.perf_counter() - start)
            assert mine == out.count(b": filter: lfs\n")
    per_file = statistics.median(ours) / args.files * 1e6
    print(f"{args.files} files, {len(HF_PATTERNS)} patterns, {mine} tracked")
    print(f"fixture-store  {statistics.median(ours):.3f} s CPU  ({per_file:.1f} us a file)")
    print(f"git check-attr {statistics.median(theirs):.3f} s wall")


if __name__ == "__main__":
    main()
