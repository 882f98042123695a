"""Sandbox speed, side by side with the baselines, in one run.

For three functions (trivial, regex, a 100,000-iteration loop) it measures:

* a plain in-process call (no isolation at all),
* a fork per call with multiprocessing (how the reference benchmark code runs each query),
* a sandbox call in a fresh WebAssembly instance,
* a batch of 200 inputs in the sandbox against 200 forks,

and the time from starting a new process to its first sandbox result, with
the component already built. Prints a Markdown table with medians and ratios;
``--write`` replaces the sandbox section of docs/benchmarks.md with it.

Usage: python benchmarks/sandbox.py [--repeat 200] [--write]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _markdown import write_section  # noqa: E402 (this script's own directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wasm_runtime import Sandbox  # noqa: E402

FUNCTIONS = {
    "trivial": ("def test_func(a):\n    return a + 1\n", "(41,)", lambda i: f"({i},)"),
    "regex": (
        "import re\ndef test_func(s):\n    return re.findall(r'[a-z]+\\d+', s.lower())\n",
        "('Abc12 de3 x 99 zz7',)",
        lambda i: f"('item{i} Abc{i} zz{i * 7}',)",
    ),
    "loop 100k": (
        "def test_func(n):\n    t = 0\n    for i in range(n):\n        t += i * i % 7\n    return t\n",
        "(100000,)",
        lambda i: f"({100000 + i},)",
    ),
}


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _in_process(source: str, literal: str, repeat: int) -> float:
    namespace: dict = {}
    exec(compile(source, "<bench>", "exec"), namespace)
    func = namespace["test_func"]
    import ast

    args = ast.literal_eval(literal)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func(*args)
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def _child(conn, source: str, literal: str) -> None:  # type: ignore[no-untyped-def]
    import ast

    namespace: dict = {}
    try:
        exec(compile(source, "<hidden>", "exec"), namespace)
        conn.send(("ok", repr(namespace["test_func"](*ast.literal_eval(literal)))))
    except Exception as exc:
        conn.send(("error", type(exc).__name__))
    conn.close()


def _fork_call(source: str, literal: str) -> tuple[str, str]:
    reader, writer = mp.Pipe(duplex=False)
    process = mp.get_context("fork").Process(target=_child, args=(writer, source, literal))
    process.start()
    writer.close()
    result = reader.recv() if reader.poll(10) else ("timeout", "")
    process.join()
    return result


def _fork_and_fresh(box: Sandbox, source: str, literal: str, repeat: int) -> tuple[float, float]:
    """A block of fork calls, then a block of sandbox calls, each after a few unmeasured warm-up calls.

    Blocks rather than alternation: right after a fork every page the parent
    writes is copied once, which would charge the fork's cost to the sandbox
    call that follows it; neither the reference harness nor the server mixes the two.
    """
    forks, fresh = [], []
    for _ in range(10):
        _fork_call(source, literal)
    for _ in range(repeat):
        start = time.perf_counter()
        _fork_call(source, literal)
        forks.append(time.perf_counter() - start)
    for _ in range(20):
        box.call(source, literal)
    for _ in range(repeat):
        start = time.perf_counter()
        box.call(source, literal)
        fresh.append(time.perf_counter() - start)
    return _median_ms(forks), _median_ms(fresh)


def _forks_total(source: str, inputs: list[str]) -> float:
    start = time.perf_counter()
    for literal in inputs:
        _fork_call(source, literal)
    return (time.perf_counter() - start) * 1000


def _batch_and_forks(box: Sandbox, source: str, inputs: list[str], rounds: int) -> tuple[float, float]:
    """Rounds of 200 forks, then rounds of one sandbox batch of the same 200 inputs (after a warm-up batch)."""
    forks = [_forks_total(source, inputs) / 1000 for _ in range(rounds)]
    box.run(source, inputs)
    batches = []
    for _ in range(rounds):
        start = time.perf_counter()
        box.run(source, inputs)
        batches.append(time.perf_counter() - start)
    return _median_ms(batches), _median_ms(forks)


def _first_call_in_new_process(rounds: int) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from wasm_runtime import Sandbox\n"
        "Sandbox().call('def test_func(a):\\n    return a', '(1,)')\n"
        "print((time.perf_counter() - t) * 1000)"
    )
    root = Path(__file__).resolve().parents[1]
    samples = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=200, help="calls per single-call measurement")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    options = parser.parse_args()

    box = Sandbox()
    for source, literal, _ in FUNCTIONS.values():
        box.call(source, literal)  # warm the code paths once
    rows = []
    for name, (source, literal, make_input) in FUNCTIONS.items():
        repeat = options.repeat if name != "loop 100k" else max(20, options.repeat // 5)
        inputs = [make_input(i) for i in range(200)]
        plain = _in_process(source, literal, repeat)
        fork, fresh = _fork_and_fresh(box, source, literal, repeat)
        batch, forks = _batch_and_forks(box, source, inputs, rounds=3)
        rows.append((name, plain, fork, fresh, fresh / fork, batch, forks, forks / batch))
        print(f"measured {name}", file=sys.stderr)
    first = _first_call_in_new_process(rounds=5)

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{_cpus()} CPUs; medians; fork = one multiprocessing fork per call from the process that holds the sandbox; each measured in its own block after warm-up calls.",
        "",
        "| function | in-process | fork per call | sandbox fresh call | fresh / fork | sandbox batch of 200 | 200 forks | forks / batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, plain, fork, fresh, ratio, batch, forks, speedup in rows:
        lines.append(
            f"| {name} | {plain:.3f} ms | {fork:.2f} ms | {fresh:.2f} ms | **{ratio:.2f}x** | {batch:.1f} ms | "
            f"{forks:.0f} ms | **{speedup:.0f}x** |"
        )
    lines += ["", f"First sandbox result in a new process, component already built: **{first:.0f} ms** (median of 5)."]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("sandbox", table)


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
