"""`pau-mcp eval`'s memory while the model server floods its reply: this tree beside a baseline, in one run.

A scripted OpenAI-compatible server (tests/fakellm.py) answers every request with a reply that never ends: either
a JSON body whose text never closes (``whole``), or, after a first reply that comes too late, so that the client
reads replies as a stream, a stream of text parts that never finishes (``streamed``). `pau-mcp eval` (the paper
agent, one method) runs against it from each tree as a process of its own; its resident memory is read every half
second until it exits or the window ends, and its peak (VmHWM) is reported with how the command ended. The issue
that found it measured 2.48 GB after 110 s before the cap.

A run whose memory passes ``--ceiling`` MB is killed there (the machine is shared; without the cap the whole-body
flood took 11.9 GB in 120 s here).

Usage: python benchmarks/replies.py [--baseline REF] [--window 120] [--ceiling 3000] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _markdown import write_section  # noqa: E402
from fakellm import FakeLLM, Flood, Reply  # noqa: E402

TIMEOUT_S = 2.0


def _responder(scenario: str) -> Any:
    def respond(body: dict[str, Any]) -> Reply | Flood:
        if scenario == "streamed" and not body.get("stream"):
            return Reply(text="late", delay_s=TIMEOUT_S + 1)  # too late: the client reads replies as a stream
        return Flood("flooding the client with words ")

    return respond


@contextlib.contextmanager
def _tree(ref: str | None) -> Iterator[Path]:
    if ref is None:
        yield ROOT
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def _memory(pid: int) -> tuple[float, float]:
    """``(resident MB, peak resident MB)`` of a process, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.split()
    return int(fields["VmRSS"][0]) / 1024, int(fields["VmHWM"][0]) / 1024


def measure(tree: Path, scenario: str, window_s: float, ceiling_mb: float) -> dict[str, Any]:
    """Run `pau-mcp eval` from ``tree`` against a flooding server; its peak memory and how it ended."""
    with FakeLLM(responder=_responder(scenario)) as fake, tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "PYTHONPATH": str(tree), "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        command = [
            sys.executable, "-m", "pau_mcp", "eval", "--model", "openai/flood", "--agent", "paper", "--methods",
            "builtin/b001", "--budget", "1", "--no-score", "--data-dir", data, "--llm-timeout", str(TIMEOUT_S),
            "--llm-retries", "1",
        ]  # fmt: skip
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = 0.0
        ended = f"still running after {window_s:.0f} s (killed)"
        try:
            while time.monotonic() - started < window_s:
                if process.poll() is not None:
                    break
                with contextlib.suppress(OSError, KeyError, ValueError):
                    _, peak = _memory(process.pid)
                if peak > ceiling_mb:
                    ended = f"still running after {time.monotonic() - started:.0f} s (killed at the ceiling)"
                    break
                time.sleep(0.5)
            if process.poll() is None:
                process.kill()
            else:
                tail = (process.stderr.read() if process.stderr else b"").decode(errors="replace")
                cut = "cut at" in " ".join(tail.split())
                ended = f"exit {process.returncode} after {time.monotonic() - started:.0f} s" + (
                    ", the reply cut at the cap" if cut else ""
                )
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        return {"peak_mb": peak, "ended": ended, "sent_mb": sum(fake.sent) / (1 << 20)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="a git ref to measure beside this tree (before the cap)")
    parser.add_argument("--window", type=float, default=120.0, help="seconds each run may take before it is killed")
    parser.add_argument("--ceiling", type=float, default=3000.0, help="MB of memory at which a run is killed")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.window, args.ceiling = 5.0, 600.0
    rows = []
    trees = [("this tree", None)] + ([(f"baseline {args.baseline}", args.baseline)] if args.baseline else [])
    for scenario in ("whole", "streamed"):
        for name, ref in trees:
            with _tree(ref) as tree:
                found = measure(tree, scenario, args.window, args.ceiling)
            print(f"{scenario} {name}: {found}", file=sys.stderr)
            rows.append(f"| {scenario} | {name} | {found['peak_mb']:.0f} | {found['sent_mb']:.0f} | {found['ended']} |")
    load = os.getloadavg()[0]
    body = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} by `python benchmarks/replies.py` on {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()} (load average {load:.1f} at the end), a window of {args.window:.0f} s per run:",
        "",
        "| reply | tree | eval's peak resident MB | MB the server wrote | how eval ended |",
        "|---|---|---|---|---|",
        *rows,
    ])  # fmt: skip
    print(body)
    if args.write:
        write_section("replies", body)


if __name__ == "__main__":
    main()
