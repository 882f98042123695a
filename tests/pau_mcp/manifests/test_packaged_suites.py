"""The suites ship inside the package: an editable install and a built wheel both find ``builtin``.

The wheel tests build the real wheel with pip and install it into a fresh virtual
environment; the environment borrows this one's third-party dependencies through a
``.pth`` line (never this checkout: a path added that way is not a site directory, so
the editable install's finder is not loaded), and the tests check that ``pau_mcp`` and
the suites it finds are the wheel's own files.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from pau_mcp.manifests import ManifestStore

ROOT = Path(__file__).resolve().parents[3]


def test_the_packaged_suites_are_found_through_the_installed_package() -> None:
    from pau_mcp.manifests import packaged_manifests

    packaged = importlib.resources.files("pau_mcp._suites")
    assert (packaged / "builtin" / "suite.json").is_file()
    assert packaged_manifests() == Path(str(packaged))
    store = ManifestStore()
    assert store.dirs == [packaged_manifests()]
    assert "builtin" in store.names() and len(store.suite("builtin").methods) >= 60


# -- the wheel ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools packs whatever a build/ directory holds, stale files included.
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("pau_mcp-*.whl")
    return path


def _source_files(pattern: str) -> set[str]:
    return {path.relative_to(ROOT).as_posix() for path in ROOT.glob(pattern)}


@pytest.mark.slow
def test_the_wheel_holds_every_package_suite_and_runtime_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    suites = {
        f"pau_mcp/_suites/{path.split('/', 1)[1]}" for path in _source_files("manifests/**/*.json")
    }  # a suite's tasks too
    assert suites and suites <= names, f"suites missing from the wheel: {sorted(suites - names)[:5]}"
    # Every package of the source tree (a new sub-package must be listed in pyproject.toml's packages).
    code = _source_files("pau_mcp/**/*.py") | _source_files("wasm_runtime/**/*.py")
    assert code - names == set(), "add these packages to [tool.setuptools] packages in pyproject.toml"
    data = _source_files("pau_mcp/**/*.json") | _source_files("wasm_runtime/guest/*")
    assert data - names == set()


@pytest.mark.slow
def test_a_wheel_installed_in_a_fresh_environment_lists_and_serves_the_builtin_suite(
    wheel: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # This environment's dependencies only; this checkout's editable finder lives in a .pth that is not read.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr

    work = tmp_path / "elsewhere"  # not the checkout: nothing may be found relative to the working directory
    work.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_", "PYTHON"))}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env_dir / "bin" / "pau-mcp"), *args], capture_output=True, text=True, timeout=300, cwd=work,
            env=clean | {"COLUMNS": "250", "PAU_MCP_DATA_DIR": str(tmp_path / "data")},
        )  # fmt: skip

    listed = run("manifests", "list", "--json", "--suite", "builtin")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) >= 60
    table = run("manifests", "list")
    assert table.returncode == 0 and str(site / "pau_mcp" / "_suites" / "builtin") in table.stdout

    where = subprocess.run(
        [python, "-c", "import json, pau_mcp.manifests as m; print(json.dumps([m.__file__, str(m.packaged_manifests())]))"],
        capture_output=True, text=True, cwd=work, env=clean, check=True,
    )  # fmt: skip
    module, suites = (Path(p) for p in json.loads(where.stdout))
    assert module.is_relative_to(site) and suites == site / "pau_mcp" / "_suites"

    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    assert "Code match of the memorising baseline" in demo.stdout
