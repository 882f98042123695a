"""MCP round trips: a builtin-method call beside a no-op tool on the same real server, over stdio and HTTP.

Starts `pau-mcp serve` (with a hidden no-op tool), drives it with the official
MCP client, and measures in one run:

* median and p99 round trip of >= 200 calls of a builtin method and of the no-op tool, over stdio and over HTTP;
* calls per second with 8 concurrent HTTP sessions;
* the same with requests of the 2026-07-28 revision (no handshake, each request carrying its version and client in
  ``_meta``) beside handshake-era sessions, on one server, rounds alternating, with the server's CPU per call.

Targets: a builtin-method call within 3 ms of the no-op floor at the median; at least 300 calls/s with 8 sessions.
The load for throughput comes from a plain JSON-RPC client (like wrk), and, for comparison, from the SDK client.

With ``--baseline REF`` the same server as of git commit REF (extracted with ``git archive``) runs beside this
one: rounds alternate between the two, and the table gives both, with the server's CPU per call, so the cost of
a change (the limits that keep one client from exhausting the server, for one) is measured, not guessed.

Usage: python benchmarks/mcp_server.py [--calls 300] [--baseline REF] [--write]

(Not named mcp.py: a script directory holding mcp.py would shadow the MCP SDK for every script in it.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _cpu  # noqa: E402
from _markdown import write_section  # noqa: E402

from pau_mcp.manifests import ManifestStore, tool_name  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

METHOD = "builtin/b001"
#: Calls per session in a throughput round (``--smoke``: a few).
ROUND_CALLS = 150
MODERN = "2026-07-28"
#: The floor: a `submit` without arguments is refused at once, after the session lookup, with no sandbox or store
#: work. It is what every server tree has, so the production server needs no benchmark-only tool.
FLOOR_TOOL = "submit"


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(session: ClientSession, tool: str, calls: int) -> tuple[list[float], list[float]]:
    method, noop = [], []
    for i in range(10):
        await session.call_tool(tool, {"arg0": i})
        await session.call_tool(FLOOR_TOOL, {})
    for i in range(calls):
        start = time.perf_counter()
        await session.call_tool(FLOOR_TOOL, {})
        noop.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await session.call_tool(tool, {"arg0": 1000 + i})
        method.append((time.perf_counter() - start) * 1000)
    return method, noop


async def _stdio(db: Path, tool: str, calls: int, tree: Path = ROOT) -> tuple[list[float], list[float]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pau_mcp", "serve", "--budget", "0", "--db", str(db)],
        cwd=str(tree), env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await _measure(session, tool, calls)


async def _http_session(
    url: str, tool: str, calls: int, out: list[float] | None = None
) -> tuple[list[float], list[float]]:
    async with httpx2.AsyncClient(timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                if out is None:
                    return await _measure(session, tool, calls)
                for i in range(calls):
                    await session.call_tool(tool, {"arg0": i})
                    out.append(1.0)
                return [], []


class _Connection:
    """One keep-alive HTTP/1.1 connection, as light as a load generator can be (no HTTP client library)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> _Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.writer is not None
        self.writer.close()

    async def post(
        self, body: dict[str, Any], session: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[dict[str, str], bytes]:
        assert self.reader is not None and self.writer is not None
        payload = json.dumps(body).encode()
        extra = f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n" if session else ""
        extra += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.writer.write(
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\naccept: application/json, text/event-stream\r\n"
            f"content-type: application/json\r\n{extra}content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        if not head[0].startswith("HTTP/1.1 2"):
            raise RuntimeError(f"server answered {head[0]}")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
        if "content-length" not in headers:
            raise RuntimeError("the load generator reads only responses with a content-length")
        return headers, await self.reader.readexactly(int(headers["content-length"]))


async def _raw_session(url: str, tool: str, calls: int, done: list[float]) -> None:
    """One MCP session spoken as plain JSON-RPC over HTTP: a load generator as light as wrk, not the SDK client."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    async with _Connection(url) as connection:
        headers, _ = await connection.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        session = headers.get("mcp-session-id")  # none from a --stateless server: every request stands alone
        await connection.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        for i in range(calls):
            body = {
                "jsonrpc": "2.0",
                "id": i + 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {"arg0": i}},
            }
            reply = json.loads((await connection.post(body, session))[1])
            assert reply["result"]["structuredContent"]["status"] == "ok", reply
            done.append(1.0)


async def _raw_modern(url: str, tool: str, calls: int, done: list[float]) -> None:
    """One agent speaking the 2026-07-28 revision as plain JSON-RPC over HTTP: no handshake, every request with its
    version, capabilities and client in ``_meta`` and the routing headers the revision asks for."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    async with _Connection(url) as connection:
        for i in range(calls):
            body = {
                "jsonrpc": "2.0",
                "id": i + 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {"arg0": i}, "_meta": meta},
            }
            reply = json.loads((await connection.post(body, headers=headers))[1])
            assert reply["result"]["structuredContent"]["status"] == "ok", reply
            done.append(1.0)


async def _throughput(
    session: Callable[[str, str, int, list[float]], Coroutine[Any, Any, object]], url: str, tool: str, sessions: int,
    calls: int, labelled: bool = False,
) -> float:  # fmt: skip
    """Calls per second over ``sessions`` concurrent ``session(url, tool, calls, done)`` loops; with ``labelled``,
    each under a label of its own (``?session=``), as agents of one operator are."""
    done: list[float] = []
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for n in range(sessions):
            group.start_soon(session, f"{url}?session=bench-{n}" if labelled else url, tool, calls, done)
    return len(done) / (time.perf_counter() - start)


def _eras(url: str, db: Path, tool: str, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Alternating rounds of handshake-era sessions and 2026-07-28 requests on one server (8 agents x 150 calls,
    each under a label of its own), with the server's and its workers' CPU per call."""
    results: dict[str, dict[str, list[float]]] = {}
    anyio.run(_throughput, _raw_modern, url, tool, 8, 20, True)  # warm-up
    for _ in range(rounds):
        for era, session in (("handshake (2025-11-25)", _raw_session), ("2026-07-28", _raw_modern)):
            before = _server_cpu(str(db))
            rate = anyio.run(_throughput, session, url, tool, 8, ROUND_CALLS, True)
            after = _server_cpu(str(db))
            row = results.setdefault(era, {"rate": [], "server": [], "sandbox workers": []})
            row["rate"].append(rate)
            for role in ("server", "sandbox workers"):
                row[role].append((after[role] - before[role]) / (8 * ROUND_CALLS) * 1000)
    return results


def _eras_table(results: dict[str, dict[str, list[float]]]) -> str:
    med = statistics.median
    lines = [
        "Both protocol eras on one server, rounds alternating (8 agents x 150 calls each, every agent under a label "
        "of its own, the plain JSON-RPC generator; medians, with the range of the rounds; CPU per call from the "
        "server's and its workers' counters):",
        "",
        "| era | calls/s (8 agents) | range | server CPU per call | sandbox workers CPU per call |",
        "|---|---|---|---|---|",
    ]
    for era, row in results.items():
        lines.append(
            f"| {era} | {med(row['rate']):.0f} | {min(row['rate']):.0f}-{max(row['rate']):.0f} | "
            f"{med(row['server']):.2f} ms | {med(row['sandbox workers']):.2f} ms |"
        )
    legacy, modern = results["handshake (2025-11-25)"], results["2026-07-28"]
    lines += [
        "",
        f"2026-07-28 / handshake: throughput **{med(modern['rate']) / med(legacy['rate']):.2f}x**, server CPU per call "
        f"**{med(modern['server']) / med(legacy['server']):.2f}x**.",
    ]
    return "\n".join(lines)


@contextlib.contextmanager
def _baseline_tree(ref: str) -> Iterator[Path]:
    """This repository's files as of ``ref``, in a temporary directory (nothing in the work tree changes)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


@contextlib.contextmanager
def _server_from(tree: Path, args: list[str]) -> Iterator[str]:
    """`pau-mcp serve --transport http` run from the sources in ``tree``; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", *args],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )  # fmt: skip
    try:
        stderr = process.stderr
        assert stderr is not None
        for line in stderr:
            found = re.search(r"serving at (http://\S+)", line)
            if found:
                threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
                yield found.group(1)
                return
        raise SystemExit("the baseline server did not start")
    finally:
        process.terminate()
        process.wait(timeout=30)


async def _only_method_tool(url: str) -> str:
    """The one hidden-method tool a server started with ``--methods METHOD`` offers: a baseline from before tool
    names were keyed with the deployment key names it its own way."""
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools if t.name.startswith("fn_")]
    if len(names) != 1:
        raise SystemExit(f"the baseline server offers {len(names)} method tools, expected 1")
    return names[0]


def _server_cpu(marker: str) -> dict[str, float]:
    """CPU seconds so far of the server whose command line holds ``marker``, and of its sandbox workers."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = (int(fields[1]), command, (int(fields[11]) + int(fields[12])) / tick)
    server = [pid for pid, (_, command, _) in stats.items() if marker in command and " serve " in command]
    # A server of several processes (--processes) is its supervisor and the servers it forked: all of them are the
    # server, and its workers are the children of any of them that are not servers themselves.
    workers = [pid for pid, (parent, _, _) in stats.items() if parent in server and pid not in server]
    return {"server": sum(stats[p][2] for p in server), "sandbox workers": sum(stats[p][2] for p in workers)}


def _compare(
    url: str, db: Path, tool: str, base_url: str, base_db: Path, base_tool: str, rounds: int
) -> dict[str, dict[str, list[float]]]:
    """Alternating throughput rounds against this server and the baseline's, with each one's CPU per call."""
    results: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for label, target, marker, name in (
            ("baseline", base_url, str(base_db), base_tool),
            ("this tree", url, str(db), tool),
        ):
            before = _server_cpu(marker)
            rate = anyio.run(_throughput, _raw_session, target, name, 8, ROUND_CALLS)
            after = _server_cpu(marker)
            row = results.setdefault(label, {"rate": [], "server": [], "sandbox workers": []})
            row["rate"].append(rate)
            for role in ("server", "sandbox workers"):
                row[role].append((after[role] - before[role]) / (8 * ROUND_CALLS) * 1000)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--rounds", type=int, default=5, help="throughput rounds of 8 x 150 calls (median reported)")
    parser.add_argument("--baseline", metavar="REF", help="also measure the server as of this git commit, side by side")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        global ROUND_CALLS
        options.calls, options.rounds, ROUND_CALLS = 10, 1, 5
    compared: dict[str, dict[str, list[float]]] = {}
    base_stdio: tuple[list[float], list[float]] | None = None
    rounds_cpu: list[dict[str, float]] = []
    key = secrets.token_urlsafe(32)
    os.environ["PAU_MCP_TOOL_KEY"] = key  # both servers below inherit it, so the tool's name is known here
    tool = tool_name(key, ManifestStore().method(METHOD).id)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        stdio_method, stdio_noop = anyio.run(_stdio, db, tool, options.calls)
        with http_server(["--budget", "0", "--db", str(db)]) as url:
            http_method, http_noop = anyio.run(_http_session, url, tool, options.calls)
            rate = anyio.run(_throughput, _http_session, url, tool, 8, 5 if options.smoke else 50)
            anyio.run(_throughput, _raw_session, url, tool, 8, 20)  # warm-up
            rounds = []
            for _ in range(options.rounds):
                before = _cpu.snapshot()
                rounds.append(anyio.run(_throughput, _raw_session, url, tool, 8, ROUND_CALLS))
                used = _cpu.spent(before, _cpu.snapshot())
                rounds_cpu.append({role: seconds / (8 * ROUND_CALLS) * 1000 for role, seconds in used.items()})
            eras = _eras(url, db, tool, options.rounds)
            if options.baseline:
                with _baseline_tree(options.baseline) as tree:
                    base_db = Path(tmp) / "baseline.db"
                    args = ["--budget", "0", "--db", str(base_db), "--methods", METHOD]
                    with _server_from(tree, args) as base_url:
                        base_tool = anyio.run(_only_method_tool, base_url)
                        base_stdio = anyio.run(_stdio, base_db, base_tool, options.calls, tree)
                        anyio.run(_throughput, _raw_session, base_url, base_tool, 8, 20)  # warm-up
                        compared = _compare(url, db, tool, base_url, base_db, base_tool, options.rounds)
    rows = []
    for name, method, noop in (("stdio", stdio_method, stdio_noop), ("HTTP (JSON responses)", http_method, http_noop)):
        gap = statistics.median(method) - statistics.median(noop)
        rows.append(
            f"| {name} | {statistics.median(noop):.2f} ms | {_percentile(noop, 0.99):.2f} ms | {statistics.median(method):.2f} ms | "
            f"{_percentile(method, 0.99):.2f} ms | **{gap:+.2f} ms** |"
        )
    table = "\n".join(
        [
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
            f"{len(os.sched_getaffinity(0))} CPUs (load average {os.getloadavg()[0]:.1f} at the end); "
            f"{options.calls} calls each, alternating the floor (a refused `submit`, no work) and the method; "
            f"method {METHOD} (a fresh sandbox instance per call).",
            "",
            "| transport | no-op median | no-op p99 | method median | method p99 | method - no-op (median) |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"Throughput, 8 concurrent HTTP sessions: **{statistics.median(rounds):.0f} calls/s** (median of {len(rounds)} rounds "
            f"of {ROUND_CALLS} calls per session; range {min(rounds):.0f}-{max(rounds):.0f}) with a plain JSON-RPC load generator on "
            f"keep-alive sockets; {rate:.0f} calls/s when the load comes from 8 official SDK client sessions (50 calls each) in one "
            "process, which then spends a large share of the two cores itself.",
            "",
            "CPU per call during the plain-generator rounds (medians, from the processes' counters): "
            + ", ".join(
                f"{role} {statistics.median(r.get(role, 0.0) for r in rounds_cpu):.2f} ms"
                for role in ("server", "sandbox workers")
            )
            + f", load generator {statistics.median(r['this process'] for r in rounds_cpu):.2f} ms.",
        ]
    )
    if compared:
        table += "\n\n" + _comparison(options.baseline, compared, base_stdio, (stdio_method, stdio_noop))
    eras_table = (
        f"Measured {time.strftime('%Y-%m-%d')} (load average {os.getloadavg()[0]:.1f} at the end). " + _eras_table(eras)
    )
    print(table + "\n\n" + eras_table)
    if options.write:
        write_section("mcp", table)
        write_section("mcp-eras", eras_table)


def _comparison(
    ref: str, compared: dict[str, dict[str, list[float]]], base_stdio: tuple[list[float], list[float]] | None,
    stdio: tuple[list[float], list[float]],
) -> str:  # fmt: skip
    base, now = compared["baseline"], compared["this tree"]
    med = statistics.median
    lines = [
        f"Beside the server as of `{ref}` (rounds alternating between the two servers, each 8 sessions x 150 calls "
        "with the plain generator; medians; CPU per call from each server's and its workers' counters):",
        "",
        "| server | calls/s (8 sessions) | server CPU per call | sandbox workers CPU per call | stdio no-op median | stdio method median |",
        "|---|---|---|---|---|---|",
    ]
    for label, row, (method, noop) in (("baseline", base, base_stdio or ([], [])), ("this tree", now, stdio)):
        lines.append(
            f"| {label} | {med(row['rate']):.0f} | {med(row['server']):.2f} ms | {med(row['sandbox workers']):.2f} ms | "
            + (f"{med(noop):.2f} ms | {med(method):.2f} ms |" if method else "n/a | n/a |")
        )
    lines += [
        "",
        f"This tree / baseline: throughput **{med(now['rate']) / med(base['rate']):.2f}x**, server CPU per call "
        f"**{med(now['server']) / med(base['server']):.2f}x**.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
