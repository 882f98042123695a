"""Scaling over Ray workers: episodes per second here, on 1 and on 2 Ray workers, CPU-bound and provider-bound.

Everything but the model is real: the instant scripted model (benchmarks/_instant_llm.py) runs in its own
process; each run (the `tools` agent, 20 tool calls per episode, judge and code match scored) starts its own
server(s): here, the harness's own; on Ray (`--ray local`, a Ray instance of this machine started once), each
worker's own server, scorer and sandbox workers. Times include starting them, as a user's run does.

Two regimes: the model answers at once (every core goes to the harness, servers and sandboxes: CPU-bound),
and the model takes `--delay-ms` per reply (a provider's latency: bound by how many requests are in flight).
Each run uses fresh model names, so no reply comes from the LLM cache of an earlier run.

Usage: python benchmarks/scaling.py [--episodes 65] [--delay-ms 300] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _markdown import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from pau_mcp import eventloop  # noqa: E402
from pau_mcp.config import Settings  # noqa: E402
from pau_mcp.distributed import (  # noqa: E402
    Cluster,  # noqa: E402
    RayOptions,
    connect,
)
from pau_mcp.distributed.evaluation import RayEpisodes  # noqa: E402
from pau_mcp.harness import EvalConfig, RunProgress, run_eval  # noqa: E402
from pau_mcp.sandboxing import make_sandbox  # noqa: E402
from pau_mcp.scoring import Scorer  # noqa: E402

PAGE = ROOT / "docs" / "scaling.md"


class _Model:
    """The instant model in its own process, with a latency per reply."""

    def __init__(self, delay_ms: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py"), "--delay-ms", str(delay_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


async def _run(settings: Settings, config: EvalConfig, cluster: Cluster | None) -> tuple[float, float, RunProgress]:
    scorer = (
        None if cluster is not None else Scorer.from_settings(settings, sandbox=make_sandbox(settings, processes=True))
    )
    first: list[float] = []
    start = time.perf_counter()

    def seen(progress: RunProgress) -> None:
        if progress.done and not first:
            first.append(time.perf_counter() - start)

    try:
        source = RayEpisodes(cluster, settings, config) if cluster is not None else None
        progress = await run_eval(settings, config, scorer, seen, source=source)
    finally:
        if scorer is not None:
            await scorer.aclose()
            scorer.sandbox.close()
    return time.perf_counter() - start, first[0] if first else float("nan"), progress


def _measure(tmp: Path, name: str, model: _Model, episodes: int, concurrency: int, workers: int) -> dict[str, object]:
    data = tmp / name
    data.mkdir()
    os.environ.update(OPENAI_BASE_URL=model.url, OPENAI_API_KEY="bench")
    llm = f"openai/instant-{name}"  # fresh model names: no reply from an earlier run's cache
    settings = Settings.from_options(data_dir=data, judge_model=llm, coder_model=llm, budget=20)
    config = EvalConfig(
        run=name, model=llm, suite="builtin", agent="tools", budget=20, concurrency=concurrency, limit=episodes,
        kinds=("judge", "codematch"),
    )  # fmt: skip
    cluster = connect(RayOptions("local", workers=workers)) if workers else None
    load = os.getloadavg()[0]
    seconds, first, progress = eventloop.run(_run, settings, config, cluster)
    assert progress.failed == 0, progress.errors
    where = f"Ray, {workers} worker{'s' if workers > 1 else ''}" if workers else "here (no Ray)"
    print(f"{name}: {where}, concurrency {concurrency}: {progress.done} in {seconds:.1f} s", file=sys.stderr)
    return {
        "where": where, "concurrency": concurrency, "done": progress.done, "seconds": seconds, "first": first,
        "rate": progress.done / seconds, "load": load,
        # After the first episode: the workers are up, so this is the rate a long run keeps.
        "steady": (progress.done - 1) / (seconds - first) if progress.done > 1 and seconds > first else float("nan"),
    }  # fmt: skip


def _table(rows: list[dict[str, object]]) -> list[str]:
    lines = [
        "| where | concurrency | episodes | seconds | first episode after | episodes/s | after the first | load before |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['where']} | {row['concurrency']} | {row['done']} | {row['seconds']:.1f} s | {row['first']:.1f} s "
            f"| {row['rate']:.2f} | **{row['steady']:.2f}** | {row['load']:.1f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=65, help="episodes per run (at most the builtin suite's 65)")
    parser.add_argument("--delay-ms", type=float, default=300.0, help="the slow model's latency per reply")
    parser.add_argument("--write", action="store_true", help="update docs/scaling.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.episodes, options.delay_ms = 2, 10.0
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        # Ray's workers inherit this process's environment: their node data directory (LLM cache) is private, and
        # so are Ray's own directory and token (Ray would otherwise write one into ~/.ray for every later cluster).
        os.environ["PAU_MCP_DATA_DIR"] = str(tmp / "node")
        os.environ.update(RAY_TMPDIR=str(tmp / "ray"), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
        instant, slow = _Model(0), _Model(options.delay_ms)
        # The smoke run takes each path once (here and on Ray, either model): Ray workers are its dearest part.
        fast_plan = [("here", 0), ("ray1", 1)] if options.smoke else [("here", 0), ("ray1", 1), ("ray2", 2)]
        slow_plan = (
            [(8, "here", 0)] if options.smoke else [(c, w, n) for c in (8, 32) for w, n in (("here", 0), ("ray2", 2))]
        )
        try:
            fast_rows = [_measure(tmp, f"cpu-{where}", instant, options.episodes, 8, n) for where, n in fast_plan]
            slow_rows = [_measure(tmp, f"slow-{where}-{c}", slow, options.episodes, c, n) for c, where, n in slow_plan]
        finally:
            instant.close()
            slow.close()
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs shared with other work (`python benchmarks/scaling.py`): the tools "
        "agent, 20 tool calls per episode, judge and code match scored, over the builtin suite's first "
        f"{options.episodes} methods. Each run starts its own server(s) and, on Ray, its workers (`--ray local`, a "
        "Ray instance of this machine; each worker its own server, scorer and sandbox workers); seconds count from "
        "the run's start, so they include that start-up; episodes/s after the first is the rate once everything is up, "
        "the rate a long run keeps. Load before: the machine's 1-minute load average as the run "
        "began (other work on the same two cores).",
        "",
        "The model answers at once (CPU-bound):",
        "",
        *_table(fast_rows),
        "",
        f"The model takes {options.delay_ms:.0f} ms per reply, as a provider does (bound by requests in flight):",
        "",
        *_table(slow_rows),
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("scaling", table, PAGE)


if __name__ == "__main__":
    main()
