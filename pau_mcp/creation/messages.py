"""The creation model's three requests (an input validator, example inputs, a description) and reading its replies.

The prompts are this project's own words, kept as text files in ``pau_mcp/prompts/creation/`` beside the other
templates. The function's source (and what the dataset says about the task) is fenced with a tag made from the
texts themselves (``scoring.fences``): the same function always gives the same request, so the response cache
answers a repeat, and a dataset's text cannot pass for part of the prompt. Replies are read with ``ast`` only and
every part of them is capped before it is copied.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from importlib import resources

from wasm_runtime import parse_python

from ..manifests import call_arguments
from ..prompts import Template, parse_template
from ..scoring import extract_code
from ..scoring.fences import fence, fence_tag

__all__ = [
    "MAX_CALLS",
    "VALIDATOR",
    "describe_messages",
    "inputs_messages",
    "read_calls",
    "read_description",
    "read_validator",
    "validator_messages",
]

#: The validator's name, as the reference named it (PAU's rows define it too).
VALIDATOR = "validate_input_args"
#: Most calls read from one reply; longest reply read, description kept, and argument literal.
MAX_CALLS = 60
_MAX_REPLY_CHARS = 200_000
# A validator is a few lines; its reply is cut short before the fence reader (scoring.extract_code), whose pattern
# is quadratic on a long line of backticks (a megabyte of them takes minutes).
_MAX_VALIDATOR_REPLY_CHARS = 12_000
_MAX_DESCRIPTION_CHARS = 4000
_MAX_CALL_CHARS = 16 * 1024
_MAX_CONTEXT_CHARS = 6000
_CALL = re.compile(r"\btest_func\s*\(")
_LABEL = re.compile(r"^\s*(\*\*)?(description|answer|summary)(\*\*)?\s*:\s*", re.IGNORECASE)
_TEMPLATES = ("system", "validator", "inputs", "describe")


@lru_cache(maxsize=1)
def _templates() -> dict[str, Template]:
    folder = resources.files("pau_mcp.prompts") / "creation"
    return {
        name: parse_template(name, (folder / f"{name}.txt").read_text(encoding="utf-8").removesuffix("\n"))
        for name in _TEMPLATES
    }


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fenced(purpose: str, source: str, context: str | None) -> dict[str, str]:
    """The ``tag``, ``source`` and ``context`` fields: the source fenced, and the task's text fenced when given."""
    task = _clip(context.strip(), _MAX_CONTEXT_CHARS) if context and context.strip() else ""
    tag = fence_tag(f"create-{purpose}", source, task)
    said = (
        f"\n\nWhat the dataset says about the task is fenced between a line <task-{tag}> and a line </task-{tag}>. "
        f"It tells the intent; the code as written is what counts.\n\n{fence('task', task, tag)}"
        if task
        else ""
    )
    return {"tag": tag, "source": fence("source", source.rstrip("\n"), tag), "context": said}


def _messages(name: str, **fields: object) -> list[dict[str, str]]:
    templates = _templates()
    return [
        {"role": "system", "content": templates["system"].render()},
        {"role": "user", "content": templates[name].render(**fields)},
    ]


def validator_messages(source: str, params: list[str], context: str | None) -> list[dict[str, str]]:
    """Ask for ``validate_input_args(params)``: type and plain constraints of each argument of ``test_func``."""
    return _messages("validator", params=", ".join(params), **_fenced("validator", source, context))


def inputs_messages(source: str, count: int, context: str | None) -> list[dict[str, str]]:
    """Ask for about ``count`` calls of ``test_func`` with literal arguments that exercise all its behaviour."""
    return _messages("inputs", count=count, **_fenced("inputs", source, context))


def describe_messages(source: str, params: list[str], context: str | None) -> list[dict[str, str]]:
    """Ask for a description of ``test_func`` precise enough to rewrite it: the gold description."""
    return _messages("describe", params=", ".join(params) or "(it takes none)", **_fenced("describe", source, context))


def read_validator(reply: str, params: list[str]) -> tuple[str | None, str]:
    """The validator in a reply, as source holding only its imports and the function; or None and why not.

    Only ``import`` statements and ``def validate_input_args`` are kept from the reply's code (a model may add
    examples or prints at the top level, which would run with every call). The function must take as many
    positional parameters as ``test_func``'s header lists (``params``, without ``*args``).
    """
    code = extract_code(_clip(reply or "", _MAX_VALIDATOR_REPLY_CHARS), VALIDATOR)
    if code is None:
        return None, "the reply holds no code"
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, f"its code does not parse ({type(exc).__name__})"
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == VALIDATOR), None)
    if function is None:
        return None, f"its code defines no {VALIDATOR}"
    fixed = [p for p in params if not p.startswith("*")]
    positional = [*function.args.posonlyargs, *function.args.args]
    required = len(positional) - len(function.args.defaults)
    if required > len(fixed) or (len(fixed) > len(positional) and function.args.vararg is None):
        return None, f"{VALIDATOR} takes {len(positional)} arguments, test_func's header {len(fixed)}"
    kept: list[ast.stmt] = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) or n is function]
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n", "ok"


def _fits(argument: str, arity: tuple[int, int]) -> bool:
    try:
        node = parse_python(argument, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    count = len(node.elts) if isinstance(node, ast.Tuple) else 1
    return arity[0] <= count <= arity[1]


def read_calls(reply: str, arity: tuple[int, int]) -> list[str]:
    """The argument-tuple literals of the ``test_func(...)`` calls in a reply, in order, each once.

    A call counts when its arguments are all literals and their number fits ``arity`` (required, most); text
    around it on its line (a leading ``-``, a trailing comment or ``-> result``) is ignored. At most
    ``MAX_CALLS`` are read.
    """
    found: list[str] = []
    for line in _clip(reply or "", _MAX_REPLY_CHARS).splitlines():
        match = _CALL.search(line)
        if match is None or len(line) > _MAX_CALL_CHARS:
            continue
        text = _balanced_call(line[match.start() :])
        if text is None:
            continue
        argument = call_arguments(text)
        if argument is None or argument in found or not _all_literal(argument) or not _fits(argument, arity):
            continue
        found.append(argument)
        if len(found) >= MAX_CALLS:
            break
    return found


def _balanced_call(text: str) -> str | None:
    """``test_func(...)`` up to its closing parenthesis (outside strings), or None when it never closes."""
    depth, quote, escaped = 0, "", False
    for at, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return text[: at + 1]
    return None


def _all_literal(argument: str) -> bool:
    try:
        ast.literal_eval(parse_python(argument, mode="eval").body)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def read_description(reply: str) -> str:
    """The description in a reply: its prose, without a leading label, code blocks or a [STOP] marker; capped."""
    text = re.sub(r"```.*?(```|\Z)", "", _clip(reply or "", _MAX_REPLY_CHARS), flags=re.DOTALL)
    text = text.split("[STOP]", 1)[0]
    text = _LABEL.sub("", text.strip(), count=1)
    return _clip(" ".join(text.split()), _MAX_DESCRIPTION_CHARS)
