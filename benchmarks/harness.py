"""Harness throughput: episodes per second with an instant scripted model, at concurrency 1, 8 and 32.

Everything but the LLM's own time is real: the model is an instant scripted server in its own process
(benchmarks/_instant_llm.py, as a provider would be); the harness starts `pau-mcp serve` over HTTP,
each episode opens its own MCP session, the `tools` agent makes 20 tool calls (a fresh
sandbox instance each) and submits, and the scorer judges and code-matches the
submission (the models are a loopback OpenAI-compatible server answering instantly).
It also records the probe baseline's code match over the whole builtin suite (the floor).

Target: at least 8 episodes per second at concurrency 8 with a 20-query budget on 2 cores (the openai SDK
is the transport to models again: about 2 ms more client CPU per request than a hand-written client).
Usage: python benchmarks/harness.py [--episodes 65] [--rounds 3] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

import _cpu  # noqa: E402 (this script's own directory)
from _markdown import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


from pau_mcp import eventloop  # noqa: E402
from pau_mcp.config import Settings  # noqa: E402
from pau_mcp.harness import EvalConfig, RunProgress, run_eval  # noqa: E402
from pau_mcp.sandboxing import make_sandbox  # noqa: E402
from pau_mcp.scoring import Scorer  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

MODEL = "openai/instant"


async def _timed(settings: Settings, config: EvalConfig) -> tuple[float, dict[str, float], RunProgress]:
    """Seconds for the run, CPU seconds per process role while it ran (server still up), and the progress."""
    scorer = Scorer.from_settings(settings, sandbox=make_sandbox(settings, processes=True))  # as `pau-mcp eval` scores
    # One-time start-up happens before the clock, as the server's does: the scorer's SDK client (importing
    # aiohttp, building a TLS context: about 0.4 s of the harness's one event loop) and its sandbox workers.
    scorer.check(config.kinds)
    await scorer.sandbox.arun("def test_func():\n    return 0\n", ["()"])
    try:
        before = _cpu.snapshot()
        start = time.perf_counter()
        progress = await run_eval(settings, config, scorer)
        seconds = time.perf_counter() - start
        used = _cpu.spent(before, _cpu.snapshot())
    finally:
        await scorer.aclose()
        scorer.sandbox.close()
    return seconds, used, progress


def _reference_loop() -> float:
    """Seconds a fixed pure-Python loop takes now: this machine's speed varies by tens of percent within minutes."""
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i * i
    return time.perf_counter() - start


class _Round(TypedDict):
    """One run's measurements."""

    done: int
    seconds: float
    rate: float
    cpu: dict[str, float]
    startup: float
    reference: float


def _round(token: str, data: Path, concurrency: int, episodes: int) -> _Round:
    """One run at one concurrency against a fresh server and store; its time, CPU per episode and machine speed."""
    data.mkdir()
    settings = Settings.from_options(data_dir=data, judge_model=MODEL, coder_model=MODEL, budget=20, token=token)
    started = time.perf_counter()
    # The server runs apart (as with `pau-mcp eval --server URL`), so its start-up (about a second) is not
    # counted as the harness's time.
    server = ["--token", token, "--budget", "20", "--db", str(data / "runs.db"), "--data-dir", str(data)]
    with http_server(server) as url:  # the same data directory: the same tool key, so the same tool names
        startup = time.perf_counter() - started
        config = EvalConfig(
            run=f"bench-{concurrency}", model=MODEL, suite="builtin", agent="tools", budget=20,
            concurrency=concurrency, limit=episodes, kinds=("judge", "codematch"), server=url,
        )  # fmt: skip
        reference = _reference_loop()
        seconds, used, progress = eventloop.run(_timed, settings, config)
    assert progress.failed == 0, progress.errors
    cpu = {
        role: used.get(role, 0.0) / progress.done * 1000
        for role in ("this process", "server", "sandbox workers", "instant model")
    }
    print(
        f"concurrency {concurrency}: {progress.done} episodes in {seconds:.1f} s; CPU per episode {cpu}",
        file=sys.stderr,
    )
    return {
        "done": progress.done,
        "seconds": seconds,
        "rate": progress.done / seconds,
        "cpu": cpu,
        "startup": startup,
        "reference": reference,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--episodes", type=int, default=65, help="episodes at concurrency 8 and 32 (at most the suite's 65)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs at concurrency 8 and 32; the median is reported")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.episodes, options.rounds = 2, 1
    rows: list[tuple[int, list[_Round]]] = []
    token = secrets.token_urlsafe(16)
    model = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with model, tempfile.TemporaryDirectory() as tmp:
        assert model.stdout is not None and model.stdin is not None
        os.environ.update(OPENAI_BASE_URL=model.stdout.readline().strip(), OPENAI_API_KEY="bench")
        levels = [(8, options.episodes, options.rounds)]
        if not options.smoke:  # the smoke run checks the script's path through a level, not every level
            levels = [(1, min(16, options.episodes), 1), *levels, (32, options.episodes, options.rounds)]
        for concurrency, episodes, rounds in levels:
            runs = [_round(token, Path(tmp) / f"c{concurrency}-{n}", concurrency, episodes) for n in range(rounds)]
            runs.sort(key=lambda run: run["rate"])
            rows.append((concurrency, runs))
        probe_settings = Settings.from_options(data_dir=Path(tmp) / "probe", budget=20)
        probe = EvalConfig(run="floor", model="", suite="builtin", agent="probe", concurrency=8, kinds=("direct",),
                           limit=2 if options.smoke else 0)  # fmt: skip
        _, _, floor = eventloop.run(_timed, probe_settings, probe)
        model.stdin.close()
    if not floor.direct:
        raise SystemExit("the probe baseline scored no method (no direct code match recorded); see the run's log above")
    floor_mean = sum(floor.direct) / len(floor.direct)
    every = [run for _, runs in rows for run in runs]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs; tools agent, 20 tool calls per episode, judge and code match scored, "
        "model answering instantly from its own process on loopback; a fresh server and store for each run, started "
        f"beforehand (as with `--server URL`; starting it took about {statistics.median(r['startup'] for r in every):.1f} s). "
        f"Concurrency 8 and 32: the median of {options.rounds} runs, with the slowest and fastest. CPU per episode "
        "(of the median run) from the processes' counters: the harness (with its scorer), the server, all sandbox "
        "workers (the server's and the scorer's), the instant model. Machine speed: a fixed Python loop took "
        f"{min(r['reference'] for r in every) * 1000:.0f}-{max(r['reference'] for r in every) * 1000:.0f} ms before the runs.",
        "",
        "| concurrency | episodes | seconds | episodes/s | runs: slowest-fastest | CPU/episode: harness | server | sandbox workers | model |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for concurrency, runs in rows:
        median = runs[len(runs) // 2]
        cpu = median["cpu"]
        spread = f"{runs[0]['rate']:.1f}-{runs[-1]['rate']:.1f}" if len(runs) > 1 else "(one run)"
        lines.append(
            f"| {concurrency} | {median['done']} | {median['seconds']:.1f} s | **{median['rate']:.1f}** | {spread} | "
            f"{cpu['this process']:.0f} ms | {cpu['server']:.0f} ms | {cpu['sandbox workers']:.0f} ms | {cpu['instant model']:.0f} ms |"
        )
    lines += [
        "",
        f"The floor: the probe baseline (no LLM, memorising code) over all {len(floor.direct)} builtin methods scores a mean "
        f"direct code match of **{floor_mean:.3f}** (budget 20).",
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("harness", table)


if __name__ == "__main__":
    main()
