"""Harness throughput: episodes per second with an instant scripted model, at concurrency 1, 8 and 32.

Everything but the LLM's own time is real: the model is an instant scripted server in its own process
(benchmarks/_instant_llm.py, as a provider would be); the harness starts `pau-mcp serve` over HTTP,
each episode opens its own MCP session, the `tools` agent makes 20 tool calls (a fresh
sandbox instance each) and submits, and the scorer judges and code-matches the
submission (the models are a loopback OpenAI-compatible server answering instantly).
It also records the probe baseline's code match over the whole builtin suite (the floor).

Target: at least 10 episodes per second at concurrency 8 with a 20-query budget on 2 cores.
Usage: python benchmarks/harness.py [--episodes 65] [--write]
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

import _cpu  # noqa: E402 (this script's own directory)
from _markdown import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


from pau_mcp import eventloop  # noqa: E402
from pau_mcp.config import Settings  # noqa: E402
from pau_mcp.harness import EvalConfig, run_eval  # noqa: E402
from pau_mcp.scoring import Scorer  # noqa: E402
from pau_mcp.server.launch import http_server  # noqa: E402

MODEL = "openai/instant"


async def _timed(settings: Settings, config: EvalConfig) -> tuple[float, dict[str, float], object]:
    """Seconds for the run, CPU seconds per process role while it ran (server still up), and the progress."""
    scorer = Scorer.from_settings(settings, sandbox=settings.sandbox(processes=True))  # as `pau-mcp eval` scores
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=65, help="episodes at concurrency 8 and 32 (at most the suite's 65)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    rows = []
    token = secrets.token_urlsafe(16)
    model = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with model, tempfile.TemporaryDirectory() as tmp:
        assert model.stdout is not None and model.stdin is not None
        os.environ.update(OPENAI_BASE_URL=model.stdout.readline().strip(), OPENAI_API_KEY="bench")
        for concurrency, episodes in ((1, min(16, options.episodes)), (8, options.episodes), (32, options.episodes)):
            data = Path(tmp) / f"c{concurrency}"
            data.mkdir()
            settings = Settings.from_options(data_dir=data, judge_model=MODEL, coder_model=MODEL, budget=20, token=token)
            started = time.perf_counter()
            # The server runs apart (as with `pau-mcp eval --server URL`), so its start-up (about a second) is not
            # counted as the harness's time.
            with http_server(["--token", token, "--budget", "20", "--db", str(data / "runs.db")]) as url:
                startup = time.perf_counter() - started
                config = EvalConfig(
                    run=f"bench-{concurrency}", model=MODEL, suite="builtin", agent="tools", budget=20,
                    concurrency=concurrency, limit=episodes, kinds=("judge", "codematch"), server=url,
                )  # fmt: skip
                seconds, used, progress = eventloop.run(_timed, settings, config)
            assert progress.failed == 0, progress.errors
            cpu = {role: used.get(role, 0.0) / progress.done * 1000 for role in ("this process", "server", "sandbox workers", "instant model")}
            rows.append((concurrency, progress.done, seconds, cpu, startup))
            print(f"concurrency {concurrency}: {progress.done} episodes in {seconds:.1f} s; CPU per episode {cpu}", file=sys.stderr)
        probe_settings = Settings.from_options(data_dir=Path(tmp) / "probe", budget=20)
        probe = EvalConfig(run="floor", model="", suite="builtin", agent="probe", concurrency=8, kinds=("direct",))
        _, _, floor = eventloop.run(_timed, probe_settings, probe)
        model.stdin.close()
    floor_mean = sum(floor.codematch) / len(floor.codematch)
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs; tools agent, 20 tool calls per episode, judge and code match scored, "
        "model answering instantly from its own process on loopback; the server started beforehand (as with "
        f"`--server URL`; starting it took about {statistics.median(r[4] for r in rows):.1f} s). CPU per episode from "
        "the processes' counters: the harness (with its scorer), the server, all sandbox workers (the server's "
        "and the scorer's), the instant model.",
        "",
        "| concurrency | episodes | seconds | episodes/s | CPU/episode: harness | server | sandbox workers | model |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for concurrency, done, seconds, cpu, _ in rows:
        lines.append(
            f"| {concurrency} | {done} | {seconds:.1f} s | **{done / seconds:.1f}** | {cpu['this process']:.0f} ms | "
            f"{cpu['server']:.0f} ms | {cpu['sandbox workers']:.0f} ms | {cpu['instant model']:.0f} ms |"
        )
    lines += [
        "",
        f"The floor: the probe baseline (no LLM, memorising code) over all {len(floor.codematch)} builtin methods scores a mean "
        f"direct code match of **{floor_mean:.3f}** (budget 20).",
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("harness", table)


if __name__ == "__main__":
    main()
