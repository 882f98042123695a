"""Harness throughput: episodes per second with an instant scripted model, at concurrency 1, 8 and 32.

Everything but the LLM's own time is real: the model is an instant scripted server in its own process
(benchmarks/_instant_llm.py, as a provider would be); the harness starts `pau-mcp serve` over HTTP,
each episode opens its own MCP session, the `tools` agent makes 20 tool calls (a fresh
sandbox instance each) and submits, and the scorer judges and code-matches the
submission (the models are a loopback OpenAI-compatible server answering instantly).
It also records the probe baseline's code match over the whole builtin suite (the floor).

Target: at least 10 episodes per second at concurrency 8 with a 20-query budget on 2 cores.
Usage: python benchmarks/harness.py [--episodes 32] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _markdown import write_section  # noqa: E402 (this script's own directory)

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


from pau_mcp.config import Settings  # noqa: E402
from pau_mcp.harness import EvalConfig, run_eval  # noqa: E402
from pau_mcp.scoring import Scorer  # noqa: E402

MODEL = "openai/instant"


async def _timed(settings: Settings, config: EvalConfig) -> tuple[float, object]:
    scorer = Scorer.from_settings(settings)
    start = time.perf_counter()
    try:
        progress = await run_eval(settings, config, scorer)
    finally:
        await scorer.aclose()
    return time.perf_counter() - start, progress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=32, help="episodes per concurrency level")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()
    rows = []
    model = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with model, tempfile.TemporaryDirectory() as tmp:
        assert model.stdout is not None and model.stdin is not None
        os.environ.update(OPENAI_BASE_URL=model.stdout.readline().strip(), OPENAI_API_KEY="bench")
        for concurrency in (1, 8, 32):
            data = Path(tmp) / f"c{concurrency}"
            settings = Settings.from_options(data_dir=data, judge_model=MODEL, coder_model=MODEL, budget=20)
            config = EvalConfig(
                run=f"bench-{concurrency}", model=MODEL, suite="builtin", agent="tools", budget=20,
                concurrency=concurrency, limit=options.episodes, kinds=("judge", "codematch"),
            )  # fmt: skip
            seconds, progress = anyio.run(_timed, settings, config)
            assert progress.failed == 0, progress.errors
            rows.append((concurrency, progress.done, seconds))
            print(f"concurrency {concurrency}: {progress.done} episodes in {seconds:.1f} s", file=sys.stderr)
        probe_settings = Settings.from_options(data_dir=Path(tmp) / "probe", budget=20)
        probe = EvalConfig(run="floor", model="", suite="builtin", agent="probe", concurrency=8, kinds=("direct",))
        _, floor = anyio.run(_timed, probe_settings, probe)
        model.stdin.close()
    floor_mean = sum(floor.codematch) / len(floor.codematch)
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs; tools agent, 20 tool calls per episode, judge and code match scored, "
        "model answering instantly on loopback. Wall time includes starting the server (about 1 s).",
        "",
        "| concurrency | episodes | seconds | episodes/s | harness time per episode |",
        "|---|---|---|---|---|",
    ]
    for concurrency, done, seconds in rows:
        lines.append(f"| {concurrency} | {done} | {seconds:.1f} | **{done / seconds:.1f}** | {seconds / done * 1000:.0f} ms |")
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
