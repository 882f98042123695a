"""`pau-mcp rl rollout --ray`: rollouts spread over a Ray cluster of this machine, a worker lost mid-run."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fakellm import FakeLLM, Reply
from rlscript import brain

if TYPE_CHECKING:  # its own directory's conftest, for the fixture's type only
    from conftest import LocalCluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
METHODS = ("builtin/b001", "builtin/b002", "builtin/b003", "builtin/b004", "builtin/b005", "builtin/b006")


def _rollout(data: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pau_mcp", "rl", "rollout", "--model", "openai/fake-policy", "--critic-model",
        "openai/fake-critic", "--run", "r", "--data-dir", str(data), "--out", str(data / "out"), "--concurrency", "2",
        "--budget", "6", "--workers", "0", *[item for m in METHODS for item in ("--methods", m)], *extra,
    ]  # fmt: skip


def _env(fake: FakeLLM, cluster: LocalCluster) -> dict[str, str]:
    plain = {k: v for k, v in cluster.driver_env().items() if not k.startswith("OPENAI_")}
    return {**plain, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}


def _episodes(data: Path) -> list[tuple[Any, ...]]:
    lines = (data / "out" / "trajectories.jsonl").read_text().splitlines()
    return sorted(
        (r["method_id"], round(r["return"], 6), r["queries"], r["hypothesis"], [s["action"] for s in r["steps"]])
        for r in map(json.loads, lines)
    )


def _done(db: Path) -> int:
    try:
        done: int = sqlite3.connect(db).execute("SELECT COUNT(*) FROM episodes WHERE state = 'done'").fetchone()[0]
        return done
    except sqlite3.Error:
        return 0


def test_a_rollout_that_loses_a_ray_worker_mid_run_ends_with_the_trajectories_of_a_local_one(
    tmp_path: Path, ray_cluster: LocalCluster
) -> None:
    ray_cluster.ensure_workers(2)

    def slow(body: dict[str, Any]) -> Reply:
        reply = brain(body)
        return Reply(text=reply, delay_s=0.05) if isinstance(reply, str) else reply

    with FakeLLM(responder=slow) as fake:
        local = subprocess.run(
            _rollout(tmp_path / "local"),
            env=_env(fake, ray_cluster),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert local.returncode == 0, local.stderr[-3000:]
        spread_dir = tmp_path / "ray"
        spread = subprocess.Popen(
            _rollout(spread_dir, "--ray", ray_cluster.address), env=_env(fake, ray_cluster), cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 400
        # Two in flight, one on each worker: after the first two, each worker is in the middle of its next one.
        while _done(spread_dir / "runs.db") < 2 and spread.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        ray_cluster.kill(ray_cluster.workers()[-1])
        out, err = spread.communicate(timeout=600)
    assert spread.returncode == 0, err[-3000:]
    assert "6 episodes finished now" in out, out
    rerun = re.search(r"(\d+) re-run after a lost worker", out)
    assert rerun and int(rerun.group(1)) >= 1, out
    assert _episodes(spread_dir) == _episodes(tmp_path / "local")
    attempts = sqlite3.connect(spread_dir / "runs.db").execute("SELECT DISTINCT attempts FROM episodes").fetchall()
    assert attempts == [(1,)]
