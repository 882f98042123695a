"""What counts as a description of a function: prose, never a tool call, a JSON object or a placeholder.

Small models asked for a description sometimes answer with the call they meant to make (``{"name": "submit",
"description": ...}``, a ``<tool_call>`` block, a fenced JSON object). Taken as the description, such text was
submitted, exported as tool documentation and rated 5/5 by a judge. Whoever takes a model's text as a description
asks ``description_problem`` first: the harness's agents refuse such a reply with feedback (or read it as the call
it names), the run never submits it, ``export docs`` and ``serve --docs`` never serve it, and the scorer never hands
it (or a placeholder older runs submitted) to the judge or the code writer.

Reading is linear in the text and bounded: only the first ``MAX_READ_CHARS`` are looked at, and JSON is parsed only
after a scan of its depth (``pau_mcp.llm.replies.read_json``).
"""

from __future__ import annotations

from .llm import read_json

__all__ = ["MAX_READ_CHARS", "PLACEHOLDERS", "description_problem", "fenced_blocks", "is_description"]

#: Placeholders earlier versions of the harness submitted when an agent gave no description: descriptions of nothing.
PLACEHOLDERS = frozenset({"(no description)", "(the agent did not submit a description)"})

#: The most of a text read to decide (a description is at most a few kilobytes; a reply of JSON says so early).
MAX_READ_CHARS = 64 * 1024

_FENCE = "```"
_CALL_TAGS = ("<tool_call>", "</tool_call>", "<function_call>", "<|python_tag|>")
#: Beside a ``name``, the keys that make a JSON object a call (or a submission) rather than data a description shows.
_CALL_KEYS = frozenset({"arguments", "parameters", "args", "description", "code"})


def fenced_blocks(text: str) -> list[str]:
    """The insides of the text's fenced code blocks (```lang ... ```), in order; an unclosed last one runs to the end.

    One pass with ``str.find``: linear in the text.
    """
    blocks: list[str] = []
    position = 0
    while (start := text.find(_FENCE, position)) >= 0:
        newline = text.find("\n", start)
        if newline < 0:
            break
        end = text.find(_FENCE, newline)
        blocks.append(text[newline + 1 : end if end >= 0 else len(text)])
        if end < 0:
            break
        position = end + len(_FENCE)
    return blocks


def _unfenced(text: str) -> str:
    """``text`` without one code fence around all of it, stripped."""
    inner = text.strip()
    if inner.startswith(_FENCE):
        newline = inner.find("\n")
        inner = inner[newline + 1 :] if newline >= 0 else ""
        if inner.rstrip().endswith(_FENCE):
            inner = inner.rstrip()[: -len(_FENCE)]
    return inner.strip()


def _call_like(value: object) -> bool:
    """A JSON value shaped as a call or a submission: an object with a ``name`` and a call's keys (or a ``function``
    object with a name: OpenAI's own shape), or a list of such objects."""
    if isinstance(value, list):
        return bool(value) and all(_call_like(item) for item in value)
    if not isinstance(value, dict):
        return False
    function = value.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return True
    return isinstance(value.get("name"), str) and bool(_CALL_KEYS & value.keys())


def description_problem(text: str | None) -> str | None:
    """Why ``text`` is not a description (one clause, to show the model or the operator), or None when it is prose.

    Not a description: empty text, a placeholder, a tool call written as text (``<tool_call>`` and kin), text that is
    all one JSON value (fenced or not), text that opens a JSON object it never closes, and a fenced block holding a
    call (an object with ``name``, ``arguments``, ``description``, ...). Prose that quotes a small JSON value in a
    sentence, or shows an example output in a fence, is a description.
    """
    stripped = (text or "").strip()
    if not stripped:
        return "it is empty"
    if stripped in PLACEHOLDERS:
        return "it is a placeholder, not a description"
    head = stripped[:MAX_READ_CHARS]
    lowered = head.lower()
    if any(tag in lowered for tag in _CALL_TAGS):
        return "it is a tool call written as text"
    whole = _unfenced(head)
    if whole.startswith(("{", "[")):
        value = read_json(whole) if len(stripped) <= MAX_READ_CHARS else None
        if value is not None:
            return "it is a JSON value, not prose"
        if whole.startswith("{"):
            return "it is a JSON object (cut short or malformed), not prose"
    if any(
        _call_like(read_json(block.strip())) for block in fenced_blocks(head) if block.strip().startswith(("{", "["))
    ):
        return "it holds a tool call written as JSON"
    return None


def is_description(text: str | None) -> bool:
    """Whether ``text`` is a description (``description_problem`` finds nothing wrong with it)."""
    return description_problem(text) is None
