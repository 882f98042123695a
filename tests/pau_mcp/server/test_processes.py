"""Processes end with their parent: a killed `pau-mcp eval` or `serve` leaves no server and no sandbox worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT
from fakellm import FakeLLM, Reply

MODEL = "openai/fake-agent"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def _descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid``, with its command line."""
    tree, found, stack = _children(), {}, [pid]
    while stack:
        for child in tree.get(stack.pop(), []):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    found[child] = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _gone(pids: dict[int, str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (left := {pid: cmd for pid, cmd in pids.items() if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running after {timeout} s: {left}"


def _tree_with_server_and_workers(pid: int) -> dict[int, str]:
    found: dict[int, str] = {}

    def ready() -> bool:
        found.clear()
        found.update(_descendants(pid))
        return any(" serve " in c for c in found.values()) and any("wasm_runtime.workers" in c for c in found.values())

    _wait_for(ready, 120, "the server and its sandbox workers never started")
    return found


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_eval_leaves_no_server_and_no_sandbox_worker_behind(tmp_path: Path, how: signal.Signals) -> None:
    # The model answers slowly, so the run is in the middle of its episodes when it is killed.
    with FakeLLM(responder=lambda body: Reply(text="I will try a small number.", delay_s=60)) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        command = [
            sys.executable, "-m", "pau_mcp", "eval", "--model", MODEL, "--agent", "paper", "--run", "killed",
            "--db", str(tmp_path / "runs.db"), "--data-dir", str(tmp_path), "--concurrency", "2", "--limit", "2",
        ]  # fmt: skip
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            tree = _tree_with_server_and_workers(process.pid)
            _wait_for(lambda: len(fake.requests) >= 1, 60, "the agent never asked the model")
            process.send_signal(how)
            process.wait(timeout=30)
            _gone(tree, 20)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read().decode(errors="replace")


def test_a_private_server_stops_when_the_process_that_launched_it_is_killed(tmp_path: Path) -> None:
    parent = textwrap.dedent(
        f"""
        import sys, time
        from pau_mcp.server.launch import http_server
        with http_server(["--db", {str(tmp_path / "runs.db")!r}]) as url:
            print(url, flush=True)
            time.sleep(600)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("http://")
        tree = _tree_with_server_and_workers(process.pid)
        process.kill()
        process.wait(timeout=30)
        _gone(tree, 20)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_stops_cleanly_on_sigterm_with_its_workers(tmp_path: Path, transport: str) -> None:
    command = [sys.executable, "-m", "pau_mcp", "serve", "--transport", transport, "--port", "0"]
    process = subprocess.Popen(
        [*command, "--db", str(tmp_path / "runs.db")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(
            lambda: any("wasm_runtime.workers" in c for c in _descendants(process.pid).values()), 120, "no workers"
        )
        tree = _descendants(process.pid)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        _gone(tree, 20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    stderr = process.stderr.read().decode(errors="replace")
    assert code in (0, -signal.SIGTERM) and "Traceback" not in stderr, stderr[-2000:]
