"""The run store on PostgreSQL beside SQLite: what recording a call costs on each, side by side in one run.

Two levels, rounds alternating between the databases so that other load on the machine falls on both alike:

* the store alone: ``RunStore.record_call`` (one committed write transaction per call, as the server makes it)
  from one thread (wall time and the CPU of this process and of the database server per call) and from 8
  threads at once (calls recorded per second);
* the whole server: `pau-mcp serve --transport http` with ``--db`` on each database, 8 concurrent sessions of
  the plain JSON-RPC load generator of ``benchmarks/mcp_server.py`` calling builtin/b001 (calls per second, and
  the CPU per call of the server and of the database server).

PostgreSQL is a throwaway server this script starts (tests/postgres_server.py) with PostgreSQL's defaults, so
every commit is flushed to disk; SQLite runs as the store configures it (WAL, ``synchronous=NORMAL``: a commit
survives a crash of the process, not a power cut, and is not flushed). The store-alone rows add PostgreSQL with
``synchronous_commit=off`` (a commit is flushed within a fraction of a second, not before it returns), the
setting closest to SQLite's. With ``--postgres URL``, an existing database is measured instead (its server's CPU
is then not counted).

Usage: python benchmarks/runstore.py [--calls 2000] [--rounds 5] [--postgres URL] [--write]
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
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import anyio  # noqa: E402
from _markdown import write_section  # noqa: E402
from mcp_server import _raw_session, _server_cpu, _throughput  # noqa: E402

from pau_mcp.contract import ToolStatus  # noqa: E402
from pau_mcp.manifests import tool_name  # noqa: E402
from pau_mcp.runstore import CallRecord, RunStore  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

METHOD = "builtin/b001"
#: A call as the server records one for builtin/b001: its arguments, value and outcome.
CALL = CallRecord(
    METHOD, "fn_0123456789abcdef", "(1234,)", True, ToolStatus.OK, value="24",
    outcome={"status": "ok", "value": "24", "stdout": "", "duration_ms": 0.41}, duration_ms=0.41,
)  # fmt: skip


def _cpu_of_tree(root_pid: int | None) -> float:
    """CPU seconds so far of a process and its children (the PostgreSQL server: its postmaster and backends)."""
    if root_pid is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(entry.name) == root_pid or int(fields[1]) == root_pid:
                total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _own_cpu() -> float:
    return time.process_time()


class _Postgres:
    """The PostgreSQL side: a database per measurement, and its server's CPU so far."""

    def __init__(self, stack: contextlib.ExitStack, url: str | None) -> None:
        self.server = None
        self.url = url
        if url is None:
            from postgres_server import postgres_server

            self.server = stack.enter_context(postgres_server(durable=True))

    def database(self, name: str) -> str:
        if self.server is None:
            assert self.url is not None
            return self.url  # an existing database: the store's tables are created once and shared by the rounds
        return str(self.server.create_database(name))

    def pid(self) -> int | None:
        if self.server is None:
            return None
        return int((self.server.directory / "data" / "postmaster.pid").read_text().split()[0])


def _one_thread(where: Path | str, calls: int, server_pid: int | None) -> dict[str, float]:
    store = RunStore(where)
    session = store.ensure_session(store.ensure_run(f"bench-{secrets.token_hex(4)}", kind="serve"), "s", "http")
    for _ in range(50):  # warm-up: connections open, statements prepared
        store.record_call(session, CALL)
    times = []
    cpu, server = _own_cpu(), _cpu_of_tree(server_pid)
    for _ in range(calls):
        start = time.perf_counter()
        store.record_call(session, CALL)
        times.append(time.perf_counter() - start)
    used = {
        "median_ms": statistics.median(times) * 1000,
        "p99_ms": sorted(times)[int(0.99 * len(times))] * 1000,
        "cpu_ms": (_own_cpu() - cpu) / calls * 1000,
        "server_cpu_ms": (_cpu_of_tree(server_pid) - server) / calls * 1000,
    }
    store.close()
    return used


def _threads(where: Path | str, calls: int, threads: int = 8) -> float:
    """Calls recorded per second by ``threads`` threads of one store at once (as a server's worker threads)."""
    store = RunStore(where)
    run = store.ensure_run(f"bench-{secrets.token_hex(4)}", kind="serve")
    sessions = [store.ensure_session(run, f"s{n}", "http") for n in range(threads)]
    start = threading.Barrier(threads + 1)

    def write(session: int) -> None:
        start.wait(timeout=60)
        for _ in range(calls // threads):
            store.record_call(session, CALL)

    workers = [threading.Thread(target=write, args=(s,)) for s in sessions]
    for worker in workers:
        worker.start()
    start.wait(timeout=60)
    began = time.perf_counter()
    for worker in workers:
        worker.join(timeout=600)
    rate = (calls // threads * threads) / (time.perf_counter() - began)
    store.close()
    return rate


def _alternate(rounds: int, measures: dict[str, Callable[[], dict[str, float]]]) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for label, measure in measures.items():
            for key, value in measure().items():
                results.setdefault(label, {}).setdefault(key, []).append(value)
    return results


@contextlib.contextmanager
def _server(where: Path | str, key: str) -> Iterator[str]:
    # --db on the command line, where _server_cpu finds the server by it.
    with http_server(["--budget", "0", "--methods", METHOD, "--db", str(where)], env={"PAU_MCP_TOOL_KEY": key}) as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="recorded calls per round of the store alone")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per database (medians reported)")
    parser.add_argument("--server-calls", type=int, default=100, help="calls per session per server round")
    parser.add_argument("--postgres", metavar="URL", help="measure this database instead of a throwaway server")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds, options.server_calls = 50, 1, 5
    key = secrets.token_urlsafe(32)
    tool = tool_name(key, METHOD)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        postgres = _Postgres(stack, options.postgres)
        sqlite_db, postgres_db = Path(tmp) / "runs.db", postgres.database("bench")
        relaxed_db = postgres.database("relaxed")
        if "?" not in relaxed_db:  # the same server, with commits flushed in the background
            relaxed_db += "?options=-csynchronous_commit%3Doff"
        pid = postgres.pid()
        alone = _alternate(
            options.rounds,
            {
                "SQLite": lambda: _one_thread(sqlite_db, options.calls, None),
                "PostgreSQL": lambda: _one_thread(postgres_db, options.calls, pid),
                "PostgreSQL, synchronous_commit=off": lambda: _one_thread(relaxed_db, options.calls, pid),
            },
        )
        threaded = _alternate(
            options.rounds,
            {
                "SQLite": lambda: {"rate": _threads(sqlite_db, options.calls)},
                "PostgreSQL": lambda: {"rate": _threads(postgres_db, options.calls)},
                "PostgreSQL, synchronous_commit=off": lambda: {"rate": _threads(relaxed_db, options.calls)},
            },
        )
        with _server(sqlite_db, key) as sqlite_url, _server(postgres_db, key) as postgres_url:
            for url in (sqlite_url, postgres_url):
                anyio.run(_throughput, _raw_session, url, tool, 8, 20)  # warm-up

            def serve(url: str, db: Path | str) -> dict[str, float]:
                marker = str(db)
                before, server = _server_cpu(marker), _cpu_of_tree(pid)
                rate = anyio.run(_throughput, _raw_session, url, tool, 8, options.server_calls)
                after, calls = _server_cpu(marker), 8 * options.server_calls
                return {
                    "rate": rate,
                    "server_ms": (after["server"] - before["server"]) / calls * 1000,
                    "workers_ms": (after["sandbox workers"] - before["sandbox workers"]) / calls * 1000,
                    "database_ms": (_cpu_of_tree(pid) - server) / calls * 1000 if db == postgres_db else 0.0,
                }

            served = _alternate(
                options.rounds,
                {
                    "SQLite": lambda: serve(sqlite_url, sqlite_db),
                    "PostgreSQL": lambda: serve(postgres_url, postgres_db),
                },
            )
    text = _table(options, alone, threaded, served, counted=pid is not None)
    print(text)
    if options.write:
        write_section("runstore", text)


def _table(
    options: argparse.Namespace, alone: dict[str, dict[str, list[float]]], threaded: dict[str, dict[str, list[float]]],
    served: dict[str, dict[str, list[float]]], counted: bool,
) -> str:  # fmt: skip
    med = statistics.median
    database = "its server's CPU" if counted else "not counted (an existing database)"
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {os.getloadavg()[0]:.1f} at the end); PostgreSQL on "
        f"127.0.0.1 with its defaults (every commit flushed); {options.rounds} rounds alternating between the "
        f"databases, medians of the rounds. The database's CPU: {database}.",
        "",
        f"The store alone, `record_call` ({options.calls} calls a round, one committed transaction each):",
        "",
        "| database | one thread: median | p99 | this process's CPU per call | database server's CPU per call | 8 threads: calls/s |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in alone.items():
        lines.append(
            f"| {label} | {med(row['median_ms']):.3f} ms | {med(row['p99_ms']):.3f} ms | {med(row['cpu_ms']):.3f} ms | "
            + (f"{med(row['server_cpu_ms']):.3f} ms" if label != "SQLite" else "(in this process)")
            + f" | {med(threaded[label]['rate']):.0f} |"
        )
    sqlite, postgres = served["SQLite"], served["PostgreSQL"]
    lines += [
        "",
        f"The whole server: `pau-mcp serve --transport http`, 8 sessions x {options.server_calls} calls of {METHOD} "
        "a round (plain JSON-RPC load generator):",
        "",
        "| database | calls/s | server CPU per call | sandbox workers CPU per call | database server's CPU per call |",
        "|---|---|---|---|---|",
    ]
    for label, row in served.items():
        lines.append(
            f"| {label} | {med(row['rate']):.0f} | {med(row['server_ms']):.2f} ms | {med(row['workers_ms']):.2f} ms | "
            + (f"{med(row['database_ms']):.2f} ms |" if label != "SQLite" else "(in the server) |")
        )
    one = alone["PostgreSQL"]["median_ms"], alone["SQLite"]["median_ms"]
    lines += [
        "",
        f"PostgreSQL / SQLite: a recorded call's latency **{med(one[0]) / med(one[1]):.1f}x** "
        f"({med(one[0]) - med(one[1]):+.2f} ms); the server's throughput "
        f"**{med(postgres['rate']) / med(sqlite['rate']):.2f}x**, its own CPU per call "
        f"**{med(postgres['server_ms']) / med(sqlite['server_ms']):.2f}x**.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
