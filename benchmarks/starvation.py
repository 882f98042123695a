"""Another session's ping while many sessions send calls just under the argument limit, on a real HTTP server.

Sixteen sessions (another process, so the pinging client shares nothing with them) call a builtin method again and
again with arguments of just under 64 KiB (a list of 10,900 ints, as one ``args`` literal), and one more session
sends a ping every 50 ms. What the pings wait is what every other agent of the server waits while the largest calls
the limits allow are in flight.

With ``--baseline REF`` the same server as of git commit REF runs beside this one: rounds alternate between the two,
so both see the same machine.

Usage: python benchmarks/starvation.py [--sessions 16] [--rounds 3] [--baseline REF] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _markdown import write_section  # noqa: E402
from loadgen import LARGE_CALLS  # noqa: E402
from mcp_server import _baseline_tree, _only_method_tool, _server_from  # noqa: E402

METHOD = "builtin/b001"
PINGS = 40


async def _pings(
    url: str, tool: str, sessions: int, pings: int = PINGS, settle_s: float = 3.0
) -> tuple[float, list[float]]:
    """The idle ping's median, and the round trip of each of ``pings`` pings while the load runs (seconds), once it
    has run ``settle_s``."""
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as pinger:
        await pinger.initialize()
        idle = []
        for _ in range(10):
            started = time.perf_counter()
            await pinger.send_ping()
            idle.append(time.perf_counter() - started)
        load = subprocess.Popen(
            [sys.executable, "-c", LARGE_CALLS, url, tool, str(sessions)], stderr=subprocess.DEVNULL
        )
        try:
            await anyio.sleep(settle_s)  # every session open and calling
            loaded = []
            for _ in range(pings):
                started = time.perf_counter()
                with anyio.fail_after(30):
                    await pinger.send_ping()
                loaded.append(time.perf_counter() - started)
                await anyio.sleep(0.05)
        finally:
            load.kill()
            load.wait()
    return statistics.median(idle), loaded


@contextlib.contextmanager
def _server(tree: Path, db: Path) -> Iterator[tuple[str, str]]:
    with _server_from(tree, ["--db", str(db), "--budget", "0", "--methods", METHOD]) as url:
        yield url, anyio.run(_only_method_tool, url)


def _row(name: str, idle: list[float], loaded: list[float], loads: list[float]) -> str:
    ordered = sorted(loaded)
    p90 = ordered[int(len(ordered) * 0.9)]
    return (
        f"| {name} | {statistics.median(idle) * 1000:.1f} | {statistics.median(loaded) * 1000:.0f} | "
        f"{p90 * 1000:.0f} | {ordered[-1] * 1000:.0f} | {min(loads):.1f}-{max(loads):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=16, help="sessions sending the large calls")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server (alternating with the baseline)")
    parser.add_argument("--baseline", help="a git commit whose server runs beside this one")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    pings, settle_s = PINGS, 3.0
    if options.smoke:  # the load spins both cores for as long as it runs: about 1.5 s of it, not 5
        options.sessions, options.rounds, pings, settle_s = 2, 1, 5, 1.0
    trees: list[tuple[str, Path]] = [("this tree", ROOT)]
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        if options.baseline:
            trees.append((f"baseline {options.baseline}", stack.enter_context(_baseline_tree(options.baseline))))
        results: dict[str, tuple[list[float], list[float], list[float]]] = {name: ([], [], []) for name, _ in trees}
        for round_number in range(options.rounds):
            for name, tree in trees:
                with _server(tree, Path(tmp) / f"{round_number}-{len(results[name][0])}-{tree.name}.db") as (url, tool):
                    idle, loaded = anyio.run(_pings, url, tool, options.sessions, pings, settle_s)
                results[name][0].append(idle)
                results[name][1].extend(loaded)
                results[name][2].append(os.getloadavg()[0])
                print(f"round {round_number + 1} {name}: max {max(loaded) * 1000:.0f} ms", file=sys.stderr)
    header = (
        f"Measured by `python benchmarks/starvation.py` on {os.cpu_count()} CPUs, Python {platform.python_version()}: "
        f"{options.sessions} sessions calling {METHOD} without pause with arguments of just under 64 KiB, "
        f"{options.rounds} rounds of {pings} pings per server, alternating.\n\n"
        "| server | idle ping median (ms) | ping under load: median (ms) | p90 (ms) | max (ms) | load average |\n"
        "|---|---|---|---|---|---|"
    )
    table = "\n".join([header, *(_row(name, *results[name]) for name, _ in trees)])
    print(table)
    if options.write:
        write_section("starvation", table)


if __name__ == "__main__":
    main()
