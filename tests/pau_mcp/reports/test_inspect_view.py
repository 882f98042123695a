"""An exported log opens in `inspect view`, checked in a real headless Chromium: a sample's transcript shows its
tool calls."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import open_page
from click.testing import CliRunner
from scripted_runs import scripted_run

from pau_mcp.cli import main

inspect_log = pytest.importorskip("inspect_ai.log", reason="the inspect extra: pip install 'pau-mcp[inspect]'")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(url: str, process: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"inspect view exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"inspect view did not answer at {url} within {timeout_s:g} s")


def test_inspect_view_shows_an_exported_samples_transcript_with_its_tool_calls(tmp_path: Path) -> None:
    scripted_run(tmp_path, "paper")
    out = tmp_path / "logs"
    exported = CliRunner().invoke(
        main, ["export", "inspect", "paper", "--out", str(out), "--db", str(tmp_path / "runs.db")]
    )
    assert exported.exit_code == 0, exported.output
    (path,) = out.glob("*.eval")
    sample = next(s for s in inspect_log.read_eval_log(str(path)).samples if s.id == "builtin/b001")
    (call, *_) = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]

    port = _free_port()
    viewer = Path(sys.executable).with_name("inspect")
    process = subprocess.Popen(
        [str(viewer), "view", "--log-dir", str(out), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_for(url, process)
        page = open_page(
            url,
            [
                {"wait_text": "builtin/b001"},
                {"click_text": "builtin/b001"},
                {"wait_text": "TRANSCRIPT"},
                {"wait_text": f"TOOL: {call.function.upper()}"},
                {"eval": "document.body.innerText"},
            ],
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    text = page["values"][-1]
    assert "Sample builtin/b001 (Epoch 1)" in text
    assert f'args: "{call.arguments["args"]}"' in text  # the call's argument, then its result
    assert "returned" in text or "raised" in text
    assert not [e for e in page["errors"] if "Error" in e and "404" not in e]
