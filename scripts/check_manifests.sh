#!/usr/bin/env bash
# Manifests that real projects ship inside their wheels, imported as shipped (zero edits): each
# wheel is downloaded by exact version through the configured package index, checked against
# its pinned SHA-256, unpacked into an empty project, and its manifest imported with
# `fixture-store import --gaps` (files the manifest lists but the wheel does not hold become
# gaps, with url sources where the manifest gives an https URL). The import must succeed and
# register at least the number of records stated here; a second import must change nothing.
#
# Formats: pooch text (three registries of pooch's own test data, one with an indented
# comment, one with URLs), pooch module (scipy.datasets), a JSON map (geodatasets' nested
# provider -> dataset database), TFDS checksum files (a dataset's checksums.tsv and an
# url_checksums file), and a wheel's RECORD.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export FIXTURE_STORE_DIR="$work/store"
prefix=$(uv run --quiet --project "$root" python -c 'import sys; print(sys.prefix)')
fs() { "$prefix/bin/fixture-store" "$@"; }

# requirement | wheel file | its sha256
wheels="
pooch==1.8.2|pooch-1.8.2-py3-none-any.whl|3529a57096f7198778a5ceefd5ac3ef0e4d06a6ddaf9fc2d609b806f25302c47
scipy==1.17.1|scipy-1.17.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl|43af8d1f3bea642559019edfe64e9b11192a8978efbd1539d7bc2aaa23d92de4
geodatasets==2026.11.0|geodatasets-2026.11.0-py3-none-any.whl|7da64f5b2d100358f0fecc56d08a9bf6c917ffb0aa9af8754411fb0323c55168
tensorflow-datasets==4.9.10|tensorflow_datasets-4.9.10-py3-none-any.whl|7ec065f0a628e28152b487ba9cbe72fa36d3854705d9f3abd04c6cf5d7a91527
six==1.17.0|six-1.17.0-py2.py3-none-any.whl|4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274
"

# family | wheel file | manifest inside it | records at least (present + gaps) | extra flags
manifests="
pooch-registry|pooch-1.8.2-py3-none-any.whl|pooch/tests/data/registry.txt|10|
pooch-comments|pooch-1.8.2-py3-none-any.whl|pooch/tests/data/registry_comments.txt|10|
pooch-urls|pooch-1.8.2-py3-none-any.whl|pooch/tests/data/registry-custom-url.txt|10|
scipy-datasets|scipy-1.17.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl|scipy/datasets/_registry.py|3|
geodatasets|geodatasets-2026.11.0-py3-none-any.whl|geodatasets/json/database.json|78|
tfds-aeslc|tensorflow_datasets-4.9.10-py3-none-any.whl|tensorflow_datasets/datasets/aeslc/checksums.tsv|1|
tfds-cars196|tensorflow_datasets-4.9.10-py3-none-any.whl|tensorflow_datasets/url_checksums/cars196.txt|4|
six-record|six-1.17.0-py2.py3-none-any.whl|six-1.17.0.dist-info/RECORD|5|
"

mkdir -p "$work/wheels" "$work/project/provenance"
# shellcheck disable=SC2046 # one requirement a word
"$prefix/bin/python" -m pip download --quiet --no-deps --only-binary :all: -d "$work/wheels" \
    $(cut -d'|' -f1 <<< "$wheels") 2>/dev/null
while IFS='|' read -r requirement file digest; do
    [ -n "$requirement" ] || continue
    echo "$digest  $work/wheels/$file" | sha256sum --check --quiet
    mkdir -p "$work/project/$file"
    (cd "$work/project/$file" && "$prefix/bin/python" -m zipfile -e "$work/wheels/$file" .)
done <<< "$wheels"

cd "$work/project"
while IFS='|' read -r family file manifest least flags; do
    [ -n "$family" ] || continue
    # shellcheck disable=SC2086 # flags are words
    fs import "$file/$manifest" --family "$family" --gaps --json $flags > "$work/out.json"
    count=$("$prefix/bin/python" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["imported"]["written"]) + len(d["imported"]["kept"]) + len(d["imported"]["gaps"]))' "$work/out.json")
    if [ "$count" -lt "$least" ]; then
        echo "$family: $manifest imported $count record(s), expected at least $least" >&2
        exit 1
    fi
    fs import "$file/$manifest" --family "$family" --gaps --json $flags > "$work/again.json"
    "$prefix/bin/python" -c 'import json,sys; d=json.load(open(sys.argv[1]))["imported"]; assert not d["written"], d' "$work/again.json"
    echo "$family: $manifest ($("$prefix/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["format"])' "$work/out.json")) imported as shipped: $count record(s)"
done <<< "$manifests"
fs verify > /dev/null
echo "manifests shipped in real wheels: imported as shipped, verified: OK"
