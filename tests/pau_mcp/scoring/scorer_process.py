"""A real ``pau-mcp scorer`` process on a loopback port, for the endpoint's tests."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading

TOKEN = "scorer-secret-token"


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any setting or provider variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_"))}
    return env | extra


def start(args: list[str], env: dict[str, str], seconds: float = 90) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "scorer", *args],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    stderr = process.stderr
    assert stderr is not None  # stderr=PIPE
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stderr:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=seconds)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"the scorer did not announce its URL within {seconds} s: {seen}") from None
        seen.append(line)
        match = re.search(r"serving at (http://\S+)", line)
        if match:
            return process, match.group(1)


def stop(process: subprocess.Popen[str]) -> None:
    """End the scorer (and so its sandbox workers), killing it if it does not stop in time."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
