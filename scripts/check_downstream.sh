#!/usr/bin/env bash
# The downstream example (examples/downstream) as an adopter runs it: a fresh environment resolved
# through the configured package index, an empty store, its pipeline and its tests; `dvc repro` must leave it unchanged;
# a tampered object must then fail its tests, naming the artifact, and a fetch must repair it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export FIXTURE_STORE_DIR="$work/store" UV_PROJECT_ENVIRONMENT="$work/venv" FIXTURE_STORE_REQUIRE=1
cd "$root/examples/downstream"

uv sync --quiet
run() { uv run --quiet "$@"; }
run python - <<'PY'
import importlib.util
heavy = [m for m in ("jax", "onnx", "onnxruntime", "huggingface_hub") if importlib.util.find_spec(m)]
assert not heavy, f"the downstream install pulled in {heavy}"
PY

run dvc repro --quiet
run pytest -q -p no:cacheprovider
changed=$(git status --porcelain -- .)
if [ -n "$changed" ]; then
    echo "dvc repro changed the example's tracked files:"; echo "$changed"; exit 1
fi

name=tinynet-upstream/mlp_seed7.npz
object=$(run fixture-store path "$name")
chmod u+w "$object"
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-20] ^= 1; open(p, 'wb').write(b)" "$object"
if run pytest -q -p no:cacheprovider > "$work/tampered.log" 2>&1; then
    echo "the tests passed over a tampered reference"; exit 1
fi
grep -q "$name" "$work/tampered.log" || { echo "the failure does not name $name"; cat "$work/tampered.log"; exit 1; }
run fixture-store fetch "$name" > /dev/null
run pytest -q -p no:cacheprovider > /dev/null
echo "downstream example: repro, tests, tamper caught and repaired: OK"
