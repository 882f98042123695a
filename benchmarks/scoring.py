"""Code-match scoring throughput, side by side with the reference approach, in one run.

The submission is fixed and needs no model: each builtin method's gold source
plays the "generated code". Scoring it means running it on every test input
of the method and comparing each result with the frozen gold outcome.

* **pau-mcp**: ``scoring.match_code``: one sandbox batch per method, compared by
  ``outcomes_match``; methods one after another in one process, and as ``pau-mcp score``
  runs them, one per CPU at once in sandbox worker processes.
* **reference**: one process per test input: for each input, fork a process with
  multiprocessing that execs the code and calls the function, send the result
  back through a pipe and compare it in the parent, inputs and methods one
  after another (as the reference benchmark code does). It runs in a plain
  Python process of its own, so its forks do not copy the sandbox's memory map.

Rounds alternate between the two so a change in machine load hits both; every
round gives each source a fresh comment so the sandbox's compiled-code cache
never helps (scored code is new code). Prints a Markdown table of methods per
second and the ratios; ``--write`` replaces the scoring section of
docs/benchmarks.md with it. Target: at least 20x the reference.

Usage: python benchmarks/scoring.py [--rounds 3] [--write]
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _markdown import write_section  # noqa: E402 (this script's own directory)

ROOT = Path(__file__).resolve().parents[1]
TARGET = 20


# -- the reference approach (runs in its own plain process: stdlib only) ----------------------------


def _child(conn: Connection, source: str, entry: str, literal: str) -> None:
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, "<hidden>", "exec"), namespace)  # noqa: S102 - the reference approach, measured
        args = ast.literal_eval(literal)
        args = args if isinstance(args, tuple) else (args,)
        conn.send(("ok", repr(namespace[entry](*args))))
    except Exception as exc:  # noqa: BLE001 - any exception is the function's outcome
        conn.send(("error", type(exc).__name__))
    conn.close()


def _fork_call(source: str, entry: str, literal: str) -> tuple[str, str]:
    reader, writer = mp.Pipe(duplex=False)
    process = mp.get_context("fork").Process(target=_child, args=(writer, source, entry, literal))
    process.start()
    writer.close()
    result = reader.recv() if reader.poll(10) else ("timeout", "")
    process.join()
    return result


def _reference(cases_file: str, tag: str) -> None:
    """Score every method with a fork per test input; print seconds and the mean score as JSON."""
    methods = json.loads(Path(cases_file).read_text())
    for _ in range(20):
        _fork_call("def test_func(a):\n    return a\n", "test_func", "(1,)")  # warm the fork path
    scores = []
    start = time.perf_counter()
    for method in methods:
        source = f"# {tag}\n{method['source']}"
        right = 0
        for literal, status, value, error_type in method["tests"]:
            got_status, shown = _fork_call(source, method["entry"], literal)
            right += got_status == status and shown == (value if status == "ok" else error_type)
        scores.append(right / len(method["tests"]))
    print(json.dumps({"seconds": time.perf_counter() - start, "mean": sum(scores) / len(scores)}))


def _reference_round(cases_file: str, tag: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--reference", cases_file, "--tag", tag], capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout)
    return data["seconds"], data["mean"]


# -- pau-mcp --------------------------------------------------------------------------------------


async def _pau_round(box: Any, methods: list[Any], tag: str, workers: int) -> tuple[float, float]:
    """Seconds to score every method (``workers`` at once), and the mean score."""
    import anyio

    from pau_mcp.scoring import match_code

    fresh = [m.model_copy(update={"source": f"# {tag}\n{m.source}"}) for m in methods]
    scores: list[float] = []
    limiter = anyio.CapacityLimiter(workers)

    async def one(method: Any) -> None:
        async with limiter:
            result = await match_code(box, method, method.source)
        scores.append(result.fraction or 0.0)

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for method in fresh:
            group.start_soon(one, method)
    return time.perf_counter() - start, sum(scores) / len(scores)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the whole suite for each approach")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--reference", metavar="CASES", help=argparse.SUPPRESS)  # internal: one reference round
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.rounds = 1
    if options.reference:
        _reference(options.reference, options.tag)
        return

    import anyio

    sys.path.insert(0, str(ROOT))
    from pau_mcp.manifests import ManifestStore
    from wasm_runtime import Sandbox
    from wasm_runtime.workers import WorkerSandbox

    methods = [m for m in ManifestStore().suite("builtin").methods.values() if m.tests]
    if options.smoke:  # each approach's path, on a few methods: the whole suite is the measurement
        methods = methods[:4]
    inputs = sum(len(m.tests) for m in methods)
    cases = [
        {
            "source": m.source,
            "entry": m.entry,
            "tests": [[c.input, c.outcome.status, c.outcome.value, c.outcome.error_type] for c in m.tests if c.outcome],
        }
        for m in methods
    ]
    box = Sandbox()
    workers = _cpus()
    pool = WorkerSandbox(workers=workers)
    anyio.run(_pau_round, box, methods, "warm-up", workers)
    anyio.run(_pau_round, pool, methods, "warm-up", workers)

    sequential, parallel, reference = [], [], []
    mean_pau = mean_reference = 0.0
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cases, handle)
    try:
        for n in range(options.rounds):
            seconds, mean_reference = _reference_round(handle.name, f"reference {n}")
            reference.append(seconds)
            seconds, mean_pau = anyio.run(_pau_round, box, methods, f"sequential {n}", 1)
            sequential.append(seconds)
            seconds, _ = anyio.run(_pau_round, pool, methods, f"parallel {n}", workers)
            parallel.append(seconds)
            print(
                f"round {n + 1}: reference {reference[-1]:.2f} s, pau-mcp {sequential[-1]:.2f} s / {parallel[-1]:.2f} s",
                file=sys.stderr,
            )
    finally:
        os.unlink(handle.name)

    ref_s, seq_s, par_s = (statistics.median(x) for x in (reference, sequential, parallel))
    ref_rate, seq_rate, par_rate = (len(methods) / s for s in (ref_s, seq_s, par_s))
    met = "met" if par_rate / ref_rate >= TARGET else "NOT met"
    lines = [
        (
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
            f"{workers} CPUs; the whole builtin suite ({len(methods)} methods, {inputs} test inputs) with each gold "
            f"source as the submitted code; medians of {options.rounds} alternating rounds; every round compiles fresh sources."
        ),
        "",
        "| approach | suite time | methods / s | vs reference | mean score |",
        "|---|---|---|---|---|",
        f"| reference: a forked process per test input | {ref_s:.2f} s | {ref_rate:.1f} | 1x | {mean_reference:.3f} |",
        (
            f"| pau-mcp: a sandbox batch per method, one method at a time | {seq_s:.2f} s | {seq_rate:.1f} | "
            f"**{seq_rate / ref_rate:.0f}x** | {mean_pau:.3f} |"
        ),
        (
            f"| pau-mcp: {workers} methods at once in {workers} sandbox worker processes, as `pau-mcp score` runs | {par_s:.2f} s | {par_rate:.1f} | "
            f"**{par_rate / ref_rate:.0f}x** | {mean_pau:.3f} |"
        ),
        "",
        (
            f"Target: at least {TARGET}x the reference's methods per second: **{met}** "
            f"({max(seq_rate, par_rate) / ref_rate:.0f}x). A method has about 20 test inputs; a sandbox batch costs a "
            "fixed ~3.5 ms of CPU (a fresh primed instance, compiling the new source, tearing down) and ~0.1 ms per input, "
            "while each fork from a small plain process costs about 3.5 ms. Fresh instances do not scale over threads of "
            "one process (they contend for its memory map), which is why `pau-mcp score` uses worker processes."
        ),
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("scoring", table)


if __name__ == "__main__":
    main()
