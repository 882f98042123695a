"""Build the MCP Bundle (``.mcpb``, manifest 0.4) a desktop host installs with one click.

The bundle is a zip of ``packaging/mcpb`` (the manifest, and the entry point ``server/main.py``), with the manifest's
version set from pyproject.toml, a ``pyproject.toml`` of its own and the project's wheel under ``wheels/``. Its server
type is ``uv``: the host runs ``uv run`` in the unpacked bundle, which installs pau-mcp from the wheel and its
dependencies from PyPI for the host's own platform and Python (wasmtime is a binary wheel, so a bundle cannot carry one
set of them for every machine).

Usage: python packaging/build_mcpb.py [--wheel WHEEL] [--out DIR]   (prints the bundle's path; check it with
``npx @anthropic-ai/mcpb validate``, or ``mcpb info``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "packaging" / "mcpb"


def _wheel(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet", "--wheel-dir", str(into)], check=True
    )
    (wheel,) = into.glob("pau_mcp-*.whl")
    return wheel


def _project(version: str, wheel: str, python: str) -> str:
    """The bundle's own pyproject.toml: one dependency, pau-mcp, from the wheel it carries."""
    return (
        "[project]\n"
        'name = "pau-mcp-bundle"\n'
        f'version = "{version}"\n'
        f'requires-python = "{python}"\n'
        f'dependencies = ["pau-mcp=={version}"]\n\n'
        "[tool.uv]\n"
        "package = false\n\n"
        "[tool.uv.sources]\n"
        f'pau-mcp = {{ path = "wheels/{wheel}" }}\n'
    )


def build_bundle(out: Path, wheel: Path | None = None) -> Path:
    """Write ``pau-mcp-VERSION.mcpb`` into ``out``; returns its path."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    version = project["version"]
    with tempfile.TemporaryDirectory() as temporary:
        staging = Path(temporary) / "bundle"
        shutil.copytree(SOURCE, staging)
        manifest = json.loads((staging / "manifest.json").read_text())
        manifest["version"] = version
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (staging / "wheels").mkdir()
        built = wheel or _wheel(Path(temporary) / "wheel")
        shutil.copy(built, staging / "wheels" / built.name)
        (staging / "pyproject.toml").write_text(_project(version, built.name, project["requires-python"]))
        out.mkdir(parents=True, exist_ok=True)
        bundle = out / f"pau-mcp-{version}.mcpb"
        with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(staging.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(staging).as_posix())
    return bundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="use this wheel of pau-mcp instead of building one")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the bundle goes (default: dist/)")
    options = parser.parse_args()
    print(build_bundle(options.out, options.wheel))


if __name__ == "__main__":
    main()
