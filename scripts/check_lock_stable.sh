#!/usr/bin/env bash
# Does this machine reproduce dvc.lock? Run it on a new machine (another CPU, another OS):
# a fresh clone of this repository's HEAD, an empty store, `dvc repro --force` (every stage runs:
# the tracked reports are committed, so a plain repro would find the generators' stages up to
# date and rebuild nothing); `git status` must then
# be clean, since every file a stage tracks holds only what is the same on every machine that
# passes. Otherwise it prints what changed and the dvc.lock diff, and exits 1. A second,
# no-op `dvc repro` follows; its log length is printed (it stays short: a line per family).
#
#   bash scripts/check_lock_stable.sh [WORK_DIR]     # ~6 minutes on 2 cores; WORK_DIR is kept
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
clone="$work/clone"
rm -rf "$clone"
git clone --quiet "$root" "$clone"
cd "$clone"
export FIXTURE_STORE_DIR="$work/store"
uv sync --frozen --quiet

echo "dvc repro --force in $clone (store $FIXTURE_STORE_DIR; log $work/repro.log)"
if ! uv run dvc repro --force > "$work/repro.log" 2>&1; then
    tail -n 40 "$work/repro.log"
    echo "dvc repro failed (the whole log: $work/repro.log)"
    exit 2
fi
changed=$(git status --porcelain)
if [ -n "$changed" ]; then
    echo "dvc repro on this machine changed tracked files:"
    echo "$changed"
    git --no-pager diff
    echo "Each changed hash above is an output that differs on this machine: compare it with a"
    echo "machine whose lock is committed; what differs there belongs in its run report"
    echo "(reports/run/, metrics/run/, plots/run/ beside it), not in the tracked file."
    exit 1
fi
uv run dvc repro > "$work/noop.log" 2>&1
echo "dvc.lock is reproduced on this machine; a second, no-op dvc repro printed" \
    "$(wc -l < "$work/noop.log") lines ($work/noop.log)"
