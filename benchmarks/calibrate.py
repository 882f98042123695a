"""Fuel per second of native CPython work: the measurement behind ``wasm_runtime.limits.FUEL_PER_SECOND``.

For a few kinds of work (an arithmetic loop, a prime sieve, big-int additions,
string building, sorting and dicts) it runs the same function natively in this
CPython (best CPU time of three) and in the sandbox (the fuel it burns, and the
CPU time the sandbox takes), and prints a Markdown table: fuel per native
second, and how much slower the sandbox is than native CPython. ``--write``
puts the table in the calibration section of docs/benchmarks.md.

Usage: python benchmarks/calibrate.py [--write]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _markdown import write_section  # noqa: E402 (this script's own directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wasm_runtime import FUEL_PER_SECOND, Limits, Sandbox  # noqa: E402

WORKLOADS = {
    "arithmetic loop": (
        "def test_func(n):\n    t = 0\n    for i in range(n):\n        t += i * i % 7\n    return t",
        (3_000_000,),
    ),
    "prime sieve to 5e6": (
        "def test_func(n):\n    s = [True] * (n + 1)\n    s[0] = s[1] = False\n    i = 2\n    while i * i <= n:\n"
        "        if s[i]:\n            for j in range(i * i, n + 1, i):\n                s[j] = False\n        i += 1\n"
        "    return sum(s)",
        (5_000_000,),
    ),
    "big-int additions": (
        "def test_func(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a % 1000007",
        (60_000,),
    ),
    "string building": (
        "def test_func(n):\n    out = []\n    for i in range(n):\n        s = str(i)\n        out.append(s[::-1].upper() + s.zfill(8))\n"
        "    return len(''.join(out))",
        (600_000,),
    ),
    "sorting and dicts": (
        "def test_func(n):\n    xs = [(i * 7919) % 10007 for i in range(n)]\n    xs.sort()\n    d = {}\n    for x in xs:\n"
        "        d[x] = d.get(x, 0) + 1\n    return max(d.values())",
        (1_000_000,),
    ),
}


def _native_seconds(source: str, args: tuple[Any, ...]) -> float:
    space: dict[str, Any] = {}
    exec(source, space)
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        space["test_func"](*args)
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    workloads = {name: (source, (max(1, args[0] // 100),)) for name, (source, args) in WORKLOADS.items()}
    box = Sandbox(pool_size=0)
    limits = Limits(timeout_s=600, fuel=10**14)
    rows = []
    rates = []
    for name, (source, args) in (workloads if options.smoke else WORKLOADS).items():
        native = _native_seconds(source, args)
        box.call(source, args, limits=limits)  # warm: the code cache and the allocator
        started = time.process_time()
        outcome = box.call(source, args, limits=limits)
        sandbox_cpu = time.process_time() - started
        if not outcome.ok:
            raise SystemExit(f"{name}: {outcome.status} {outcome.error_message}")
        rate = outcome.fuel / native
        rates.append(rate)
        rows.append(
            f"| {name} | {native:.3f} | {outcome.fuel:.2e} | {rate:.2e} | {sandbox_cpu:.3f} | "
            f"{sandbox_cpu / native:.1f}x | {outcome.fuel / sandbox_cpu:.2e} |"
        )
    table = "\n".join(
        [
            f"Machine: {platform.machine()}, Python {platform.python_version()}; FUEL_PER_SECOND is "
            f"{FUEL_PER_SECOND:.1e}, the median measured here is {statistics.median(rates):.1e}.",
            "",
            "| work | native CPU s | sandbox fuel | fuel per native s | sandbox CPU s | slower than native |"
            " fuel per sandbox CPU s |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    print(table)
    if options.write:
        write_section("calibration", table)


if __name__ == "__main__":
    main()
