"""`pau-mcp eval --ray`: a run spread over a Ray cluster of this machine ends as the same run on one machine does."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pau_mcp.distributed import worker_key
from pau_mcp.manifests import tool_name
from pau_mcp.runstore import RunStore

if TYPE_CHECKING:  # its own directory's conftest, for the fixture's type only
    from conftest import LocalCluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
LIMIT = "40"


def _eval(data: Path, db: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pau_mcp", "eval", "--agent", "probe", "--suite", "builtin", "--limit", LIMIT,
        "--run", "probe", "--data-dir", str(data), "--db", str(db), "--workers", "1", "--concurrency", "4", *extra,
    ]  # fmt: skip


def _results(db: Path) -> list[tuple[Any, ...]]:
    """Per episode: its ending, scores, submission and every call, without ids, times and tool names (a Ray
    worker's server names tools with a key of the run's own: it never gets the deployment key)."""
    store = RunStore(db)
    run_id = store.run_id("probe")
    calls: dict[str | None, list[tuple[Any, ...]]] = {}
    for call in store.calls(run_id):
        calls.setdefault(call.session_key, []).append(
            (call.method_id, call.arguments, call.counted, call.status, call.value, call.error_type)
        )
    # Keyed by what an episode names (None: no submission), so a lookup of an episode's own is typed.
    submissions: dict[int | None, tuple[str, str | None]] = {
        s.id: (s.description, s.code) for s in store.submissions(run_id)
    }
    return sorted(
        (
            e.method_id, e.state, e.queries, e.concluded, e.session_key,
            {kind: (score.status, score.value) for kind, score in e.scores.items()},
            submissions.get(e.submission_id), tuple(calls.get(e.session_key, [])),
        )
        for e in store.episodes(run_id)
    )  # fmt: skip


def _done(db: Path) -> int:
    try:
        done: int = sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes WHERE state = 'done'").fetchone()[0]
        return done
    except sqlite3.Error:
        return 0


def test_a_run_that_loses_a_ray_worker_mid_run_ends_with_the_results_of_a_single_machine_run(
    tmp_path: Path, ray_cluster: LocalCluster
) -> None:
    ray_cluster.ensure_workers(2)
    data = tmp_path / "data"
    single = subprocess.run(
        _eval(data, tmp_path / "single.db"),
        env=ray_cluster.driver_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-3000:]

    db = tmp_path / "ray.db"
    spread = subprocess.Popen(
        _eval(data, db, "--ray", ray_cluster.address), env=ray_cluster.driver_env(), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 400
    while _done(db) < 6 and spread.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    victim = ray_cluster.workers()[-1]
    ray_cluster.kill(victim)  # mid-run: episodes are in flight on both workers
    out, err = spread.communicate(timeout=600)
    assert spread.returncode == 0, err[-3000:]
    assert _done(db) == int(LIMIT), out + err[-2000:]
    rerun = re.search(r"(\d+) re-run after a lost worker", out)
    assert rerun and int(rerun.group(1)) >= 1, out

    assert _results(db) == _results(tmp_path / "single.db")
    # Exactly once: one session, one submission and one set of scores per episode, each under attempt 1.
    connection = sqlite3.connect(db)
    assert connection.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == int(LIMIT)
    assert connection.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == int(LIMIT)
    assert connection.execute("SELECT COUNT(*), COUNT(DISTINCT submission_id) FROM scores").fetchone() == (
        int(LIMIT),
        int(LIMIT),
    )
    assert connection.execute("SELECT DISTINCT attempts FROM episodes").fetchall() == [(1,)]


def test_no_ray_worker_gets_the_deployment_key_and_no_file_on_the_cluster_holds_it(
    tmp_path: Path, ray_cluster: LocalCluster
) -> None:
    ray_cluster.ensure_workers(2)
    data = tmp_path / "data"
    done = subprocess.run(
        _eval(data, tmp_path / "runs.db", "--ray", ray_cluster.address, "--methods", "builtin/b001", "--methods",
              "builtin/b002"),
        env=ray_cluster.driver_env(), cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    key = (data / "tool.key").read_text().strip()
    assert not (ray_cluster.node_data / "tool.key").exists()  # the workers never made (or read) a key of their own
    leaks = []
    for path in ray_cluster.base.rglob("*"):
        readable = path.is_file() and not path.is_symlink() and path.stat().st_size < 50_000_000
        if readable and key.encode() in path.read_bytes():
            leaks.append(path)
    assert leaks == [] and key not in done.stdout + done.stderr
    # The workers' servers named the tools with a key derived for the run, which signs no token of the deployment's.
    tools = {row[0] for row in sqlite3.connect(tmp_path / "runs.db").execute("SELECT tool FROM calls")}
    assert tools and tools.isdisjoint({tool_name(key, "builtin/b001"), tool_name(key, "builtin/b002")})
    assert tools <= {tool_name(worker_key(key, "probe"), m) for m in ("builtin/b001", "builtin/b002")}


def test_a_sweep_on_a_ray_cluster_runs_there_and_a_second_time_skips_what_is_finished(
    tmp_path: Path, ray_cluster: LocalCluster
) -> None:
    ray_cluster.ensure_workers(2)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        'suites = ["builtin"]\nagents = ["probe"]\nmodes = ["interactive", "incontext"]\n'
        'methods = ["builtin/b001", "builtin/b002", "builtin/b003"]\n'
    )
    command = [
        sys.executable, "-m", "pau_mcp", "sweep", str(sweep), "--data-dir", str(tmp_path), "--ray", ray_cluster.address,
    ]  # fmt: skip
    first = subprocess.run(command, env=ray_cluster.driver_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("3 episodes finished now") == 2 and first.stdout.count("on Ray: episodes played by") == 2
    second = subprocess.run(
        command, env=ray_cluster.driver_env(), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.count("skip: finished") == 2 and "episodes finished now" not in second.stdout
    assert "Ray cluster" not in second.stderr  # nothing left to run: the cluster is not even joined
    assert "builtin-probe-incontext-none" in second.stdout.split("skip: finished")[-1]  # the report
