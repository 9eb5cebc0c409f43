#!/usr/bin/env bash
# What a downstream project gets from a plain `uv add fixture-store`: build the wheel, install it
# without extras into a fresh environment (versions from uv.lock), and check that the store,
# registry, verify, the NPZ reader and the pytest plugin work there, that no extra's packages came
# along, and that a command needing an extra says which one.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv="$work/venv"
py="$venv/bin/python"

uv build --quiet --wheel --out-dir "$work/dist"
wheel=$(ls "$work"/dist/fixture_store-*.whl)
uv run --frozen python -c '
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
shipped = ("fixture_store/py.typed", "fixture_store/registry/schema.json",
           "fixture_store/regenerate/kit/fixture_store_generator.py",
           "fixture_store/regenerate/schemas/outputs.json",
           "fixture_store/regenerate/schemas/environment.json",
           "fixture_store/regenerate/schemas/inputs.json")
missing = [n for n in shipped if n not in names]
sys.exit(f"not in the wheel: {missing}" if missing else 0)' "$wheel"

# Every version as locked; only what the core wheel (and pytest) asks for gets installed.
uv export --quiet --frozen --all-extras --all-groups --no-emit-project --no-hashes \
  --format requirements-txt --output-file "$work/constraints.txt"
uv venv --quiet --python "$(uv run --frozen python -c 'import sys; print(sys.executable)')" "$venv"
uv pip install --quiet --python "$py" --constraint "$work/constraints.txt" "$wheel" pytest

"$py" - <<'EOF'
import importlib.util
import sys

extras_only = ["jax", "jaxlib", "dvc", "onnx", "onnxruntime", "ml_dtypes", "huggingface_hub",
               "yaml", "PIL", "pip"]
present = [m for m in extras_only if importlib.util.find_spec(m) is not None]
if present:
    sys.exit(f"the core install brought packages of the extras: {', '.join(present)}")
EOF

project="$work/project"
mkdir -p "$project/data"
cd "$project"
export FIXTURE_STORE_DIR="$work/store"
unset FIXTURE_STORE_REGISTRY FIXTURE_STORE_REQUIRE
fs="$venv/bin/fixture-store"

"$fs" init >/dev/null
"$py" -c "
import numpy as np
np.savez('data/reference.npz', logits=np.arange(12, dtype=np.float32).reshape(3, 4))
"
"$fs" add data/reference.npz --name examples/reference --kind array >/dev/null
"$fs" verify --full >/dev/null

cat >test_reference.py <<'EOF'
import numpy as np
import pytest


@pytest.mark.fixture_store("examples/reference")
def test_reference(fixture_store):
    arrays = fixture_store.arrays("examples/reference")
    np.testing.assert_array_equal(arrays["logits"], np.arange(12, dtype=np.float32).reshape(3, 4))
EOF
"$py" -m pytest -q -p no:cacheprovider --fixture-store-require test_reference.py >"$work/pytest.out" \
  || { cat "$work/pytest.out"; exit 1; }
grep -q '1 passed' "$work/pytest.out" || { cat "$work/pytest.out"; exit 1; }

# A command whose extra is missing: exit 2, the extra and the fix on stderr, no traceback.
mkdir -p data/case && printf 'not a model' >data/case/model.onnx
"$fs" add data/case --name examples/case --kind onnx-case >/dev/null
set +e
"$fs" compare --family examples --jobs 0 >/dev/null 2>"$work/compare.err"
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q "needs the 'onnx' extra" "$work/compare.err" \
  || ! grep -q "uv add 'fixture-store\[onnx\]'" "$work/compare.err" \
  || grep -q Traceback "$work/compare.err"; then
  echo "compare without the onnx extra exited $code:" >&2
  cat "$work/compare.err" >&2
  exit 1
fi

cd "$root"
count() { "$1" -c 'import importlib.metadata as m; print(len(list(m.distributions())))'; }
echo "core install: $(du -sh "$venv" | cut -f1), $(count "$py") packages (with pytest);" \
  "this repository's environment: $(du -sh .venv | cut -f1), $(count .venv/bin/python) packages"
