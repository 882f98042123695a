"""``pau-mcp create --tasks-for SUITE``: questions over a suite's hidden methods, from their tests.

A task is a chain of calls of the suite's methods: the first on one of its hidden tests' inputs, each next one on
a test input of another method with one argument replaced by the result before it (an argument of the same type).
Chains are drawn from the tests with one seeded generator and run in the sandbox with the gold functions, so every
step returns a value a later step can take; a model then writes the question a person with that need would ask,
from the steps' gold descriptions (which never reach an agent: a question that quotes one, or names a function or
a method, is refused, and so is one that does not state every input value its chain needs: an agent cannot make a
call whose arguments the question never gives). Each task's answer is frozen by running its chain again
(``manifests.checks.freeze_task``).
Chains of ``asks_calls_from`` methods or more ask for the calls as well, which are re-executed to check an answer.
"""

from __future__ import annotations

import ast
import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import anyio

from wasm_runtime import Limits, SandboxInterface, Status, decode, parse_python

from ..llm import LLMClient
from ..manifests import ManifestError, ManifestStore, Method, Task, TaskProvenance, TaskStep, substitute
from ..manifests.checks import freeze_task, quotes_gold, run_chain
from ..prompts import Template, parse_template
from ..scoring.fences import fence, fence_tag

__all__ = ["TaskOptions", "TasksReport", "create_tasks", "question_messages", "read_question", "unstated_input"]

_MAX_VALUE_CHARS = 120
_MAX_QUESTION_CHARS = 2000
_MAX_REPLY_CHARS = 20_000
_TRIES_PER_TASK = 30
_QUESTION_TOKENS = 300
#: Longest argument tuple a chain's step takes from the tests: a question has to state it in a sentence or two.
_MAX_INPUT_CHARS = 300
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
)  # fmt: skip
_EMPTY_WORDS = frozenset({"empty", "blank", "nothing", "no", "none"})
_SPACE_WORDS = frozenset({"space", "spaces", "whitespace", "blank", "tab", "tabs", "newline", "newlines"})


@dataclass(frozen=True)
class TaskOptions:
    """What tasks to make.

    Attributes:
        model: The model that writes the questions (``provider/model``).
        hops: The chain lengths wanted (1 to 5).
        per_hop: Tasks wanted of each length.
        asks_calls_from: Tasks of this many hops or more ask for the calls that compute the answer.
        seed: Seeds every random choice: the same seed and model replies make the same tasks.
        limits: Sandbox limits.
    """

    model: str
    hops: tuple[int, ...] = (1, 2, 3)
    per_hop: int = 5
    asks_calls_from: int = 2
    seed: int = 0
    limits: Limits | None = None


@dataclass
class TasksReport:
    """What ``create_tasks`` made.

    Attributes:
        suite: The suite.
        made: Tasks written, per hop count.
        refused: Questions refused, with why (the chain's steps as method ids).
        short: Hop counts that got fewer tasks than asked, with how many chains could be drawn.
    """

    suite: str
    made: dict[int, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    short: dict[int, int] = field(default_factory=dict)

    @property
    def wrote(self) -> int:
        """Tasks written."""
        return sum(self.made.values())

    def lines(self) -> list[str]:
        """The report for a terminal."""
        made = ", ".join(f"{n} of {h} hop{'s' * (h != 1)}" for h, n in sorted(self.made.items())) or "none"
        out = [f"suite {self.suite}: {self.wrote} tasks written ({made})"]
        out += [f"  refused: {line}" for line in self.refused[:20]]
        if len(self.refused) > 20:
            out.append(f"  ... and {len(self.refused) - 20} more refused")
        out += [
            f"  only {n} chains of {h} hops could be drawn from the tests (types do not chain further)"
            for h, n in sorted(self.short.items())
        ]
        return out


@dataclass(frozen=True)
class _Known:
    """One hidden test's input of a method whose outcome is a value: its arguments and its result."""

    method: Method
    args: tuple[Any, ...]
    result: Any


def _cases(methods: Sequence[Method]) -> list[_Known]:
    found = []
    for method in methods:
        for case in method.tests:
            if case.outcome is None or case.outcome.status != Status.OK:
                continue
            try:
                args = ast.literal_eval(parse_python(case.input.strip(), mode="eval").body)
                result = decode(case.outcome.encoded)
            except Exception:  # an input or value with no literal form: not a step
                continue
            args = args if isinstance(args, tuple) else (args,)
            if len(_literal(args)) > _MAX_INPUT_CHARS:
                continue
            if len(args) == len(method.params) and result is not None and len(repr(result)) <= _MAX_VALUE_CHARS:
                found.append(_Known(method, args, result))
    return found


def _literal(args: Sequence[Any], hole: int | None = None, ref: int = 0) -> str:
    parts = [f"${ref}" if position == hole else repr(value) for position, value in enumerate(args)]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _draw(
    rng: random.Random, cases: list[_Known], hops: int, sandbox: SandboxInterface, methods: dict[str, Method], limits: Limits | None
) -> list[TaskStep] | None:  # fmt: skip
    """One chain of ``hops`` distinct methods, each step's result a value the next step takes; None if none fits."""
    start = rng.choice(cases)
    steps = [TaskStep(method=start.method.id, input=_literal(start.args))]
    value, used = start.result, {start.method.id}
    for number in range(2, hops + 1):
        fits = [
            (known, position)
            for known in cases
            if known.method.id not in used
            for position, arg in enumerate(known.args)
            if type(arg) is type(value)
        ]
        if not fits:
            return None
        known, position = rng.choice(fits)
        step = TaskStep(method=known.method.id, input=_literal(known.args, position, number - 1))
        probe = Task(id=f"{start.method.suite}/probe", question="?", steps=[*steps, step])
        outcomes, problem = run_chain(probe, methods, sandbox, limits)
        if problem is not None or outcomes[-1].status is not Status.OK:
            return None
        value = decode(outcomes[-1].encoded)
        if value is None or len(repr(value)) > _MAX_VALUE_CHARS:
            return None
        steps.append(step)
        used.add(known.method.id)
    return steps


@lru_cache(maxsize=1)
def _templates() -> dict[str, Template]:
    folder = resources.files("pau_mcp.prompts") / "creation"
    return {
        name: parse_template(name, (folder / f"{name}.txt").read_text(encoding="utf-8").removesuffix("\n"))
        for name in ("system", "question")
    }


def question_messages(steps: Sequence[TaskStep], methods: dict[str, Method]) -> list[dict[str, str]]:
    """Ask for the question a chain answers, from its steps' gold descriptions (fenced: they are data)."""
    lines = []
    for number, step in enumerate(steps, start=1):
        shown = substitute(step.input, [f"<the result of step {n}>" for n in range(1, number)])
        lines.append(
            f"Step {number}: call the function described as follows, with the arguments {shown}.\n"
            f"  {methods[step.method].description}"
        )
    chain = "\n".join(lines)
    tag = fence_tag("create-question", chain)
    templates = _templates()
    return [
        {"role": "system", "content": templates["system"].render()},
        {"role": "user", "content": templates["question"].render(tag=tag, chain=fence("chain", chain, tag))},
    ]


def read_question(reply: str) -> str:
    """The question in a reply: the text after its last ``QUESTION:`` marker (or the whole reply), on one line."""
    text = (reply or "")[-_MAX_REPLY_CHARS:]
    index = text.lower().rfind("question:")
    found = text[index + len("question:") :] if index >= 0 else text
    return " ".join(found.split())[:_MAX_QUESTION_CHARS]


def _values(step_input: str) -> list[Any]:
    """The literal arguments of a step (not the earlier results it takes, ``$1`` ...)."""
    text = substitute(step_input, [f"_result_{n}" for n in range(1, 10)])
    try:
        node = parse_python(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    values = []
    for argument in node.elts if isinstance(node, ast.Tuple) else [node]:
        if isinstance(argument, ast.Name):
            continue
        try:
            values.append(ast.literal_eval(argument))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return values


def _atoms(value: Any, found: list[Any], budget: int) -> None:
    """The scalars a value is made of (a container's items, a dict's keys and values); an empty container is
    itself. Stops adding past ``budget`` atoms (a question cannot state that many)."""
    stack = [value]
    while stack and len(found) <= budget:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(sorted(item, key=repr) if isinstance(item, (set, frozenset)) else item)
        else:
            found.append(item)
            continue
        if not item:
            found.append(item)


def _numbers(text: str) -> set[float]:
    """Every number written in digits in ``text`` (a sign kept when it touches the digits), read in one pass."""
    found: set[float] = set()
    at, size = 0, len(text)
    while at < size:
        start = at
        if text[at] in "+-" and at + 1 < size and text[at + 1].isdigit() and (at == 0 or not text[at - 1].isalnum()):
            at += 1
        if not text[at].isdigit() or (start == at and at > 0 and (text[at - 1].isalnum() or text[at - 1] == ".")):
            at = start + 1
            continue
        while at < size and text[at].isdigit():
            at += 1
        if at + 1 < size and text[at] == "." and text[at + 1].isdigit():
            at += 1
            while at < size and text[at].isdigit():
                at += 1
        if at + 1 < size and text[at] in "eE" and (text[at + 1].isdigit() or text[at + 1] in "+-"):
            end = at + 1 + (text[at + 1] in "+-")
            if end < size and text[end].isdigit():
                at = end
                while at < size and text[at].isdigit():
                    at += 1
        with contextlib.suppress(ValueError, OverflowError):
            found.add(float(text[start:at]))
    return found


def _words(text: str) -> set[str]:
    """The question's words, lower-cased (letters and digits; everything else separates)."""
    return set("".join(ch if ch.isalnum() else " " for ch in text.lower()).split())


def _stated(atom: Any, question: str, numbers: set[float], words: set[str]) -> bool:
    """Whether the question states one scalar of an input, as the prompt asks: "give every input value exactly
    as written" (a number in digits, or a word for 0 to 12; a string verbatim; True, False and None by name)."""
    if isinstance(atom, bool):
        return str(atom).lower() in words
    if atom is None:
        return bool({"none", "null", "nothing"} & words)
    if isinstance(atom, (int, float)):
        try:
            value = float(atom)
        except OverflowError:
            return repr(atom) in question
        if value in numbers:
            return True
        if value < 0 and -value in numbers and bool({"minus", "negative"} & words):
            return True
        return isinstance(atom, int) and 0 <= atom < len(_NUMBER_WORDS) and _NUMBER_WORDS[atom] in words
    if isinstance(atom, (str, bytes)):
        text = atom.decode("latin-1") if isinstance(atom, bytes) else atom
        plain = " ".join(text.split())  # the question is read onto one line, whitespace runs made one space
        if plain:
            return plain in question or repr(atom) in question
        return bool((_SPACE_WORDS if text else _EMPTY_WORDS) & words) or repr(atom) in question
    if isinstance(atom, (list, tuple, set, frozenset, dict)):  # an empty container
        return bool(_EMPTY_WORDS & words) or repr(atom) in question
    return repr(atom) in question


def unstated_input(question: str, steps: Sequence[TaskStep]) -> str | None:
    """The first input value a question leaves out, as "VALUE (step N)", or None when it states every one.

    An agent must make each call of the chain from the question alone: every literal argument of every step (the
    earlier results aside) has to be in it. The question is read once for its numbers and words; each value is
    then looked up in them, or found as text in the question (which is at most a few thousand characters).
    """
    numbers, words = _numbers(question), _words(question)
    budget = len(question) // 2 + 1
    for number, step in enumerate(steps, start=1):
        for value in _values(step.input):
            atoms: list[Any] = []
            _atoms(value, atoms, budget)
            if len(atoms) > budget:
                return f"{_clip(repr(value))} (step {number}: more values than a question can state)"
            for atom in atoms:
                if not _stated(atom, question, numbers, words):
                    shown = _clip(repr(atom))
                    return shown + (f" in {_clip(repr(value))}" if atom is not value else "") + f" (step {number})"
    return None


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _refusal(question: str, steps: Sequence[TaskStep], methods: dict[str, Method]) -> str | None:
    if not question:
        return "the reply holds no question"
    lowered = question.lower()
    for step in steps:
        method = methods[step.method]
        if quotes_gold(question, method.description):
            return f"the question quotes the gold description of {method.id}"
        if method.id.lower() in lowered:
            return f"the question names {method.id}"
    if "test_func" in lowered or "fn_" in lowered:
        return "the question names a function or a tool"
    missing = unstated_input(question, steps)
    if missing is not None:
        return f"the question does not state the input {missing}: an agent could not make that call"
    return None


async def create_tasks(
    suite_name: str, *, llm: LLMClient, sandbox: SandboxInterface, store: ManifestStore, options: TaskOptions,
    replace: bool = False, progress: Callable[[str], None] | None = None,
) -> TasksReport:  # fmt: skip
    """Draw chains from a suite's tests, have the model ask a question for each, freeze the answers, save the tasks.

    Raises:
        ManifestError: the suite does not exist, is not frozen, or already has tasks (without ``replace``).
        LLMError: the model cannot be used at all.
    """
    suite = store.suite(suite_name)
    if suite.tasks and not replace:
        raise ManifestError(
            f"suite {suite_name!r} already has {len(suite.tasks)} tasks; pass --replace to make them again"
        )
    methods = dict(suite.methods)
    unfrozen = [m.id for m in methods.values() if not m.frozen]
    if unfrozen:
        raise ManifestError(f"{unfrozen[0]} is not frozen; run `pau-mcp manifests freeze` first")
    cases = _cases(list(methods.values()))
    if not cases:
        raise ManifestError(f"suite {suite_name!r} has no hidden test whose outcome is a value to start a task from")
    report = TasksReport(suite_name)
    made: list[Task] = []
    for hops in options.hops:
        rng = random.Random(f"{options.seed}/{suite_name}/{hops}")
        chains: list[list[TaskStep]] = []
        for _ in range(options.per_hop * _TRIES_PER_TASK):
            if len(chains) >= options.per_hop:
                break
            steps = await anyio.to_thread.run_sync(_draw, rng, cases, hops, sandbox, methods, options.limits)
            if steps is not None and steps not in chains:
                chains.append(steps)
        if len(chains) < options.per_hop:
            report.short[hops] = len(chains)
        for number, steps in enumerate(chains, start=1):
            if progress is not None:
                progress(f"writing the question of a {hops}-hop task ({number} of {len(chains)})")
            completion = await llm.complete(
                options.model, question_messages(steps, methods), temperature=0.0, max_tokens=_QUESTION_TOKENS
            )
            question = read_question(completion.text)
            why = _refusal(question, steps, methods)
            if why is not None:
                report.refused.append(f"{' -> '.join(s.method for s in steps)}: {why}")
                continue
            task = Task(
                id=f"{suite_name}/t{hops}-{len([t for t in made if t.hops == hops]) + 1:03d}", question=question,
                steps=steps, asks_calls=hops >= options.asks_calls_from,
                provenance=TaskProvenance(made_by="create", model=options.model),
            )  # fmt: skip
            frozen, problem = await anyio.to_thread.run_sync(freeze_task, task, methods, sandbox, options.limits)
            if problem is not None:
                report.refused.append(f"{task.id}: {problem}")
                continue
            made.append(frozen)
            report.made[hops] = report.made.get(hops, 0) + 1
    if replace:
        for old in (suite.path / "tasks").glob("*.json"):
            old.unlink()
        suite.tasks.clear()
    for task in made:
        suite.save_task(task)
    return report
