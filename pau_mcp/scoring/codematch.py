"""Code match: run code on a method's test inputs in the sandbox and count the outcomes that match.

Two sources of code: a code-writing model given the description and the
header (the paper's second score; ``write_code``), or code an agent submitted
itself (direct code). Either way ``match_code`` runs it on every test input
in ONE sandbox batch and compares each outcome with the frozen gold outcome
by ``wasm_runtime.outcomes_match``, the project's one equality rule.

Scored code is hostile: it controls everything it hands back (values,
encodings, exception names and messages, printed text). Reasons are therefore
made of counts and the fixed words of ``FAILURE_KINDS`` only, never of text
the code produced; an outcome that cannot be decoded is no match; a sandbox
that fails on the code gives an ``error`` result, never an exception. Only the
counterexample, re-run alone, shows a test input.

Under the reference protocol (``pau_mcp.protocol``) the code writer gets the
reference's prompt and examples list, its code is read by the reference's
rules, and each test input counts as the reference counts it: the expected
value through a JSON round trip (tuples become lists, int dict keys strings),
any error or limit as ``None``, compared with ``==``, 0.5 s per input.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as _Protocol

from wasm_runtime import Limits, Outcome, SandboxInterface, Status, decode, literal_value, outcomes_match, parse_python

from ..contract import ScoreStatus
from ..llm import LLMClient, LLMError, Usage
from ..manifests import Case, Method, call_text
from ..prompts import load_prompts
from ..protocol import Protocol, cut_at_stop, reference_triples, results_list
from .cpu import off_loop
from .fences import fence, fence_tag

__all__ = [
    "FAILURE_KINDS",
    "MAX_CODE_CHARS",
    "CodeMatch",
    "ObservedCheck",
    "check_observed",
    "Counterexample",
    "Signature",
    "coder_messages",
    "extract_code",
    "extract_code_reference",
    "failing_tests",
    "match_code",
    "observed_arguments",
    "reference_match",
    "write_code",
]

log = logging.getLogger("pau_mcp.scoring")

#: Longer code is not run (an agent's submission or a model's reply gone wrong).
MAX_CODE_CHARS = 100_000

#: How one test input can go wrong, in the scorer's own words: reasons and feedback use these and counts,
#: never an exception name, a message, a value or printed text (the code chooses all of those).
FAILURE_KINDS: dict[str, str] = {
    "value": "returned a different value",
    "undecodable": "returned a value that could not be decoded",
    "error": "raised an exception",
    "timeout": "timed out",
    "memory": "ran out of memory",
    "output_limit": "printed or returned too much",
    "crash": "crashed",
    "invalid_input": "was not run",
}
_MAX_EXAMPLES = 50
_MAX_EXAMPLE_CHARS = 500
_MAX_SHOWN_CHARS = 2000
_MAX_HOST_ERROR_CHARS = 200
_COUNTEREXAMPLE_TRIES = 5
#: Characters of candidate code ``extract_code`` parses in one reply (beyond them, it looks for a ``def`` line):
#: parsing holds the host's one parser lock, which every parse of call arguments waits for.
_PARSE_BUDGET_CHARS = MAX_CODE_CHARS

_PYTHON_FENCES = ("python", "py", "python3")
# A fence's info string starts with its language: one greedy character class, matched at a known position.
_FENCE_LANGUAGE = re.compile(r"[\w+#.-]*+")


class Signature(_Protocol):
    """What the code writer may know of a function besides its description: a ``Method``, or the facts its tool
    publishes (``MethodFacts``, for an agent that writes code from its own description)."""

    @property
    def header(self) -> str: ...

    @property
    def entry(self) -> str: ...


def coder_messages(
    method: Signature,
    description: str,
    examples: Sequence[Sequence[Any]] | None = None,
    protocol: Protocol | None = None,
    knowledge: Collection[str] | None = None,
) -> list[dict[str, str]]:
    """The code writer's chat messages: the header, then the agent's description and observed calls.

    This project's protocol fences the description and the calls; the same submission gives the
    same messages (see ``fences``), so the response cache answers a repeat. The reference protocol
    sends its own prompt, one user message, with the examples as its results list.

    Args:
        method: Gives the header and entry name (a ``Method``'s source and gold description are not used).
        description: What the function does (the agent's, or the gold one for the upper bound).
        examples: What the agent observed: ``(input literal, shown output)`` pairs, or
            ``(input, output, error)`` triples in the reference's stored form.
        protocol: Whose prompt (default: this project's).
        knowledge: Only these components (``pau_mcp.knowledge.COMPONENTS``: ``signature``, ``description``,
            ``examples``); None: the header, the description and any examples given. Header and description
            together get the ordinary prompt, so the full combination asks exactly what code match asks.
    """
    if knowledge is not None and not (protocol is not None and protocol.reference):
        wanted = set(knowledge)
        shown = examples if "examples" in wanted else None
        if not {"signature", "description"} <= wanted:
            return _knowledge_messages(method, description, shown, wanted, protocol)
        examples = shown
    if protocol is not None and protocol.reference:
        prompt = protocol.prompts.render(
            "coder",
            description=description,
            header=method.header,
            examples=results_list(reference_triples(examples or [])),
        )
        return [{"role": "user", "content": prompt}]
    prompts = protocol.prompts if protocol is not None else load_prompts()
    text = description.strip()
    calls = _calls_text(method, examples) if examples else ""
    tag = fence_tag("coder", text, calls)
    if calls:
        prompt = prompts.render(
            "coder_with_calls", header=method.header, tag=tag, description=fence("description", text, tag),
            calls=fence("calls", calls, tag),
        )  # fmt: skip
    else:
        prompt = prompts.render("coder", header=method.header, tag=tag, description=fence("description", text, tag))
    return [{"role": "system", "content": prompts.text("coder_system")}, {"role": "user", "content": prompt}]


def _calls_text(method: Signature, examples: Sequence[Sequence[Any]]) -> str:
    lines = []
    for example in list(examples)[:_MAX_EXAMPLES]:
        call = call_text(method.entry, observed_arguments(example) or str(example[0]))
        lines.append(f"{_clip(call, _MAX_EXAMPLE_CHARS)} -> {_clip(_shown_example(example), _MAX_EXAMPLE_CHARS)}")
    return "\n".join(lines)


def _knowledge_messages(
    method: Signature,
    description: str,
    examples: Sequence[Sequence[Any]] | None,
    wanted: set[str],
    protocol: Protocol | None,
) -> list[dict[str, str]]:
    """The code writer's messages for a combination without the header or without the description."""
    prompts = protocol.prompts if protocol is not None else load_prompts()
    text = description.strip() if "description" in wanted else ""
    calls = _calls_text(method, examples) if "examples" in wanted and examples else ""
    tag = fence_tag("coder-knowledge", text, calls)
    known = []
    if "signature" in wanted:
        known.append(f"Header: {method.header}")
    if "description" in wanted:
        known.append("What it does:\n" + fence("description", text, tag))
    if "examples" in wanted:
        known.append("Calls and their results:\n" + (fence("calls", calls, tag) if calls else "(none were observed)"))
    if "signature" in wanted:
        shape = "with exactly this header"
    else:
        implied = {"description": "the description implies", "examples": "the calls imply"}
        shape = "taking its arguments positionally, as many as " + (
            "the description and the calls imply" if len(wanted) == 2 else implied[next(iter(wanted))]
        )
    prompt = prompts.render("coder_knowledge", entry=method.entry, tag=tag, known="\n\n".join(known), shape=shape)
    return [{"role": "system", "content": prompts.text("coder_system")}, {"role": "user", "content": prompt}]


def _shown_example(example: Sequence[Any]) -> str:
    """An observed outcome as this project shows calls: a pair's shown text, or a triple's output or error."""
    if len(example) < 3 or example[2] in (None, "None"):
        return str(example[1])
    return f"raises an exception: {example[2]}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _defines(code: str, entry: str, parse: bool = True) -> bool:
    """True when ``code`` binds ``entry`` at module level (checked on the host's parser, which never runs it).

    Without ``parse``, and for code too long to be run, only a ``def`` line is looked for: parsing costs about
    3 s of CPU per megabyte.
    """
    try:
        if not parse or len(code) > MAX_CODE_CHARS:
            raise ValueError("not parsed")
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Each line is tried once, from its start (an indentation run cannot reach into the next line).
        return bool(re.search(rf"^[ \t]*+(?:async[ \t]++)?def[ \t]++{re.escape(entry)}[ \t]*+\(", code, re.MULTILINE))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == entry for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == entry for alias in node.names
        ):
            return True
    # Definitions nested in a module-level if/try still count: look one level down.
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name == entry:
                    return True
    return False


def extract_code(reply: str, entry: str = "test_func") -> str | None:
    """The code in a model's reply (or an agent's submission).

    Fenced blocks first (```python ones before other fences), then the whole
    text when there are no fences. Among the candidates, the first that
    defines ``entry`` wins; if none does, the first candidate is returned, so
    the score can say the code does not define ``entry``. A fence the model
    never closed (a reply cut short) runs to the end of the text.

    Returns:
        The code, or None when the reply holds nothing but whitespace.
    """
    text = (reply or "").replace("\r\n", "\n")
    blocks = _fenced_blocks(text)
    python = [body for lang, body in blocks if lang in _PYTHON_FENCES]
    other = [body for lang, body in blocks if lang not in _PYTHON_FENCES]
    candidates = [c for c in (python + other) if c.strip()] if blocks else [text]
    candidates = [c.strip("\n") for c in candidates if c.strip()]
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0] + "\n"  # nothing to choose between: no need to parse it
    parsed = 0  # a reply of many blocks is parsed up to a budget, then searched for a def line only
    for candidate in candidates:
        parsed += len(candidate)
        if _defines(candidate, entry, parse=parsed <= _PARSE_BUDGET_CHARS):
            return candidate + "\n"
    return candidates[0] + "\n"


def _fence_opening(line: str) -> tuple[str, str] | None:
    """A fence's marker (three or more backticks or tildes) and its language, when ``line`` opens one."""
    start = len(line) - len(line.lstrip(" \t"))
    mark = line[start : start + 1]
    if mark not in ("`", "~"):
        return None
    end = len(line) - len(line[start:].lstrip(mark))
    if end - start < 3:
        return None
    after = end + len(line[end:]) - len(line[end:].lstrip(" \t"))
    language = _FENCE_LANGUAGE.match(line, after)
    return line[start:end], (language.group() if language else "").lower()


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of ``text`` as ``(language, body)``, read line by line, each line once.

    A fence opens on a line of three or more backticks (or tildes) followed by a language, and a line
    must follow it; it closes on a line holding the same marker and nothing else but blanks, or at the
    end of the text. Lines inside a block open nothing.
    """
    blocks = []
    size = len(text)
    position = 0  # always the start of a line
    while position < size:
        newline = text.find("\n", position)
        if newline < 0:
            break  # the last line opens nothing: no line follows it
        opening = _fence_opening(text[position:newline])
        position = newline + 1
        if opening is None:
            continue
        marker, language = opening
        body_start = position
        while True:
            newline = text.find("\n", position)
            line_end = size if newline < 0 else newline
            if text[position:line_end].strip(" \t") == marker:
                blocks.append((language, text[body_start:position]))
                position = line_end + 1
                break
            if newline < 0:
                blocks.append((language, text[body_start:]))
                position = size
                break
            position = newline + 1
    return blocks


def extract_code_reference(reply: str) -> str | None:
    """The code in a reply by the reference's rules: cut at ``[STOP]``, then the first ```` ```python ```` block,
    else the text after the first fence when the reply has one or two fences; None otherwise."""
    part = cut_at_stop(reply)
    if "```python" in part and "```" in part.split("```python")[-1]:
        return part.split("```python")[1].split("```")[0].strip()
    if part.count("```") in (1, 2):
        return part.split("```")[1].strip()
    return None


_NOT_JSON = object()


def _reference_value(outcome: Outcome, expected: bool) -> Any:
    """A value as the reference compares it: None for any error or limit; expected values through JSON."""
    if outcome.status is not Status.OK:
        return None
    value = decode(outcome.encoded)
    if not expected:
        return value
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        # A value JSON cannot carry (a set, bytes, a tuple-keyed dict): the reference's dataset has no such
        # test (its build drops the row), so it is compared as it is.
        return value


def reference_match(expected: Outcome, got: Outcome) -> bool:
    """The reference's rule for one test input: ``json_round_trip(expected) == got``, every error as None.

    A tuple the function returns therefore never equals the expected value, which JSON turned into a list;
    an error on both sides (of any type) matches, as does an error where the function returns None.
    Never raises: a value that cannot be decoded or compared is no match.
    """
    try:
        return bool(_reference_value(expected, True) == _reference_value(got, False))
    except Exception:
        return False


@dataclass(frozen=True)
class Counterexample:
    """The first test input the code gets wrong, with both outcomes as people read them.

    Attributes:
        input: The argument literal.
        expected: What the hidden function does with it, as agents see call results.
        got: What the code did with it, run alone in a fresh sandbox instance, clipped. Text the
            code produced: for the operator only, never part of an agent's feedback.
    """

    input: str
    expected: str
    got: str


@dataclass(frozen=True)
class ObservedCheck:
    """The code writer's code on the inputs the agent itself observed (the paper's self-contradiction check).

    Attributes:
        checked: Observed inputs run (each distinct input once).
        disagree: Of those, inputs where the code does something else than the hidden function did, which is
            what the agent saw: the description contradicts the agent's own observations there.
    """

    checked: int
    disagree: int

    @property
    def contradicts(self) -> bool:
        """True when the description's code disagrees with at least one observation."""
        return self.disagree > 0


@dataclass(frozen=True)
class CodeMatch:
    """How well some code reproduces a method on its test suite.

    Attributes:
        status: ``scored`` (``fraction`` holds the score, 0 for code that cannot run, with a
            ``reason``) or ``error`` (no score could be made: the model failed, the method has no
            frozen tests; ``reason`` says why).
        fraction: Matching test inputs over all test inputs.
        matches: One flag per test input, in the suite's order.
        reason: Why the score is below 1 (counts and ``FAILURE_KINDS`` only, or the code's own
            syntax error from compiling it on the host), or the error.
        failures: How many test inputs went wrong in each way (``FAILURE_KINDS`` values).
        code: The code that ran (for a model: extracted from its reply).
        model: The code-writing model, or None for direct code.
        reply: The model's full reply (None for direct code).
        counterexample: The first wrong input, when asked for.
        usage: Tokens the code writer spent.
        cost_usd: What it cost.
        cached: True when the code writer's reply came from the cache.
        observed: The code on the agent's observed inputs, when examples were given.
    """

    status: ScoreStatus
    fraction: float | None = None
    matches: tuple[bool, ...] = ()
    reason: str | None = None
    failures: dict[str, int] = field(default_factory=dict)
    code: str | None = None
    model: str | None = None
    reply: str | None = None
    counterexample: Counterexample | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cached: bool = False
    observed: ObservedCheck | None = None


def _shown(outcome: Outcome) -> str:
    """An outcome as people read it, for the operator; clipped before it is built (the code chose its size)."""
    message = _clip(outcome.error_message or "", _MAX_SHOWN_CHARS)
    if outcome.status is Status.OK:
        text = _clip(outcome.value or "", _MAX_SHOWN_CHARS)
    elif outcome.status is Status.ERROR:
        kind = _clip(outcome.error_type or "", _MAX_HOST_ERROR_CHARS)
        text = f"raises {kind}: {message}" if message else f"raises {kind}"
    else:
        text = f"{outcome.status}: {message}"
    return _clip(text, _MAX_SHOWN_CHARS)


def _compare(expected: Outcome, got: Outcome) -> str | None:
    """None when ``got`` matches ``expected``, else the ``FAILURE_KINDS`` key saying how it went wrong.

    The code may have handed back any encoding it liked: one that cannot be decoded (or
    compared) is no match, whatever the exception it raises on the host.
    """
    try:
        if outcomes_match(expected, got):
            return None
    except Exception:
        return "undecodable"
    if got.status is Status.OK:
        try:
            decode(got.encoded)
        except Exception:
            return "undecodable"
        return "value"
    return str(got.status) if str(got.status) in FAILURE_KINDS else "crash"


def _reference_kind(expected: Outcome, got: Outcome) -> str | None:
    """None when the reference's rule matches, else how the outcome went wrong (``FAILURE_KINDS``)."""
    if reference_match(expected, got):
        return None
    return _compare(expected, got) or "value"


def _explain(
    code: str, entry: str, outcomes: Sequence[Outcome], wrong: Sequence[str | None]
) -> tuple[str | None, bool]:
    """Why code scored below 1, and whether it must score 0 (it does not compile or define the entry).

    Only counts and fixed words: what an outcome holds is the code's to choose.
    """
    kinds = Counter(FAILURE_KINDS[kind] for kind in wrong if kind is not None)
    if not kinds:
        return None, False
    # The host compiles the code only to say why every input failed alike (a parse holds the interpreter).
    every_syntax = all(o.status is Status.ERROR and o.error_type == "SyntaxError" for o in outcomes)
    compile_error = _host_syntax_error(code) if every_syntax else None
    if compile_error is not None:
        return f"the code does not compile: {compile_error}", True
    every_name = all(o.status is Status.ERROR and o.error_type == "NameError" for o in outcomes)
    if every_name and not _defines(code, entry):
        return f"the code does not define {entry}", True
    failed = sum(kinds.values())
    if failed == len(outcomes) and len(kinds) == 1:
        return f"every test input fails the same way ({next(iter(kinds))})", False
    parts = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    return f"{failed} of {len(outcomes)} test inputs differ ({parts})", False


def _host_syntax_error(code: str) -> str | None:
    """The code's own syntax error, from compiling it on the host without any test input (so it holds none)."""
    try:
        parse_python(code)
    except SyntaxError as exc:
        text = f"{exc.msg} (line {exc.lineno})" if exc.lineno else str(exc.msg)
        return _clip(text, _MAX_HOST_ERROR_CHARS)
    except (ValueError, RecursionError, MemoryError) as exc:
        return _clip(f"{type(exc).__name__}: {exc}", _MAX_HOST_ERROR_CHARS)
    return None


async def match_code(
    sandbox: SandboxInterface,
    method: Method,
    code: str | None,
    *,
    limits: Limits | None = None,
    counterexample: bool = False,
    protocol: Protocol | None = None,
) -> CodeMatch:
    """Score code on a method's test suite: one sandbox batch, one comparison per input.

    Args:
        sandbox: Where the code runs.
        method: Gives the test inputs, their frozen outcomes and the entry name.
        code: The code (None or blank scores 0).
        limits: Per-input limits (default: the sandbox's).
        counterexample: Also report the first wrong input. It is re-run alone in a fresh
            instance and that outcome is reported, so code cannot carry earlier test
            inputs out through state a batch keeps.
        protocol: Whose rule decides a match and whose per-input time limit holds (default:
            this project's, ``outcomes_match`` within ``limits``).

    Returns:
        ``scored`` with the fraction (0 with a reason for code that cannot run), or
        ``error`` when the method has no frozen tests.
    """
    tests = method.tests
    if not tests:
        return CodeMatch(status="error", reason=f"{method.id} has no tests to score against", code=code)
    if any(case.outcome is None for case in tests):
        return CodeMatch(
            status="error", reason=f"{method.id} is not frozen; run `pau-mcp manifests freeze` first", code=code
        )
    if code is None or not code.strip():
        return CodeMatch(
            status="scored", fraction=0.0, matches=(False,) * len(tests), reason="there is no code", code=code
        )
    if len(code) > MAX_CODE_CHARS:
        return CodeMatch(
            status="scored", fraction=0.0, matches=(False,) * len(tests),
            reason=f"the code is longer than {MAX_CODE_CHARS:,} characters", code=code,
        )  # fmt: skip
    if not _is_text(code):
        return CodeMatch(
            status="scored", fraction=0.0, matches=(False,) * len(tests),
            reason="the code is not valid Unicode text (it holds a lone surrogate)",
            failures={FAILURE_KINDS["invalid_input"]: len(tests)}, code=code,
        )  # fmt: skip
    inputs = [case.input for case in tests]
    reference = protocol is not None and protocol.reference
    if protocol is not None and protocol.rules.codematch_timeout_s is not None:
        limits = dataclasses.replace(limits or Limits(), timeout_s=protocol.rules.codematch_timeout_s, fuel=None)
    try:
        outcomes = await sandbox.arun(code, inputs, entry=method.entry, limits=limits)
    except Exception as exc:  # the sandbox's infrastructure, not the code's result: this code alone gets no score
        log.warning("the sandbox failed on code for %s: %s", method.id, _clip(f"{type(exc).__name__}: {exc}", 500))
        return CodeMatch(status="error", reason=_sandbox_failed(exc), code=code)
    # Decoding what the code handed back and compiling the code on the host is CPU work the code's author
    # chose the size of: off the event loop, so a server answering other sessions meanwhile stays responsive.
    wrong, reason, zero = await off_loop(_assess, code, method, outcomes, reference)
    matches = [kind is None for kind in wrong]
    if zero:
        matches = [False] * len(tests)
    failures = dict(Counter(FAILURE_KINDS[kind] for kind in wrong if kind is not None).most_common())
    example = None
    if counterexample:
        try:
            example = await _counterexample(sandbox, method, code, matches, limits, reference)
        except Exception as exc:
            log.warning("the sandbox failed re-running code for %s: %s", method.id, _clip(str(exc), 500))
    return CodeMatch(
        status="scored",
        fraction=sum(matches) / len(tests),
        matches=tuple(matches),
        reason=reason,
        failures=failures,
        code=code,
        counterexample=example,
    )


def _assess(
    code: str, method: Method, outcomes: Sequence[Outcome], reference: bool
) -> tuple[list[str | None], str | None, bool]:
    """How each test input went (``FAILURE_KINDS`` keys, None for a match), why the code scored below 1, and
    whether it must score 0 (see ``_explain``)."""
    tests = method.tests
    wrong = [
        (_reference_kind if reference else _compare)(case.frozen_outcome().outcome(), got)
        for case, got in zip(tests, outcomes, strict=False)
    ]
    wrong += ["crash"] * (len(tests) - len(wrong))  # an outcome the sandbox never handed back is no match
    reason, zero = _explain(code, method.entry, outcomes, wrong)
    return wrong, reason, zero


def _is_text(code: str) -> bool:
    """False for a string no UTF-8 can carry (a lone surrogate): the sandbox's runtime aborts on one."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sandbox_failed(exc: Exception) -> str:
    return (
        f"the sandbox failed while running the code ({_clip(f'{type(exc).__name__}: {exc}', 300)}); "
        "the other scores are unaffected; see the log, and rebuild with `pau-mcp sandbox build --force` if it persists"
    )


async def _counterexample(
    sandbox: SandboxInterface,
    method: Method,
    code: str,
    matches: Sequence[bool],
    limits: Limits | None,
    reference: bool = False,
) -> Counterexample | None:
    """The first wrong input whose fresh, lone run is also wrong (a few tries), as people read it.

    A fresh instance sees only this input, so what it returns can hold no
    other test input; code that is only wrong inside a batch (it kept state
    across inputs) gets no counterexample rather than a leaky one.
    """
    tried = 0
    for case, ok in zip(method.tests, matches, strict=False):
        if ok:
            continue
        tried += 1
        if tried > _COUNTEREXAMPLE_TRIES:
            break
        (alone,) = await sandbox.arun(code, [case.input], entry=method.entry, limits=limits, fresh=True)
        found = await off_loop(_counterexample_of, case, alone, reference)
        if found is not None:
            return found
    return None


def _counterexample_of(case: Case, got: Outcome, reference: bool) -> Counterexample | None:
    """``case`` with what the code did, when that is wrong; None when it matches."""
    kind = (_reference_kind if reference else _compare)(case.frozen_outcome().outcome(), got)
    if kind is None:
        return None
    shown = "(a value that could not be decoded)" if kind == "undecodable" else _shown(got)
    return Counterexample(input=case.input, expected=_clip(case.frozen_outcome().shown(), _MAX_SHOWN_CHARS), got=shown)


async def write_code(
    llm: LLMClient,
    model: str,
    sandbox: SandboxInterface,
    method: Method,
    description: str,
    *,
    examples: Sequence[Sequence[Any]] | None = None,
    limits: Limits | None = None,
    temperature: float | None = 0.0,
    protocol: Protocol | None = None,
    knowledge: Collection[str] | None = None,
) -> CodeMatch:
    """The paper's code match: a model writes the function from the description, then ``match_code`` scores it.

    With ``examples``, the code is also run on the inputs the agent itself observed and compared with what
    the hidden function did there (``CodeMatch.observed``, the paper's self-contradiction check). With
    ``knowledge``, the code writer gets only those components (``coder_messages``); the check is made for the
    full knowledge only.

    Raises:
        LLMError: only when fatal (bad key, unknown model, unreachable server); other model
            failures come back as an ``error`` result.
    """
    reference = protocol is not None and protocol.reference
    try:
        completion = await llm.complete(
            model,
            coder_messages(method, description, examples, protocol, knowledge),
            temperature=temperature,
            max_tokens=protocol.rules.coder_max_tokens if protocol is not None else None,
            thinking_room=protocol is None or protocol.rules.thinking_room,
        )
    except LLMError as exc:
        if exc.fatal:
            raise
        return CodeMatch(status="error", reason=str(exc), model=model)
    text = protocol.read(completion) if protocol is not None else completion.text
    if reference:
        code = extract_code_reference(text)
    else:
        code = await off_loop(extract_code, text, method.entry)
    scored = await match_code(sandbox, method, code, limits=limits, protocol=protocol)
    reason = scored.reason
    if code is None:
        reason = "the code writer's reply holds no code" + (
            f" (finish reason: {completion.finish_reason})" if completion.finish_reason not in (None, "stop") else ""
        )
    observed = None
    full = knowledge is None or set(knowledge) >= {"signature", "description", "examples"}
    if examples and full and code and scored.status == "scored":
        try:
            observed = await check_observed(sandbox, method, code, examples, limits=limits)
        except Exception as exc:  # the sandbox's infrastructure: the check is left out, the score stands
            log.warning(
                "the sandbox failed checking code for %s on observed inputs: %s", method.id, _clip(str(exc), 500)
            )
    return CodeMatch(
        status=scored.status,
        fraction=scored.fraction,
        matches=scored.matches,
        reason=reason,
        failures=scored.failures,
        code=code,
        model=model,
        reply=text,
        usage=completion.spent,
        cost_usd=completion.cost_usd,
        cached=completion.cached,
        observed=observed,
    )


async def failing_tests(
    sandbox: SandboxInterface, method: Method, code: str | None, *, limit: int = 5, limits: Limits | None = None
) -> list[Counterexample]:
    """The first ``limit`` hidden tests ``code`` gets wrong, each with both outcomes as people read them.

    For the operator's tools only (the failure classifier): ``got`` is text the code produced. Empty
    when there is no code, or when the sandbox fails on it.
    """
    if not code or not code.strip() or not method.tests or any(case.outcome is None for case in method.tests):
        return []
    try:
        outcomes = await sandbox.arun(code, [case.input for case in method.tests], entry=method.entry, limits=limits)
    except Exception as exc:  # the sandbox's infrastructure: no evidence, the report goes on
        log.warning("the sandbox failed running code for %s: %s", method.id, _clip(str(exc), 500))
        return []

    def first_wrong() -> list[Counterexample]:
        wrong = []
        for case, got in zip(method.tests, outcomes, strict=False):
            example = _counterexample_of(case, got, reference=False)
            if example is not None:
                wrong.append(example)
                if len(wrong) >= limit:
                    break
        return wrong

    return await off_loop(first_wrong)


def observed_arguments(example: Sequence[Any]) -> str | None:
    """The argument tuple literal of an observed example: a pair's literal as written, or a reference triple's
    input (stored as the ``repr`` of the agent's text) read by the reference's calling rule."""
    from ..manifests.importers.pau import reference_arguments

    text = str(example[0])
    if len(example) < 3:
        return text
    try:
        value = literal_value(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return reference_arguments(value) if isinstance(value, str) else None


async def check_observed(
    sandbox: SandboxInterface,
    method: Method,
    code: str,
    examples: Sequence[Sequence[Any]],
    *,
    limits: Limits | None = None,
) -> ObservedCheck:
    """Run ``code`` and the hidden function on the inputs the agent observed; count where they disagree.

    Agreement is the project's equality rule (``outcomes_match``); inputs the hidden function does not
    run (not a valid literal) are not counted.
    """
    inputs = list(dict.fromkeys(a for a in (observed_arguments(e) for e in examples) if a))
    if not inputs:
        return ObservedCheck(0, 0)
    hidden = await sandbox.arun(method.source, inputs, entry=method.entry, limits=limits)
    written = await sandbox.arun(code, inputs, entry=method.entry, limits=limits)

    def count() -> ObservedCheck:
        checked = disagree = 0
        for want, got in zip(hidden, written, strict=False):
            if want.status is Status.INVALID_INPUT:
                continue
            checked += 1
            disagree += not outcomes_match(want, got)
        return ObservedCheck(checked, disagree)

    return await off_loop(count)
