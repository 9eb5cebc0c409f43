"""Write the HTML template `dvc plots show` fills (.dvc/plots/offline.html) with vega, vega-lite
and vega-embed inside it, so the page it writes renders without a network.

DVC's own page loads the three libraries from a public CDN: offline it is blank. This script
takes the pinned builds from the npm registry (`npm pack`, each tarball checked against the
sha512 below), inlines their minified builds into the template, and keeps their license texts
beside it (.dvc/plots/vendor/). The template has DVC's `{plot_divs}` placeholder and not its
`{scripts}` one, which is where DVC would put the CDN's <script> tags.

    $ uv run python scripts/vendor_vega.py          # rewrite the template and licenses
    $ uv run python scripts/vendor_vega.py --check  # exit 1 if they differ from the pins
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLOTS = ROOT / ".dvc" / "plots"
TEMPLATE = PLOTS / "offline.html"
VENDOR = PLOTS / "vendor"


@dataclass(frozen=True)
class Build:
    package: str
    version: str
    integrity: str  # the registry's dist.integrity of the tarball, checked here too
    build: str  # the minified UMD build inside it
    license: str  # its license file inside it ('' when the tarball ships none)
    spdx: str


# The majors DVC's templates are written for (vega-lite v5 specs), at their latest releases.
BUILDS = (
    Build(
        "vega",
        "5.33.1",
        "sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw==",
        "package/build/vega.min.js",
        "",
        "BSD-3-Clause",
    ),
    Build(
        "vega-lite",
        "5.23.0",
        "sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA==",
        "package/build/vega-lite.min.js",
        "package/LICENSE",
        "BSD-3-Clause",
    ),
    Build(
        "vega-embed",
        "6.29.0",
        "sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q==",
        "package/build/vega-embed.min.js",
        "package/LICENSE",
        "BSD-3-Clause",
    ),
)

PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>DVC plots</title>
<!-- {versions}: inlined by scripts/vendor_vega.py; nothing is fetched -->
{libraries}
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1em; }}
table {{ border-spacing: 15px; }}
</style>
</head>
<body>
{{plot_divs}}
</body>
</html>
"""


def _pack(build: Build, folder: Path) -> Path:
    spec = f"{build.package}@{build.version}"
    done = subprocess.run(
        ["npm", "pack", spec, "--silent", "--pack-destination", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"npm pack {spec} failed: {done.stderr.strip()}")
    tarball = folder / done.stdout.strip().splitlines()[-1]
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if f"sha512-{digest}" != build.integrity:
        sys.exit(f"{spec}: the tarball's sha512 is not the pinned one")
    return tarball


def _member(tarball: Path, name: str) -> str:
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(name)
        if member is None:
            sys.exit(f"{tarball.name} has no {name}")
        return member.read().decode("utf-8")


def _license_note(build: Build) -> str:
    return (
        f"{build.package} {build.version} is licensed {build.spdx} (its package.json); its npm "
        "tarball ships no license file. The license text is in the package's repository, "
        f"https://github.com/vega/{build.package}/blob/v{build.version}/LICENSE\n"
    )


def render() -> dict[Path, str]:
    """Every file this script writes, by path, from the pinned tarballs."""
    files: dict[Path, str] = {}
    scripts = []
    with tempfile.TemporaryDirectory() as tmp:
        for build in BUILDS:
            tarball = _pack(build, Path(tmp))
            code = _member(tarball, build.build)
            if "</script" in code.lower() or "{" + "scripts}" in code:
                sys.exit(f"{build.build} of {build.package} cannot be inlined as it is")
            scripts.append(f"<script>/* {build.package} {build.version} */\n{code}\n</script>")
            name = VENDOR / f"LICENSE.{build.package}"
            files[name] = _member(tarball, build.license) if build.license else _license_note(build)
    versions = ", ".join(f"{b.package} {b.version}" for b in BUILDS)
    files[TEMPLATE] = PAGE.format(versions=versions, libraries="\n".join(scripts))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    args = parser.parse_args()
    files = render()
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}")
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
