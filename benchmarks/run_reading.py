"""`pau-mcp runs show` and `runs export` on a run of a million calls: time and peak memory, beside a baseline.

Writes a SQLite run store holding one run of N calls (default 1,000,000) over 8 sessions and a submission per
session, then runs, each as its own process with its output to a file: `runs show NAME` (the tables),
`runs show NAME --json`, `runs export NAME` (the predictions) and `runs export` of a run with calls and no
submissions. It reports each one's wall time and peak resident memory (the process's ``ru_maxrss``). With
``--baseline REF`` the same commands of the code as of git commit REF run too, in the same run (a command of the
baseline still running after ``--deadline`` seconds is stopped and reported as such).

Targets (issue 37): a million rows shown or exported in under 60 s and under 200 MB; an export of a run without
submissions says so in one line.

Usage: python benchmarks/run_reading.py [--calls 1000000] [--baseline REF] [--deadline 300] [--smoke] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _markdown import write_section
from mcp_server import _baseline_tree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pau_mcp.runstore import RunStore  # noqa: E402

SESSIONS = 8
TARGET_S, TARGET_MB = 60.0, 200.0


def write_store(db: Path, calls: int) -> None:
    """A store with run ``big`` (``calls`` calls, a submission per session) and run ``quiet`` (calls only)."""
    store = RunStore(db)
    for name, submitting in (("big", True), ("quiet", False)):
        run_id = store.ensure_run(name, "server")
        sessions = [store.ensure_session(run_id, f"{name}-session-{n}", "http") for n in range(SESSIONS)]
        if submitting:
            for session in sessions:
                store.record_submission(session, "builtin/b001", "the product of the nonzero digits", None)
        rows = calls if submitting else min(calls, 1000)
        outcome = json.dumps({"status": "ok", "value": "6", "value_type": "int", "encoded": 6})
        at = "2026-12-07T00:00:00+00:00"
        connection = sqlite3.connect(db)
        with connection:
            connection.executemany(
                "INSERT INTO calls (session_id, method_id, tool, arguments, counted, status, value, error_type,"
                " error_message, outcome, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)",
                ((sessions[i % SESSIONS], "builtin/b001", "fn_0123456789abcdef", f"({i},)", int(i % 40 < 20), "ok",
                  str(i), outcome, 1.5, at) for i in range(rows)),
            )  # fmt: skip
        connection.close()
    store.close()


def _measure(tree: Path, db: Path, args: list[str], out: Path, deadline: float) -> tuple[float, float, str]:
    """(seconds, peak MB, note) of ``pau-mcp ARGS --db DB`` from the sources in ``tree``, its output in ``out``."""
    started = time.perf_counter()
    with out.open("w") as stdout, tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "pau_mcp", *args, "--db", str(db)], cwd=tree, stdout=stdout, stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "160"},
        )  # fmt: skip
        note = ""
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                note = f"stopped after {deadline:.0f} s"
                break
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        said = stderr.read().decode(errors="replace").strip()
    if not note and process.returncode:
        note = f"exit {process.returncode}: {said[-200:]}"
    elif not note and said:
        note = said.splitlines()[-1][:160]
    return time.perf_counter() - started, usage.ru_maxrss / 1024, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000, help="calls in the run")
    parser.add_argument("--baseline", help="a git commit whose commands run beside this tree's")
    parser.add_argument("--deadline", type=float, default=300, help="seconds a command may run")
    parser.add_argument("--smoke", action="store_true", help="a small run: checks the script runs")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    if options.smoke:
        options.calls = 2000
    commands = {
        "runs show": ["runs", "show", "big"],
        "runs show --json": ["runs", "show", "big", "--json"],
        "runs export": ["runs", "export", "big"],
        "runs export (a run without submissions)": ["runs", "export", "quiet"],
    }
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        db = Path(tmp) / "runs.db"
        started = time.perf_counter()
        write_store(db, options.calls)
        written = time.perf_counter() - started
        trees = {"this tree": ROOT}
        if options.baseline:
            trees[f"baseline ({options.baseline})"] = stack.enter_context(_baseline_tree(options.baseline))
        for label, args in commands.items():
            for name, tree in trees.items():
                seconds, megabytes, note = _measure(tree, db, args, Path(tmp) / "out", options.deadline)
                met = seconds < TARGET_S and megabytes < TARGET_MB
                rows.append(f"| {label} | {name} | {seconds:.1f} s | {megabytes:.0f} MB | "
                            f"{'yes' if met else 'no'} | {note} |")  # fmt: skip
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {os.getloadavg()[0]:.1f} at the end); a SQLite store "
        f"with a run of {options.calls:,} calls over {SESSIONS} sessions and a submission per session (written in "
        f"{written:.0f} s), and a run of calls without submissions; each command in its own process, output to a "
        "file; peak memory is the process's maximum resident set.",
        "",
        f"| command | code | time | peak memory | under {TARGET_S:.0f} s and {TARGET_MB:.0f} MB | note |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("run-reading", table)


if __name__ == "__main__":
    main()
