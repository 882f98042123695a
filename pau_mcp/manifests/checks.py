"""Freezing outcomes and validating methods, both by running them in the sandbox."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from wasm_runtime import (
    InvalidInput,
    Limits,
    Outcome,
    SandboxInterface,
    Status,
    decode,
    outcomes_match,
    parse_arguments,
    parse_python,
)

from .model import Case, FrozenOutcome, Method, Task, substitute

__all__ = [
    "Problem", "check_method", "check_methods", "check_task", "freeze_method", "freeze_methods", "freeze_task",
    "quotes_gold", "run_chain", "source_arity",
]  # fmt: skip

#: A gold description shorter than this is only caught when a text is exactly it (short phrases recur innocently).
_MIN_QUOTED_CHARS = 24
#: The longest intermediate result a task hands on (as its repr): a chain is a question a person could ask.
_MAX_RESULT_CHARS = 2000

_RUNS = {Status.OK, Status.ERROR}


@dataclass(frozen=True)
class Problem:
    """One reason a method fails validation."""

    method_id: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.method_id}: [{self.check}] {self.message}"


def source_arity(source: str, entry: str) -> tuple[int, int] | None:
    """(required, total) positional parameters of ``entry`` in ``source``; None when it cannot be parsed here.

    Raises:
        ValueError: the source parses but defines no such function.
    """
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            positional = [*node.args.posonlyargs, *node.args.args]
            total = len(positional) if node.args.vararg is None else 10**6
            return len(positional) - len(node.args.defaults), total
    raise ValueError(f"the source defines no top-level function {entry!r}")


def _cases(method: Method) -> list[Case]:
    return [*method.examples, *method.tests]


def freeze_method(method: Method, sandbox: SandboxInterface, limits: Limits | None = None) -> Method:
    """Run every example and test input in the sandbox (one batch) and record the outcomes."""
    cases = _cases(method)
    outcomes = sandbox.run(
        method.source, [case.input for case in cases], entry=method.entry, limits=limits, engine=method.engine
    )
    frozen = [
        case.model_copy(update={"outcome": FrozenOutcome.of(o)}) for case, o in zip(cases, outcomes, strict=False)
    ]
    n = len(method.examples)
    return method.model_copy(update={"examples": frozen[:n], "tests": frozen[n:]})


def _reproduces(frozen: FrozenOutcome, again: Outcome) -> bool:
    recorded = frozen.outcome()
    return (
        outcomes_match(recorded, again)
        and recorded.value == again.value
        and recorded.error_type == again.error_type
        and recorded.error_message == again.error_message
    )


def _mentions(text: str, name: str) -> bool:
    return name.lower() in text.lower()


def check_method(method: Method, sandbox: SandboxInterface, limits: Limits | None = None) -> list[Problem]:
    """Validate one method; an empty list means it passes.

    Checks: the source compiles and defines the entry; the header's arity
    fits the source; every input runs (returns or raises, never a timeout,
    memory error, crash or invalid literal); each frozen outcome reproduces
    exactly when the input runs again alone in a fresh instance (which also
    catches a function whose batch outcomes depend on earlier inputs); the
    description is not empty; nothing agent-facing reveals the original name.
    """
    problems: list[Problem] = []

    def problem(check: str, message: str) -> None:
        problems.append(Problem(method.id, check, message))

    try:
        arity = source_arity(method.source, method.entry)
        if arity is not None and not (arity[0] <= len(method.params) <= arity[1]):
            problem(
                "arity",
                f"the header has {len(method.params)} parameters, the source's {method.entry} takes {arity[0]}..{arity[1]}",
            )
    except ValueError as exc:
        problem("entry", str(exc))
    if not method.description.strip():
        problem("description", "the gold description is empty")
    cases = _cases(method)
    if not cases:
        problem("inputs", "the method has no examples and no tests")
    again = sandbox.run(
        method.source, [c.input for c in cases], entry=method.entry, limits=limits, fresh=True, engine=method.engine
    )
    if cases and all(o.error_type == "SyntaxError" for o in again):
        problem("compiles", f"the source does not compile: {again[0].error_message}")
    for case, outcome in zip(cases, again, strict=False):
        if outcome.status not in _RUNS:
            problem("runs", f"input {case.input} ended with {outcome.status}: {outcome.error_message}")
        elif (
            outcome.status is Status.ERROR
            and outcome.error_type == "NameError"
            and outcome.error_message == f"name {method.entry!r} is not defined"
        ):
            problem("entry", f"the source does not define {method.entry}")
        if case.outcome is None:
            problem("frozen", f"input {case.input} has no frozen outcome; run `pau-mcp manifests freeze`")
        elif not _reproduces(case.outcome, outcome):
            problem(
                "reproduces",
                f"input {case.input} was frozen as {case.outcome.shown()!r} but gives {FrozenOutcome.of(outcome).shown()!r}",
            )
    original = method.provenance.original_name
    if original and len(original) >= 3 and original != "test_func":  # an entry named like the original reveals it too
        # The tool name is "fn_" and a keyed hash of the id: nothing of the original name can be in it.
        shown = [method.id, method.header]
        for case in method.examples:
            shown.append(case.input)
            if case.outcome is not None:
                shown.append(case.outcome.shown())
            if case.original is not None:  # what the reference protocol shows instead
                shown += [case.original.input, case.original.output]
        for text in shown:
            if _mentions(text, original):
                problem("anonymous", f"{text!r} reveals the original name {original!r}")
                break
    return _dedupe(problems)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    out = []
    for item in problems:
        key = (item.check, item.message)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


_Result = TypeVar("_Result")


def _parallel(
    items: list[Method], work: Callable[[Method], _Result], progress: Callable[[Method], None] | None, workers: int
) -> Iterator[tuple[Method, _Result]]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(work, item) for item in items]
        for item, future in zip(items, futures, strict=False):
            result = future.result()
            if progress is not None:
                progress(item)
            yield item, result


def freeze_methods(
    methods: Iterable[Method], sandbox: SandboxInterface, limits: Limits | None = None,
    progress: Callable[[Method], None] | None = None, workers: int = 2,
) -> list[Method]:  # fmt: skip
    """Freeze many methods in parallel worker threads, in order."""
    return [m for _, m in _parallel(list(methods), lambda m: freeze_method(m, sandbox, limits), progress, workers)]


def check_methods(
    methods: Iterable[Method], sandbox: SandboxInterface, limits: Limits | None = None,
    progress: Callable[[Method], None] | None = None, workers: int = 2,
) -> dict[str, list[Problem]]:  # fmt: skip
    """Validate many methods in parallel worker threads; problems by method id."""
    return {m.id: p for m, p in _parallel(list(methods), lambda m: check_method(m, sandbox, limits), progress, workers)}


# -- tasks ----------------------------------------------------------------------------------------


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def quotes_gold(text: str, gold: str) -> bool:
    """True when ``text`` holds ``gold`` (whitespace and case aside); a short gold only when ``text`` is exactly it.

    Linear: both texts are normalised once and searched with ``str.find``'s two-way algorithm.
    """
    wanted, found = _normal(gold), _normal(text)
    if not wanted:
        return False
    if len(wanted) < _MIN_QUOTED_CHARS:
        return found == wanted
    return wanted in found


def _literal_of(outcome: Outcome) -> str | None:
    """The result as a literal a later step's input can hold (its ``repr``, read back by the argument rules)."""
    try:
        text = repr(decode(outcome.encoded))
    except Exception:  # a value with no decodable encoding, or an int too long to show
        return None
    if len(text) > _MAX_RESULT_CHARS:
        return None
    try:
        parse_arguments(f"({text},)")
    except (InvalidInput, ValueError, RecursionError, MemoryError):
        return None
    return text


def run_chain(
    task: Task, methods: dict[str, Method], sandbox: SandboxInterface, limits: Limits | None = None, fresh: bool = False
) -> tuple[list[Outcome], str | None]:
    """Run a task's steps with the gold functions, each with the earlier results in its input.

    Returns:
        The outcomes of the steps run, and why the chain cannot be a task (None when every step returned a value
        a later step can take, and so the last one is the answer).
    """
    results: list[str] = []
    outcomes: list[Outcome] = []
    for number, step in enumerate(task.steps, start=1):
        method = methods[step.method]
        literal = substitute(step.input, results)
        (outcome,) = sandbox.run(
            method.source, [literal], entry=method.entry, limits=limits, fresh=fresh, engine=method.engine
        )
        outcomes.append(outcome)
        if outcome.status is not Status.OK:
            shown = FrozenOutcome.of(outcome).shown()
            return (
                outcomes,
                f"step {number} ({step.method} on {literal[:200]}) ended with {shown}: every step must return a value",
            )
        text = _literal_of(outcome)
        if text is None:
            return outcomes, (
                f"step {number} ({step.method}) returned a value with no literal form of at most "
                f"{_MAX_RESULT_CHARS:,} characters: a task's answer and what it hands on must be writable"
            )
        results.append(text)
    return outcomes, None


def freeze_task(
    task: Task, methods: dict[str, Method], sandbox: SandboxInterface, limits: Limits | None = None
) -> tuple[Task, str | None]:
    """Record a task's answer by running its chain with the gold functions; the task unchanged and why when the
    chain cannot answer it."""
    outcomes, problem = run_chain(task, methods, sandbox, limits)
    if problem is not None:
        return task, problem
    return task.model_copy(update={"answer": FrozenOutcome.of(outcomes[-1])}), None


def check_task(
    task: Task, methods: dict[str, Method], sandbox: SandboxInterface, limits: Limits | None = None
) -> list[Problem]:
    """Validate one task; an empty list means it passes.

    Checks: its answer is frozen and reproduces when the chain runs again in fresh instances; the question gives
    none of its methods away (their gold descriptions, ids, entry names or original names).
    """
    problems: list[Problem] = []

    def problem(check: str, message: str) -> None:
        problems.append(Problem(task.id, check, message))

    outcomes, failed = run_chain(task, methods, sandbox, limits, fresh=True)
    if failed is not None:
        problem("chain", failed)
    if task.answer is None:
        problem("frozen", "the task has no frozen answer; run `pau-mcp manifests freeze`")
    elif failed is None and not _reproduces(task.answer, outcomes[-1]):
        problem(
            "reproduces",
            f"the answer was frozen as {task.answer.shown()!r} but the chain gives {FrozenOutcome.of(outcomes[-1]).shown()!r}",
        )
    for step in task.steps:
        method = methods[step.method]
        names = [method.id]
        if method.entry != "test_func":
            names.append(method.entry)
        original = method.provenance.original_name
        if original and len(original) >= 3:
            names.append(original)
        if quotes_gold(task.question, method.description):
            problem("question", f"the question quotes the gold description of {method.id}")
        revealed = [name for name in names if len(name) >= 3 and _mentions(task.question, name)]
        if revealed:
            problem("question", f"the question names {revealed[0]!r}, which gives {method.id} away")
    return _dedupe(problems)
