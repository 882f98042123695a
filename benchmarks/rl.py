"""RL environment speed: steps per second with 1 and 32 threads, against the reference approach, in one run.

Both sides step the same cycle (reason, propose an input, reflect) over the
same built-in methods and inputs, with a scripted critic that costs nothing,
so what differs is how a proposed input runs:

* **pau-mcp**: ``ExplorationEnv`` over the WebAssembly sandbox in this process
  (a fresh instance per call: isolated, CPU-, memory- and output-limited), and
  over two sandbox worker processes;
* **reference approach**: this benchmark's own minimal environment that, as
  the PAU reference implementation does, parses the literal with
  ``ast.literal_eval`` and runs the call with ``exec`` in a new daemon thread,
  waiting with a timeout (no isolation; a runaway call cannot be stopped).

Each configuration runs ``--steps`` steps in total, spread over the threads,
each thread stepping its own environments. Prints a Markdown table with steps
per second and ratios; ``--write`` replaces the rl section of docs/benchmarks.md.

Usage: python benchmarks/rl.py [--steps 900] [--write]
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from _markdown import write_section  # noqa: E402 (this script's own directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pau_mcp.manifests import ManifestStore, Method  # noqa: E402
from pau_mcp.rl import EnvConfig, ExplorationEnv, Runtime, ScriptedCritic  # noqa: E402
from pau_mcp.rl.actions import parse_input, parse_reflection  # noqa: E402

METHODS = ("builtin/b001", "builtin/b002", "builtin/b003", "builtin/b004", "builtin/b005", "builtin/b006")


def _inputs(method: Method) -> list[str]:
    return [case.input for case in (*method.examples, *method.tests)]


def _replies(method: Method, cycles: int) -> list[str]:
    """A scripted episode: ``cycles`` reason/propose/reflect rounds over the method's own inputs, then a conclusion."""
    inputs = _inputs(method)
    replies = []
    for i in range(cycles):
        last = i == cycles - 1
        replies += [
            f"I will try input {i} to test the boundary.",
            f"INPUT: {inputs[i % len(inputs)]}",
            f"CONCLUDED: {'YES' if last else 'NO'}\nHYPOTHESIS: it transforms its input somehow",
        ]
    return replies


#: The scripted critic's ratings (0-9) of every reasoning step and every concluded hypothesis.
REASONING_SCORE, HYPOTHESIS_SCORE = 6, 4


class ReferenceStyleEnv:
    """The reference approach, written for this benchmark: ``exec`` in a daemon thread per call."""

    def __init__(self, method: Method, reasoning: int, hypothesis: int, timeout_s: float = 10.0) -> None:
        self.method, self.reasoning, self.hypothesis, self.timeout_s = method, reasoning, hypothesis, timeout_s
        self.phase = "reason"
        self.history: list[tuple[object, str | None]] = []

    def _run(self, literal: str) -> tuple[object, str | None]:
        try:
            args = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            return None, "not a literal"
        args = args if isinstance(args, tuple) else (args,)
        value: object = None
        error: str | None = "did not finish"

        def work() -> None:
            nonlocal value, error
            try:
                scope: dict[str, Any] = {"__builtins__": __builtins__}
                exec(self.method.source, scope)
                value, error = scope[self.method.entry](*args), None
            except Exception as exc:  # noqa: BLE001 - the reference reports every exception as text
                value, error = None, str(exc)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        return (None, "timeout") if thread.is_alive() else (value, error)

    def step(self, reply: str) -> float:
        if self.phase == "reason":
            self.phase = "propose"
            return self.reasoning / 9
        if self.phase == "propose":
            self.phase = "reflect"
            value, error = self._run(parse_input(reply) or "")
            self.history.append((value, error))
            return 0.025 if error is None else -0.5
        self.phase = "reason"
        reflection = parse_reflection(reply)
        return self.hypothesis / 9 if reflection.concluded else 0.0


class _Stepped(Protocol):
    """An environment a benchmark thread steps with a policy's replies (what a step returns is not used)."""

    def step(self, reply: str, /) -> object: ...


def _measure(
    make: Callable[[Method], _Stepped], scripts: list[tuple[Method, list[str]]], threads: int, steps: int
) -> float:
    """Steps per second: ``threads`` threads, each stepping fresh environments through the scripts."""
    per_thread = steps // threads
    barrier = threading.Barrier(threads + 1)
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            barrier.wait()
            done = 0
            index = offset
            while done < per_thread:
                method, replies = scripts[index % len(scripts)]
                index += 1
                env = make(method)
                for reply in replies:
                    env.step(reply)
                    done += 1
                    if done >= per_thread:
                        break
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return per_thread * threads / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=960, help="steps per configuration")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.steps = 64  # at least two a thread at 32 threads
    store = ManifestStore(())
    methods = [store.method(m) for m in METHODS]
    scripts = [(m, _replies(m, 5)) for m in methods]
    # The same ratings on both sides: the reference-style environment is handed them as numbers.
    critic = ScriptedCritic(
        reasoning=lambda view, text: REASONING_SCORE, hypothesis=lambda view, text: HYPOTHESIS_SCORE
    )
    config = EnvConfig(max_turns=40, budget=20)
    in_process = Runtime()
    from wasm_runtime.workers import WorkerSandbox

    workers = Runtime(lambda: WorkerSandbox(workers=2))

    def ours(runtime: Runtime) -> Callable[[Method], _Stepped]:
        def make(method: Method) -> ExplorationEnv:
            env = ExplorationEnv(method, critic, config, runtime)
            env.reset()
            return env

        return make

    makers: dict[str, Callable[[Method], _Stepped]] = {
        "pau-mcp, in-process sandbox": ours(in_process),
        "pau-mcp, 2 sandbox worker processes": ours(workers),
        "reference approach (exec in a daemon thread)": lambda method: ReferenceStyleEnv(
            method, REASONING_SCORE, HYPOTHESIS_SCORE
        ),
    }
    for make in makers.values():  # warm up: the sandbox's component, the workers, the code caches
        _measure(make, scripts, 2, 60)
    results: dict[tuple[str, int], float] = {}
    for threads in (1, 32):
        for name, make in makers.items():
            results[name, threads] = _measure(make, scripts, threads, options.steps)
            print(f"{name}, {threads} threads: {results[name, threads]:.0f} steps/s", file=sys.stderr)
    workers.close()
    baseline = "reference approach (exec in a daemon thread)"
    lines = [
        f"Measured by `python benchmarks/rl.py` on {os.cpu_count()} CPUs, Python {platform.python_version()}: "
        f"{options.steps} steps per row over builtin/b001-b006 (five reason/propose/reflect cycles per episode, the "
        "methods' own inputs), scripted critic (no model), each thread stepping its own environments.",
        "",
        "| environment | threads | steps/s | vs reference approach |",
        "| --- | ---: | ---: | ---: |",
    ]
    for threads in (1, 32):
        for name in makers:
            rate = results[name, threads]
            lines.append(f"| {name} | {threads} | {rate:,.0f} | {rate / results[baseline, threads]:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("rl", table)


if __name__ == "__main__":
    main()
