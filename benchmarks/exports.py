"""What publishing a whole run costs: the results formats of a 741-episode run (PAU's test set), beside reading it.

A run store is filled with one evaluation run of 741 episodes shaped as the paper agent records them at budget 20:
per episode 20 rounds of reason, act and reflect (each model step with its prompt, about 1.6 KB, and its reply), a
tool call and its result each round, a submission, and a judge and a code-match score; 20 recorded calls per
episode with their outcomes. Each measurement runs in a fresh process (its wall time, CPU and peak memory):

* the baseline: reading the run as every report does (``load_runs``, trajectories included);
* ``export inspect`` (the ``.eval`` log, written with Inspect's API), ``export eee`` (aggregate and instance-level
  records), ``export hf-results``, and ``leaderboard`` (page and results.json);

each as a ratio of the baseline, with the size of what it wrote.

Usage: python benchmarks/exports.py [--episodes 741] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _markdown import write_section  # noqa: E402

from pau_mcp.contract import ToolStatus  # noqa: E402
from pau_mcp.runstore import CallRecord, EpisodeResult, RunStore  # noqa: E402

RUN = "bench"
PROMPT = ("You are studying a hidden Python function. " * 36)[:1600]
ROUNDS = 20


def _trajectory(method: str, tool: str) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = []
    for i in range(ROUNDS):
        steps.append({"kind": "model", "reply": f"I will try {i} next, to see how it treats it.", "prompt": PROMPT})
        steps.append({"kind": "model", "reply": f"INPUT: ({i},)", "prompt": PROMPT + f" round {i}"})
        steps.append({"kind": "tool_call", "tool": tool, "arguments": {"args": f"({i},)"}})
        structured = {"status": "ok", "value": str(i * 3), "value_type": "int", "error_type": None,
                      "error_message": None, "printed": "", "queries_used": i + 1, "queries_left": ROUNDS - i - 1,
                      "budget_scope": "token"}  # fmt: skip
        steps.append({"kind": "tool_result", "text": f"test_func({i},) returned {i * 3}", "structured": structured,
                      "is_error": False})  # fmt: skip
        steps.append({"kind": "model", "reply": "HYPOTHESIS: triples its argument\nCONCLUDED: NO", "prompt": PROMPT})
    steps.append({"kind": "model", "reply": "DESCRIPTION: returns three times its argument", "prompt": PROMPT})
    steps.append({"kind": "submit", "description": "returns three times its argument", "code": None})
    steps.append({"kind": "tool_result", "text": "Recorded.", "structured": {"status": "recorded", "submission": 1},
                  "is_error": False})  # fmt: skip
    return steps


def fill(path: Path, episodes: int) -> None:
    """A run of ``episodes`` paper-agent episodes over builtin's method ids (cycled), scored."""
    from pau_mcp.manifests import ManifestStore

    methods = list(ManifestStore().suite("builtin").methods)
    store = RunStore(path)
    config = {"model": "openai/gpt-4o-mini", "suite": "builtin", "agent": "paper", "mode": "interactive",
              "budget": ROUNDS, "protocol": "pau-mcp", "prompts": "sha256:bench"}  # fmt: skip
    run_id = store.ensure_run(RUN, "eval", config)
    ids = [f"{methods[i % len(methods)]}" if i < len(methods) else f"builtin/x{i:04d}" for i in range(episodes)]
    store.plan_episodes(run_id, ids)
    for method in ids:
        store.start_episode(run_id, method)
        key = f"{RUN}/{method}/1"
        session = store.ensure_session(run_id, key, "http")
        for i in range(ROUNDS):
            store.record_call(session, CallRecord(
                method, "fn_0123456789", f"({i},)", True, ToolStatus.OK, value=str(i * 3),
                outcome={"status": "ok", "value": str(i * 3), "fuel": 170000 + i, "duration_ms": 0.4}, duration_ms=0.4,
            ))  # fmt: skip
        submission = store.record_submission(session, method, "returns three times its argument", None)
        store.record_score(submission, "judge", "scored", 4.0, "openai/gpt-4o-mini",
                           {"reply": "Close.\nRating: 4", "usage": {"input_tokens": 600, "output_tokens": 40}})  # fmt: skip
        store.record_score(submission, "codematch", "scored", 0.75, "openai/gpt-4o-mini",
                           {"reason": "5 of 20 differ", "failures": {"returned a different value": 5},
                            "code": "def test_func(arg0):\n    return arg0 * 3\n", "matches": [True] * 15 + [False] * 5})  # fmt: skip
        store.finish_episode(run_id, method, EpisodeResult(
            state="done", session_key=key, submission_id=submission, concluded=True, queries=ROUNDS,
            input_tokens=31000, output_tokens=1400, cost_usd=0.0055, trajectory=_trajectory(method, "fn_0123456789"),
        ))  # fmt: skip
    store.close()


def one(kind: str, db: Path, out: Path) -> dict[str, float]:
    """Run one measurement in this process; returns its wall time, CPU, peak memory and bytes written."""
    from pau_mcp.manifests import ManifestStore

    store = RunStore(db)
    started, cpu = time.perf_counter(), time.process_time()
    if kind == "read":
        from pau_mcp.reports.data import load_runs

        load_runs(store, [RUN])
    elif kind == "inspect":
        from pau_mcp.reports.inspect_log import write_inspect_log

        write_inspect_log(store, ManifestStore(), RUN, out)
    elif kind == "eee":
        from pau_mcp.reports.eee import export_eee

        export_eee(store, ManifestStore(), RUN, out, resamples=2000)
    elif kind == "hf":
        from pau_mcp.reports.hf_results import write_hf_results

        write_hf_results(store, RUN, "someone/pau-builtin", out)
    elif kind == "leaderboard":
        from pau_mcp.reports.data import load_runs
        from pau_mcp.reports.leaderboard import build_board, write_board

        write_board(build_board(load_runs(store, [RUN]), resamples=2000), out)
    wall, spent = time.perf_counter() - started, time.process_time() - cpu
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.exists() else 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall": wall, "cpu": spent, "peak_mb": peak, "bytes": written}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=741)
    parser.add_argument("--write", action="store_true", help="Write the table into docs/benchmarks.md.")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.episodes = 20
    if args.one:
        print(json.dumps(one(args.one, args.db, args.out)))
        return
    with tempfile.TemporaryDirectory(prefix="pau-exports-") as scratch:
        db = Path(scratch) / "runs.db"
        filled = time.perf_counter()
        fill(db, args.episodes)
        print(f"filled a run of {args.episodes} episodes in {time.perf_counter() - filled:.1f} s "
              f"({db.stat().st_size / 1e6:.1f} MB store)", file=sys.stderr)  # fmt: skip
        rows = {}
        for kind in ("read", "inspect", "eee", "hf", "leaderboard"):
            out = Path(scratch) / kind
            ran = subprocess.run(
                [sys.executable, __file__, "--one", kind, "--db", str(db), "--out", str(out)],
                capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
            rows[kind] = json.loads(ran.stdout.strip().splitlines()[-1])
            print(f"{kind}: {rows[kind]}", file=sys.stderr)
        store_mb = db.stat().st_size / 1e6
    base = rows["read"]
    names = {
        "read": "read the run (`load_runs`, the baseline)", "inspect": "`export inspect` (.eval log)",
        "eee": "`export eee` (aggregate + instance-level)", "hf": "`export hf-results`",
        "leaderboard": "`leaderboard` (page + results.json)",
    }  # fmt: skip
    table = ["| step | wall | CPU | CPU / baseline | peak memory | written |", "|---|---|---|---|---|---|"]
    for kind, row in rows.items():
        written = f"{row['bytes'] / 1e6:.2f} MB" if row["bytes"] else ""
        table.append(
            f"| {names[kind]} | {row['wall']:.2f} s | {row['cpu']:.2f} s | {row['cpu'] / base['cpu']:.2f}x | "
            f"{row['peak_mb']:.0f} MB | {written} |"
        )
    load = os.getloadavg()[0]
    body = (
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (load average {load:.1f}); one run of {args.episodes} episodes (a {store_mb:.0f} MB "
        "SQLite store), each step in a fresh process.\n\n" + "\n".join(table)
    )
    print(body)
    if args.write:
        write_section("exports", body)


if __name__ == "__main__":
    main()
