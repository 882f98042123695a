"""Whether the lean engine gives the outcomes the first engine recorded: the checks it must pass to be the default.

* **builtin**: every example and test of every method of the packaged suites (`builtin`, and any other packaged
  suite) run in the lean engine, each compared with the outcome the first engine froze (``outcomes_match``);
* **CodeARC** (``--codearc DIR``, a checkout of https://github.com/Anjiang-Wei/CodeARC): the share of its
  recorded CPython outputs each engine reproduces (every recorded call of every anonymous problem whose arguments
  are literals, compared as ``pau-mcp import codearc`` compares them), both engines in one run;
* **determinism**: every builtin input run twice in the lean engine, in two processes (the second run is a
  fresh process), gives the same outcome.

Prints a Markdown table; ``--write`` replaces the engine-agreement section of docs/benchmarks.md. ``--smoke``
checks the script on a few methods.

Usage: python benchmarks/engine_agreement.py [--codearc DIR] [--limit N] [--smoke] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _markdown import write_section

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pau_mcp.manifests import ManifestStore  # noqa: E402
from pau_mcp.manifests.importers.codearc import compare_printed, recorded_call  # noqa: E402
from pau_mcp.manifests.importers.common import Recorded  # noqa: E402
from pau_mcp.manifests.model import FrozenOutcome  # noqa: E402
from wasm_runtime import Outcome, Sandbox, outcomes_match  # noqa: E402
from wasm_runtime.engines import engine_for  # noqa: E402


def _packaged_outcomes(sandbox: Sandbox, limit: int | None) -> tuple[int, int, list[str], list[dict[str, Any]]]:
    """(inputs compared, inputs matching, what differs, every lean outcome) over the packaged suites."""
    store = ManifestStore()
    compared = matched = 0
    differing: list[str] = []
    seen: list[dict[str, Any]] = []
    methods = [m for suite in store.names() for m in store.suite(suite).methods.values()]
    for method in methods[:limit]:
        if engine_for(method.source, method.engine) != "python":
            continue
        cases = [case for case in (*method.examples, *method.tests) if case.outcome is not None]
        outcomes = sandbox.run(method.source, [case.input for case in cases], entry=method.entry)
        for case, outcome in zip(cases, outcomes, strict=True):
            assert case.outcome is not None
            compared += 1
            seen.append(outcome.to_dict())
            if outcomes_match(case.outcome.outcome(), outcome):
                matched += 1
            else:
                differing.append(f"{method.id} {case.input}: recorded {case.outcome.status} {case.outcome.value!r}, "
                                 f"lean {outcome.status.value} {outcome.value or outcome.error_type!r}")  # fmt: skip
    return compared, matched, differing, seen


_RESULT = re.compile(r"Result \d+:[ ]?")


def _codearc(
    checkout: Path, python_engine: str, limit: int | None, seen: list[Outcome] | None = None
) -> tuple[int, int, list[str]]:
    """(recorded outputs compared, reproduced, which differ) over every recorded call of CodeARC's anonymous
    problems whose arguments are literals: ``str`` of our value against the printed text, as the importer compares
    (``compare_printed``), whether or not the importer would keep the problem."""
    calls = json.loads((checkout / "prompt_invocations/anonymous/num_invocations=10/llm/invocations.json").read_text())
    compared = reproduced = 0
    differing: list[str] = []
    with Sandbox(python_engine=python_engine) as sandbox:
        for problem in sorted(calls, key=lambda p: int(p) if p.isdigit() else 0)[:limit]:
            source = (checkout / "dataset" / "anonymous" / f"{problem}.py").read_text(encoding="utf-8")
            probes = []
            for record in calls[problem].values():
                literal = recorded_call(str(record.get("input", "")), "solution")
                if literal is not None:
                    matches = list(_RESULT.finditer(str(record.get("output", ""))))
                    printed = str(record.get("output", ""))[matches[-1].end() :] if matches else str(record["output"])
                    probes.append((literal, Recorded(value=printed, raised=bool(record.get("errored")))))
            outcomes = sandbox.run(source, [literal for literal, _ in probes], entry="solution")
            if seen is not None:
                seen.extend(outcomes)
            for (literal, recorded), outcome in zip(probes, outcomes, strict=True):
                compared += 1
                if compare_printed(recorded, FrozenOutcome.of(outcome)) is None:
                    reproduced += 1
                else:
                    differing.append(f"codearc {problem} {literal[:60]}: recorded {recorded.shown()[:60]}, "
                                     f"{python_engine} {outcome.status.value} {(outcome.value or outcome.error_type or '')[:60]}")  # fmt: skip
    return compared, reproduced, differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--codearc", type=Path, help="a checkout of CodeARC (its dataset/ and prompt_invocations/)")
    parser.add_argument("--limit", type=int, help="only the first N methods or problems")
    parser.add_argument("--smoke", action="store_true", help="a few methods: checks the script runs")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--outcomes-only", action="store_true", help=argparse.SUPPRESS)  # the second process
    options = parser.parse_args()
    limit = 3 if options.smoke else options.limit
    with Sandbox(python_engine="lean") as lean:
        compared, matched, differing, seen = _packaged_outcomes(lean, limit)
    if options.outcomes_only:
        print(json.dumps(seen))
        return
    second = subprocess.run(
        [sys.executable, __file__, "--outcomes-only", *(["--limit", str(limit)] if limit else [])],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    again = json.loads(second.stdout)
    stable = sum(
        1
        for a, b in zip(seen, again, strict=True)
        if {**a, "duration_ms": 0, "fuel": 0} == {**b, "duration_ms": 0, "fuel": 0}
    )
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs (load average {os.getloadavg()[0]:.1f}).",
        "",
        "| check | compared | agreeing | share |",
        "|---|---|---|---|",
        f"| packaged suites' frozen outcomes, run in the lean engine | {compared} | {matched} | "
        f"**{matched / max(compared, 1):.2%}** |",
        f"| determinism: the lean engine's outcomes again, in a new process | {len(seen)} | {stable} | "
        f"**{stable / max(len(seen), 1):.2%}** |",
    ]
    if options.codearc:
        found: dict[str, list[str]] = {}
        outcomes: dict[str, list[Outcome]] = {"component": [], "lean": []}
        for engine in ("component", "lean"):
            total, reproduced, found[engine] = _codearc(options.codearc, engine, limit, outcomes[engine])
            lines.append(f"| CodeARC's recorded CPython outputs, {engine} engine | {total} | {reproduced} | "
                         f"**{reproduced / max(total, 1):.2%}** |")  # fmt: skip
        # The two engines against each other, outcome for outcome (the one equality rule, and the same shown value
        # unless it holds an object's address, which no two interpreters share).
        pairs = list(zip(outcomes["component"], outcomes["lean"], strict=True))
        same = sum(1 for a, b in pairs if outcomes_match(a, b) and (a.value == b.value or " at 0x" in (a.value or "")))
        lines.append(f"| CodeARC's calls, the lean engine's outcome against the first engine's | {len(pairs)} | {same} | "
                     f"**{same / max(len(pairs), 1):.2%}** |")  # fmt: skip
        differing += [
            f"codearc call {n}: component {a.status.value} {(a.value or a.error_type or '')[:60]}, lean "
            f"{b.status.value} {(b.value or b.error_type or '')[:60]}"
            for n, (a, b) in enumerate(pairs)
            if not (outcomes_match(a, b) and (a.value == b.value or " at 0x" in (a.value or "")))
        ]
    if differing:
        lines += ["", f"Outcomes that differ ({len(differing)}):", *(f"- {line}" for line in differing[:20])]
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("engine-agreement", table)


if __name__ == "__main__":
    main()
