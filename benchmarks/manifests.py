"""Loading a suite of 5,000 methods, side by side with the floor, in one run.

Synthesizes a suite the size of a large imported dataset in a temporary
directory: each method has about 10 lines of source, 2 examples and 20 tests,
all with frozen outcomes in the sandbox's typed encoding (made up here; the
sandbox is not run), written by ``dump_method`` exactly as ``freeze`` writes
them. Then it measures, each as the median of several runs with a warm file
cache:

* the baseline: ``json.load`` of every method file, no validation, as is and with the
  cyclic garbage collector paused (the floor);
* ``ManifestStore([dir]).suite(name)``: finding, reading and validating the suite;

and, to show where the store's time goes, reading the files' bytes alone,
``Method.model_validate_json`` on bytes already read (collector paused), and
the store with the collector left on during the load (``Suite.load`` pauses
it). All figures are measured round-robin. Prints a Markdown table;
``--write`` replaces the manifests section of docs/benchmarks.md with it.

Usage: python benchmarks/manifests.py [--methods 5000] [--repeat 7] [--write]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from _markdown import write_section  # noqa: E402 (this script's own directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pau_mcp.manifests import ManifestStore, Method, Suite, SuiteInfo, dump_method  # noqa: E402
from pau_mcp.manifests import store as store_module  # noqa: E402

SUITE = "bench"
TARGET_S = 1.0


def _value(rng: random.Random) -> tuple[str, str, Any]:
    """A returned value as the sandbox freezes it: (repr, type name, typed encoding)."""
    kind = rng.randrange(6)
    if kind == 0:
        n = rng.randint(-(10**6), 10**6)
        return repr(n), "int", n
    if kind == 1:
        s = "".join(rng.choice("abcdefghij ") for _ in range(rng.randint(0, 20)))
        return repr(s), "str", s
    if kind == 2:
        items = [rng.randint(0, 99) for _ in range(rng.randint(0, 8))]
        return repr(items), "list", items
    if kind == 3:
        pairs = [(rng.choice("xyz") * rng.randint(1, 3), rng.randint(0, 9)) for _ in range(rng.randint(1, 4))]
        return repr(pairs), "list", [{"tuple": [a, b]} for a, b in pairs]
    if kind == 4:
        d = {rng.randint(0, 50): rng.random() for _ in range(rng.randint(1, 4))}
        return repr(d), "dict", {"dict": [[k, v] for k, v in d.items()]}
    t = (rng.randint(0, 9), rng.choice([True, False]), None)
    return repr(t), "tuple", {"tuple": list(t)}


def _outcome(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.1:
        error = rng.choice([("ValueError", "invalid literal for int() with base 10: 'x'"), ("IndexError", "list index out of range"),
                            ("ZeroDivisionError", "division by zero"), ("KeyError", "'missing'")])  # fmt: skip
        return {"status": "error", "error_type": error[0], "error_message": error[1]}
    value, value_type, encoded = _value(rng)
    return {"status": "ok", "value": value, "value_type": value_type, "encoded": encoded}


def _argument(rng: random.Random) -> str:
    return rng.choice([
        str(rng.randint(-100, 1000)), repr("".join(rng.choice("abcde ") for _ in range(rng.randint(0, 12)))),
        repr([rng.randint(0, 9) for _ in range(rng.randint(0, 6))]), repr({rng.randint(0, 5): "v"}), "None", "3.5",
    ])  # fmt: skip


def synthetic_method(index: int, rng: random.Random) -> Method:
    """A realistic method: ~10 source lines, 2 examples and 20 tests with frozen outcomes."""
    arity = rng.choice([1, 1, 1, 1, 2, 2, 2, 3, 4])
    params = [f"arg{i}" for i in range(arity)]
    header = f"def test_func({', '.join(params)}):"
    body = [
        "    result = []",
        f"    for index, item in enumerate(str({params[0]})):",
        "        if item.isdigit():",
        "            result.append(int(item) * index)",
        "        elif item.isalpha():",
        "            result.append(item.upper())",
        "        else:",
        f"            result.append({params[-1]!s} if index % 2 else None)",
        f"    return result[:{rng.randint(3, 30)}]",
    ]
    cases = [
        {"input": "(" + ", ".join(_argument(rng) for _ in params) + ",)", "outcome": _outcome(rng)} for _ in range(22)
    ]
    return Method.model_validate({
        "id": f"{SUITE}/m{index:05d}",
        "header": header,
        "params": params,
        "source": ["import math", header, *body],
        "description": "Walks the characters of the first argument and maps digits, letters and other characters "
                       f"differently; variant {index}, keeping at most a few results.",
        "examples": cases[:2],
        "tests": cases[2:],
        "provenance": {"dataset": "synthetic", "original_id": f"S/{index}", "original_name": f"walker_{index}", "license": "MIT"},
        "tags": {"arity": arity, "value_types": ["str", "list", "int"], "difficulty": rng.choice(["easy", "medium", "hard"])},
    })  # fmt: skip


def write_suite(root: Path, count: int) -> Suite:
    rng = random.Random(20240101)
    suite = Suite.create(root, SuiteInfo(name=SUITE, description="synthetic benchmark suite", dataset="synthetic"))
    for index in range(count):
        method = synthetic_method(index, rng)
        suite.method_path(method.id).write_text(dump_method(method), encoding="utf-8")
    return suite


def _medians_s(works: dict[str, Callable[[], Any]], repeat: int, count: int) -> dict[str, float]:
    """Median seconds of each ``work()``, measured round-robin (one run of each per round, so a load
    change on the machine hits every figure alike) after one unmeasured round. Each result is dropped
    before the next run, so no run pays for scanning an earlier run's objects."""
    samples: dict[str, list[float]] = {name: [] for name in works}
    for round_ in range(repeat + 1):
        for name, work in works.items():
            gc.collect()
            start = time.perf_counter()
            result = work()
            elapsed = time.perf_counter() - start
            assert len(result) == count, (name, len(result))
            del result
            if round_:
                samples[name].append(elapsed)
        print(f"round {round_}/{repeat}", file=sys.stderr)
    return {name: statistics.median(values) for name, values in samples.items()}


def _gc_paused(work: Callable[[], Any]) -> Callable[[], Any]:
    def paused() -> Any:
        gc.disable()
        try:
            return work()
        finally:
            gc.enable()

    return paused


class _CollectorLeftOn:
    """Stands in for ``gc`` in the store module: ``disable`` does nothing (how loading was before the pause)."""

    isenabled = staticmethod(gc.isenabled)
    enable = staticmethod(gc.enable)

    @staticmethod
    def disable() -> None:
        pass


def _collector_left_on(work: Callable[[], Any]) -> Callable[[], Any]:
    def left_on() -> Any:
        with mock.patch.object(store_module, "gc", _CollectorLeftOn):
            return work()

    return left_on


def _method_files(path: Path) -> list[Path]:
    return [file for file in sorted(path.glob("*.json")) if file.name != "suite.json"]


def measure(root: Path, count: int, repeat: int) -> dict[str, Any]:
    path = root / SUITE

    def baseline() -> list[Any]:
        loaded = []
        for file in _method_files(path):
            with open(file, encoding="utf-8") as handle:
                loaded.append(json.load(handle))
        return loaded

    def read_only() -> list[bytes]:
        return [file.read_bytes() for file in _method_files(path)]

    blobs = read_only()

    def validate_only() -> list[Method]:
        return [Method.model_validate_json(blob) for blob in blobs]

    def store() -> dict[str, Method]:
        return ManifestStore([root], include_packaged=False).suite(SUITE).methods

    works = {
        "baseline": baseline, "floor": _gc_paused(baseline), "store": store, "store_collector_on": _collector_left_on(store),
        "read": read_only, "validate": _gc_paused(validate_only),
    }  # fmt: skip
    figures: dict[str, Any] = _medians_s(works, repeat, count)
    suite = ManifestStore([root], include_packaged=False).suite(SUITE)
    figures["bytes"] = sum(len(b) for b in blobs)
    figures["cases"] = sum(len(m.examples) + len(m.tests) for m in suite.methods.values())
    figures["lines"] = statistics.mean(len(m.source.splitlines()) for m in suite.methods.values())
    return figures


def table(count: int, repeat: int, r: dict[str, Any]) -> str:
    if count == 5000:
        met = "met" if r["store"] < TARGET_S else "not met"
    else:
        met = f"not judged here ({count:,} methods)"
    rest = r["store"] - r["read"] - r["validate"]

    def row(what: str, seconds: float, ratio: str = "") -> str:
        return f"| {what} | {seconds * 1000:.0f} ms | {seconds / count * 1e6:.0f} µs | {ratio} |"

    lines = [
        (
            f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
            f"{_cpus()} CPUs (load average {os.getloadavg()[0]:.1f} at the end); medians of {repeat} rounds, each "
            f"figure measured once per round, with a warm file cache. A synthetic suite of {count:,} methods "
            f"({r['lines']:.0f} source lines, {r['cases'] // count} frozen cases each; {r['bytes'] / 1e6:.1f} MB "
            f"in {count:,} files written by `dump_method`). The floor is the baseline with the cyclic garbage "
            "collector paused."
        ),
        "",
        "| what | time | per method | vs floor |",
        "|---|---|---|---|",
        row(
            "baseline: `json.load` of every file, no validation, collector on",
            r["baseline"],
            f"{r['baseline'] / r['floor']:.2f}x",
        ),
        row("baseline with the collector paused (the floor)", r["floor"], "1.00x"),
        row(
            "**`ManifestStore([dir]).suite(name)`**: find, read, validate",
            r["store"],
            f"**{r['store'] / r['floor']:.2f}x**",
        ),
        row("of which: reading the files' bytes", r["read"]),
        row("of which: `Method.model_validate_json` (pydantic-core), collector paused", r["validate"]),
        row("of which: the rest (listing and sorting files, path handling, id checks)", max(rest, 0.0)),
        row(
            "the store with the collector left on during the load (before `Suite.load` paused it)",
            r["store_collector_on"],
            f"{r['store_collector_on'] / r['floor']:.2f}x",
        ),
        "",
        (
            f"Target: loading a suite of 5,000 methods takes under {TARGET_S:.0f} s: **{met}** ({r['store']:.2f} s; "
            f"{r['store'] / r['baseline']:.2f}x the plain `json.load` loop, which pays the collector)."
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", type=int, default=5000, help="methods in the synthetic suite")
    parser.add_argument("--repeat", type=int, default=7, help="measured rounds (one run of each figure per round)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.methods, options.repeat = 50, 1

    with tempfile.TemporaryDirectory(prefix="pau-manifests-bench-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        write_suite(root, options.methods)
        print(f"wrote {options.methods} methods in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        results = measure(root, options.methods, options.repeat)
    text = table(options.methods, options.repeat, results)
    print(text)
    if options.write:
        write_section("manifests", text)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
