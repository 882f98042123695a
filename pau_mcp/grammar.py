"""The paper loop's reply grammar: the input an action gives, and what a reflection decides.

One reading for every explorer that runs the loop of reasoning, acting and
reflecting: the harness's paper agent (``pau_mcp.harness.agents``) and the RL
environment (``pau_mcp.rl``). The reference protocol reads replies by the
reference benchmark's own rules (``pau_mcp.harness.reference_agent``), not these.

* A model's thinking (``<think>...</think>``, or everything before a lone
  ``</think>``) is never read.
* A marker counts at the start of a line, in any case and with the decoration
  models add (``**INPUT:**``, ``- Input:``, ``> INPUT:``): ``INPUT:``,
  ``HYPOTHESIS:``, ``CONCLUDED: YES|NO``. A word that only ends in "input:"
  inside a sentence is prose, not a marker.
* An action's input is its last ``INPUT:`` line. What follows the marker is
  the literal; a call (``test_func(1, 2)``) gives its arguments, and prose after
  the arguments is dropped. When nothing follows the marker on its line, the
  literal is the next line, or the inside of the fenced block that starts there.
  Without any marker, the input is the last line (fenced or not) that reads as
  an argument tuple of the function's arity (any literal for one argument) or a
  call with literal arguments.
* Reading is linear in the reply and capped: only the last ``MAX_READ_CHARS``
  of a reply are read, and a literal longer than ``MAX_LITERAL_CHARS`` is never
  parsed (an ``INPUT:`` line gives it as written, for the rules to refuse).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = [
    "MAX_LITERAL_CHARS", "MAX_READ_CHARS", "Reflection", "read_input", "read_inputs", "read_reflection", "visible_text",
]  # fmt: skip

#: The longest tail of a reply that is read (a step's reply is a few hundred tokens; a flood is cut here first).
MAX_READ_CHARS = 64 * 1024

#: The longest literal that is parsed to find the arguments in it (the server's argument limit is 64 KiB; a model's
#: step writes far less).
MAX_LITERAL_CHARS = 16 * 1024

_TAG = re.compile(r"<(/?)think(?:ing)?>", re.IGNORECASE)

# One line, anchored at its start: decoration, the marker's word, decoration, a colon, decoration, the rest. Each
# class is followed by text it cannot hold, so a line is matched in time linear in its length.
_DECORATION = r"[ \t>*_`#-]*"
_MARKER = re.compile(
    rf"{_DECORATION}(?P<word>input|hypothesis|concluded)[ \t*_`]*:[ \t*_`]*(?P<rest>.*)", re.IGNORECASE | re.DOTALL
)
_DECISION = re.compile(r"(yes|no)\b", re.IGNORECASE)
_FENCE = re.compile(r"[ \t]*(```|~~~)")


def visible_text(reply: str) -> str:
    """The reply without a model's thinking: ``<think>`` (or ``<thinking>``) blocks, and everything before a lone
    end tag (the chat template opened the block in the prompt).

    A block the token limit cut off (an opening tag without its end) hides the rest of the reply. One pass over the
    tags, so linear in the reply however they nest or repeat.
    """
    text = reply or ""
    if "think" not in text.lower():
        return text.strip()
    kept: list[str] = []
    position = 0
    inside = False
    for tag in _TAG.finditer(text):
        closing = tag.group(1) == "/"
        if inside:
            if closing:
                inside = False
                position = tag.end()
        elif closing:
            kept.clear()  # a lone end tag: everything before it was thinking
            position = tag.end()
        else:
            kept.append(text[position : tag.start()])
            inside = True
    if not inside:
        kept.append(text[position:])
    return "".join(kept).strip()


def _lines(reply: str) -> list[str]:
    return visible_text(reply)[-MAX_READ_CHARS:].splitlines()


def _marker(line: str) -> tuple[str, str] | None:
    """``(word, rest)`` for a marker line (the word lower-cased), else None."""
    match = _MARKER.match(line)
    if match is None:
        return None
    return match["word"].lower(), match["rest"]


def _is_fence(line: str) -> bool:
    return _FENCE.match(line) is not None


def _unquoted(text: str) -> str:
    return text.strip().strip("`").strip()


# -- inputs -------------------------------------------------------------------------------------


def read_input(reply: str, arity: int | None = None) -> str | None:
    """The argument literal an action reply gives, or None when it gives none.

    Args:
        reply: The model's reply (thinking included or not: it is dropped).
        arity: The function's parameter count; None reads any parenthesised literal as the arguments.

    Returns:
        The literal: from the last ``INPUT:`` line (a call's arguments as a tuple, prose after them dropped,
        anything else as written), or from the last line that reads as the function's arguments.
    """
    lines = _lines(reply)
    for index in range(len(lines) - 1, -1, -1):
        marked = _marker(lines[index])
        if marked is None or marked[0] != "input":
            continue
        written = _unquoted(marked[1])
        if not written or _is_fence(marked[1]):
            written = _following(lines, index + 1)
        if written:
            return _leading_arguments(written, arity) or written
    for line in reversed(lines):
        if _is_fence(line):
            continue
        found = _as_arguments(_unquoted(line.strip().strip("*->").strip()), arity)
        if found:
            return found
    return None


def read_inputs(reply: str, arity: int | None = None, limit: int = 10) -> list[str]:
    """Every argument literal a reply gives on its ``INPUT:`` lines, in order, at most ``limit`` (the observer asks
    for a round of inputs at once); each is read as ``read_input`` reads its last one. Without any ``INPUT:`` line,
    the lines that read as the function's arguments.

    Linear in the reply: each marker looks only at its own lines (``_following`` stops at the next marker), only the
    capped tail is read, and reading stops at ``limit``.
    """
    lines = _lines(reply)
    found: list[str] = []
    for index, line in enumerate(lines):
        if len(found) >= limit:
            return found
        marked = _marker(line)
        if marked is None or marked[0] != "input":
            continue
        written = _unquoted(marked[1])
        if not written or _is_fence(marked[1]):
            written = _following(lines, index + 1)
        if written:
            found += _listed_arguments(written, arity, limit - len(found)) or [written]
    if found:
        return found[:limit]
    for line in lines:
        if len(found) >= limit:
            break
        if _is_fence(line):
            continue
        literal = _as_arguments(_unquoted(line.strip().strip("*->").strip()), arity)
        if literal:
            found.append(literal)
    return found


def _following(lines: list[str], start: int) -> str:
    """The literal after an empty ``INPUT:`` line: the next line, or the inside of the fence that opens there.

    Stops at the next marker line, so the lines each ``INPUT:`` looks at are its own: reading stays linear.
    """
    index = start
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or _marker(lines[index]) is not None:
        return ""
    if not _is_fence(lines[index]):
        return _unquoted(lines[index])
    inside: list[str] = []
    for line in lines[index + 1 :]:
        if _is_fence(line) or _marker(line) is not None:
            break
        inside.append(line)
    return "\n".join(inside).strip()


def _leading_arguments(text: str, arity: int | None) -> str | None:
    """The arguments at the start of ``text``, which may go on in prose (``(3,) to see the sign``)."""
    found = _as_arguments(text, arity)
    if found is None:
        end = _group_end(text)
        if end is not None and end < len(text):
            found = _as_arguments(text[:end], arity)
    return found


def _listed_arguments(text: str, arity: int | None, limit: int) -> list[str]:
    """The inputs a line lists one after another (``(1,), (2,); (3,)``, ``f(1) or f(2)``), at most ``limit``; else
    the one input the line starts with (``((1, 2), (3, 4))`` is one input of two tuple arguments); none when it does
    not start with one.

    Two or more groups that each read as an input are that many inputs, even where the line as a whole would read
    as one tuple (``(1, 2), (3, 4)`` for two arguments): the prompt asks for each input as a parenthesised tuple.
    One pass: each group is scanned from where the last ended (``_group_end`` from an offset), never re-sliced.
    """
    found: list[str] = []
    start = 0
    while start < len(text) and len(found) < limit:
        end = _group_end(text, start)
        literal = _as_arguments(text[start:end], arity) if end is not None else None
        if literal is None or end is None:
            break
        found.append(literal)
        start = _after_separator(text, end)
    if len(found) >= 2:
        return found
    leading = _leading_arguments(text, arity)
    return [leading] if leading else []


_SEPARATOR_WORDS = ("and ", "or ", "then ")


def _after_separator(text: str, index: int) -> int:
    """Where the next listed input starts after ``index``: past blanks, commas, semicolons and a joining word."""
    while index < len(text) and text[index] in " \t,;":
        index += 1
    for word in _SEPARATOR_WORDS:
        if text.startswith(word, index):
            index += len(word)
            while index < len(text) and text[index] in " \t":
                index += 1
            break
    return index


def _group_end(text: str, start: int = 0) -> int | None:
    """Where the bracketed group at ``start`` in ``text`` ends (after a call's name, if any); None if it does not.

    One pass: brackets are counted outside string literals, whose quotes and escapes are followed; at most
    ``MAX_LITERAL_CHARS`` are scanned.
    """
    index = start
    while index < len(text) and (text[index].isalnum() or text[index] in "_."):
        index += 1  # a call's name
    if index >= len(text) or text[index] not in "([{":
        return None
    depth = 0
    quote = ""
    while index < len(text) and index < start + MAX_LITERAL_CHARS:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif text.startswith(quote, index):
                index += len(quote) - 1
                quote = ""
        elif char in "'\"":
            quote = char * 3 if text.startswith(char * 3, index) else char
            index += len(quote) - 1
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def _as_arguments(text: str, arity: int | None) -> str | None:
    """``text`` as an argument literal when it reads as one: a call with literal arguments, a tuple of the arity, or
    (one argument) any literal that is not a tuple; None otherwise. A tuple of another length is not read as one
    tuple argument: after ``INPUT:`` it goes as written, and the rules refuse it naming the arity."""
    if not text or len(text) > MAX_LITERAL_CHARS:
        return None
    # Imported here: the sandbox's package (and its parse lock, python/cpython#106905) is only for the processes that
    # read a reply's arguments, which hold it anyway; a report or a client never pays for it.
    from wasm_runtime.literals import parse_python

    try:
        tree = parse_python(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if isinstance(tree, ast.Call) and not tree.keywords and _is_name(tree.func):
        if not all(_literal(argument) for argument in tree.args):
            return None
        inner = ", ".join(ast.get_source_segment(text, argument) or ast.unparse(argument) for argument in tree.args)
        return f"({inner},)" if len(tree.args) == 1 else f"({inner})"
    if not _literal(tree):
        return None
    if "\n" in text:
        text = ast.unparse(tree)  # a literal written over several lines, on one
    if isinstance(tree, ast.Tuple):  # the arguments as a tuple: of the arity, or not an input (the rules say why)
        return text if arity is None or len(tree.elts) == arity else None
    if arity == 1:
        return f"({text},)"
    if arity is None and text.startswith("(") and text.endswith(")"):
        return text  # a parenthesised value whose count the rules check
    return None


def _is_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and _is_name(node.value))


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


# -- reflections --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reflection:
    """What a reflection said.

    Attributes:
        concluded: True when it said ``CONCLUDED: YES``.
        hypothesis: Its ``HYPOTHESIS:`` section, or the whole visible reply when it has none.
        clean: True when the reply followed the format (a decision and a hypothesis section).
        marked: True when it had a ``HYPOTHESIS:`` section.
    """

    concluded: bool
    hypothesis: str
    clean: bool
    marked: bool = False


def read_reflection(reply: str) -> Reflection:
    """Read a reflection: ``CONCLUDED: YES`` or ``NO`` and ``HYPOTHESIS: <description>``, in either order.

    The hypothesis runs from its marker to the next marker line (or the end); the first decision counts.
    """
    lines = _lines(reply)
    decision: bool | None = None
    section: list[str] | None = None
    collecting = False
    for line in lines:
        marked = _marker(line)
        if marked is not None and marked[0] == "concluded":
            said = _DECISION.match(marked[1])
            if said is not None and decision is None:
                decision = said.group(1).lower() == "yes"
            collecting = False
        elif marked is not None and marked[0] == "hypothesis" and section is None:
            section = [marked[1]]
            collecting = True
        elif marked is not None:
            collecting = False
        elif collecting and section is not None:
            section.append(line)
    hypothesis = "\n".join(section).strip() if section is not None else ""
    visible = "\n".join(lines).strip()
    return Reflection(
        concluded=bool(decision),
        hypothesis=hypothesis or visible,
        clean=decision is not None and bool(hypothesis),
        marked=bool(hypothesis),
    )
