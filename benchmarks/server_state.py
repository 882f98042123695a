"""What a long-lived HTTP server keeps per credential: its memory and its run store as labels and runs pile up.

Starts `pau-mcp serve --transport http` and, as the main token's holder (trusted, docs/server.md), names a new label
or run on every request, which is what makes the server hold something for each: the 2026-07-28 era's requests
(each a `submit` without arguments, refused at once after the credential is resolved: no sandbox, no call record),
in phases:

* ``labels``: N requests, each naming a new label in the server's run (a new session row each);
* ``runs``: N requests, each naming a new run (a new run row and session row each);
* ``sessions``: N/5 handshake-era MCP sessions, each under a new label, narrowed with ``open`` and ended with
  HTTP DELETE (what the SDK and the server keep per MCP session, and give back).

After each phase it reads the server's resident memory (``VmRSS``, the server process alone) and the run store's
size. With ``--baseline REF`` the server as of git commit REF runs the same phases first, so the two are side by
side in one run.

Usage: python benchmarks/server_state.py [--count 5000] [--baseline REF] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _markdown import write_section  # noqa: E402
from mcp_server import _baseline_tree  # noqa: E402

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


@contextlib.contextmanager
def _server(tree: Path, db: Path) -> Iterator[tuple[str, int]]:
    """`pau-mcp serve --transport http` from the sources in ``tree``; yields its URL and process id."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--db", str(db),
         "--workers", "1", "--run", "state-bench"],
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
                yield found.group(1), process.pid
                return
        raise SystemExit("the server did not start")
    finally:
        process.terminate()
        process.wait(timeout=30)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmRSS")


def _store_mb(db: Path) -> float:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 1e6


def _modern(client: httpx2.Client, url: str, i: int, **query: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "submit", "arguments": {}, "_meta": META},
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "submit"}
    reply = client.post(url, params=query, json=body, headers=headers)
    status = reply.json()["result"]["structuredContent"]["status"]
    assert status == "invalid_input", reply.text


def _session(client: httpx2.Client, url: str, label: str) -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    query = {"session": label}
    reply = client.post(url, params=query, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    headers = {"mcp-session-id": reply.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    client.post(url, params=query, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = client.post(url, params=query, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tools = [t["name"] for t in listed.json()["result"]["tools"] if t["name"].startswith("fn_")][:3]
    opened = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "open", "arguments": {"methods": tools}},
    }
    assert (
        client.post(url, params=query, headers=headers, json=opened).json()["result"]["structuredContent"]["status"]
        == "ok"
    )
    assert client.delete(url, headers=headers).status_code == 200


def _phases(tree: Path, db: Path, count: int) -> list[tuple[str, float, float, float]]:
    """(phase, resident MB, store MB, seconds) after start-up and after each phase."""
    rows = []
    with _server(tree, db) as (url, pid), httpx2.Client(timeout=60, headers={"accept": "application/json"}) as client:
        for i in range(200):  # warm-up: the same label, nothing new to keep
            _modern(client, url, i, session="warm-up")
        time.sleep(0.5)
        rows.append(("start (after 200 warm-up requests)", _rss_mb(pid), _store_mb(db), 0.0))
        started = time.perf_counter()
        for i in range(count):
            _modern(client, url, i, session=f"label-{i}")
        rows.append((f"+ {count:,} new labels", _rss_mb(pid), _store_mb(db), time.perf_counter() - started))
        started = time.perf_counter()
        for i in range(count):
            _modern(client, url, i, session="agent", run=f"run-{i}")
        rows.append((f"+ {count:,} new runs", _rss_mb(pid), _store_mb(db), time.perf_counter() - started))
        started = time.perf_counter()
        with httpx2.Client(timeout=60, headers={"accept": "application/json, text/event-stream"}) as sessions:
            for i in range(count // 5):
                _session(sessions, url, f"session-{i}")
        time.sleep(1)
        rows.append(
            (
                f"+ {count // 5:,} MCP sessions (new labels, open, DELETE)",
                _rss_mb(pid),
                _store_mb(db),
                time.perf_counter() - started,
            )
        )
    return rows


def _table(results: dict[str, list[tuple[str, float, float, float]]], count: int) -> str:
    first = next(iter(results.values()))
    load = os.getloadavg()[0]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (load average {load:.1f} at the end). The server's resident memory (its own process, "
        "not the sandbox workers) and the run store's size after each phase; every request names a new label or "
        "run, as only the main token's holder can:",
        "",
        "| phase | " + " | ".join(f"{name}: resident MB | {name}: store MB" for name in results) + " |",
        "|---|" + "---|---|" * len(results),
    ]
    for n, (phase, *_rest) in enumerate(first):
        cells = []
        for rows in results.values():
            _, rss, store, _seconds = rows[n]
            base_rss = rows[0][1]
            cells.append(f"{rss:.1f} ({rss - base_rss:+.1f})" if n else f"{rss:.1f}")
            cells.append(f"{store:.2f}")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="new labels (and new runs) per phase")
    parser.add_argument("--baseline", metavar="REF", help="also measure the server as of this git commit, first")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.count = 20
    results: dict[str, list[tuple[str, float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if options.baseline:
            with _baseline_tree(options.baseline) as tree:
                results[f"baseline {options.baseline}"] = _phases(tree, Path(tmp) / "baseline.db", options.count)
        results["this tree"] = _phases(ROOT, Path(tmp) / "runs.db", options.count)
    table = _table(results, options.count)
    print(table)
    print(json.dumps(results, indent=1), file=sys.stderr)
    if options.write:
        write_section("server-state", table)


if __name__ == "__main__":
    main()
