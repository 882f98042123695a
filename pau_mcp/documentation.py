"""Tool documentation an explorer learned: each method's final description, as documentation other agents can use.

An evaluation run ends with one description per method. ``pau-mcp export docs RUN`` writes them out as a file of
tool documentation, and ``pau-mcp serve --docs SOURCE`` serves the same hidden tools documented by them in place of
the header-and-examples text, so any MCP client can use tools an explorer documented. The sources:

* ``examples`` (the default everywhere): no documentation; each tool shows its header and initial examples.
* ``none``: each tool shows its header only (an opaque tool).
* a run name, or a file ``export docs`` wrote: each method's final description in that run.
* ``gold``: the gold descriptions, the upper bound. Only ever when the operator names it.

No source but ``gold`` may carry a gold description: a run of gold descriptions (``pau-mcp score --gold``) is
refused, and a text that holds its method's gold description, or nearly (``near_gold``: case, spacing,
punctuation, invisible characters and small edits aside), is left out, that method served with its header only,
while the others are served; a learned text is data, so it is capped.
This module builds what the server serves (``Documentation``); the server itself reads no run and no gold text.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .manifests import ManifestError, ManifestStore, Method
from .manifests.checks import quotes_gold
from .runstore import RunStore, StoreError

__all__ = [
    "DOCS_EXAMPLES",
    "DOCS_GOLD",
    "DOCS_NONE",
    "FORMAT",
    "MAX_DOC_CHARS",
    "DocsError",
    "Documentation",
    "LearnedDoc",
    "docs_document",
    "docs_json",
    "docs_markdown",
    "learned_docs",
    "load_documentation",
    "near_gold",
    "quotes_gold",
]

#: No documentation: the header and initial examples, as a server shows them by default.
DOCS_EXAMPLES = "examples"
#: The header only.
DOCS_NONE = "none"
#: The gold descriptions: the operator's upper bound, never a default.
DOCS_GOLD = "gold"

#: What an exported file says it is.
FORMAT = "pau-mcp/tool-docs"
#: The longest documentation of one method served or exported (a description gone wrong is refused, not clipped).
MAX_DOC_CHARS = 32 * 1024
#: The largest exported file read.
_MAX_FILE_BYTES = 64 * 1024 * 1024
#: Characters in a shingle of ``near_gold``, and the share of a gold text's shingles a text may hold at most.
_SHINGLE = 8
_NEAR_SHARE = 0.8
#: Under this many normalised characters, a gold text is near only a text within ``_SHORT_EDITS`` edit of it.
_SHORT_GOLD = 40
_SHORT_EDITS = 1


class DocsError(ValueError):
    """Documentation cannot be built from the source named; the message says what to do instead."""


@dataclass(frozen=True)
class Documentation:
    """Documentation to serve in place of the header-and-examples text (``pau_mcp.server.ToolDocs`` carries it).

    Attributes:
        source: The source as the operator named it (``none``, ``gold``, a run, a file).
        texts: Each method's documentation by method id.
        skipped: Methods of the source left without documentation, with the reason.
        quoting: Those of them left out because their text holds the gold description or nearly (``near_gold``).
    """

    source: str
    texts: dict[str, str]
    skipped: dict[str, str]
    quoting: tuple[str, ...] = ()


@dataclass(frozen=True)
class LearnedDoc:
    """One method's final description in a run."""

    method_id: str
    description: str


def learned_docs(store: RunStore, run: str) -> tuple[list[LearnedDoc], dict[str, str]]:
    """Each method's final description in ``run``: its episode's submission, or (a run without episodes, such as a
    ``serve`` run) its latest submission.

    Returns:
        The descriptions, in the run's order, and the methods left out with why (the episode failed, nothing was
        submitted).

    Raises:
        DocsError: no such run, a run of gold descriptions, or a task run.
    """
    try:
        run_id = store.run_id(run)
    except StoreError as exc:
        raise DocsError(str(exc)) from None
    recorded = store.run(run_id)
    kind = recorded.kind if recorded is not None else ""
    if kind == "gold":
        raise DocsError(
            f"run {run} holds gold descriptions (pau-mcp score --gold): they are served only with --docs gold"
        )
    config = recorded.config if recorded is not None else {}
    if config.get("mode") == "tasks":
        raise DocsError(f"run {run} is a task run: its answers are not documentation; name an exploring run")
    submissions = {row.id: row for row in store.submissions(run_id)}
    found: list[LearnedDoc] = []
    skipped: dict[str, str] = {}
    episodes = store.episodes(run_id)
    if episodes:
        for episode in episodes:
            method_id = episode.method_id
            row = submissions.get(episode.submission_id) if episode.submission_id is not None else None
            if episode.state != "done" or row is None:
                skipped[method_id] = f"its episode is {episode.state}" if row is None else "its episode failed"
                continue
            _keep(found, skipped, method_id, row.description or "")
    else:
        latest: dict[str, str] = {}
        for row in submissions.values():  # in id order: a later submission replaces an earlier one
            latest[row.method_id] = row.description or ""
        for method_id, text in latest.items():
            _keep(found, skipped, method_id, text)
    return found, skipped


def _keep(found: list[LearnedDoc], skipped: dict[str, str], method_id: str, text: str) -> None:
    from .descriptions import PLACEHOLDERS, description_problem

    text = text.strip()
    problem = description_problem(text)
    if not text or text in PLACEHOLDERS:
        skipped[method_id] = "its agent gave no description"
    elif problem is not None:  # a tool call or JSON a model wrote where prose belongs is no documentation
        skipped[method_id] = f"its description is not prose ({problem})"
    elif len(text) > MAX_DOC_CHARS:
        skipped[method_id] = f"its description is longer than {MAX_DOC_CHARS:,} characters"
    else:
        found.append(LearnedDoc(method_id, text))


def docs_document(store: RunStore, manifests: ManifestStore, run: str) -> dict[str, Any]:
    """The file ``pau-mcp export docs RUN`` writes: the run's final descriptions as tool documentation.

    Raises:
        DocsError: as ``learned_docs``.
    """
    docs, skipped = learned_docs(store, run)
    config = store.run_config(store.run_id(run))
    methods: dict[str, dict[str, str]] = {}
    for doc in docs:
        entry = {"documentation": doc.description}
        header = _header(manifests, doc.method_id)
        if header:
            entry = {"header": header, **entry}
        methods[doc.method_id] = entry
    return {
        "format": FORMAT,
        "version": 1,
        "run": run,
        "agent": config.get("agent"),
        "model": config.get("model"),
        "suite": config.get("suite") or ", ".join(config.get("suites") or []),
        "methods": methods,
        "skipped": skipped,
    }


def docs_markdown(document: Mapping[str, Any]) -> str:
    """An exported document as Markdown, one section per method, for people to read."""
    lines = [f"# Tool documentation learned in run {document['run']}", ""]
    who = ", ".join(f"{k}: {document[k]}" for k in ("agent", "model", "suite") if document.get(k))
    if who:
        lines += [who, ""]
    for method_id, entry in document["methods"].items():
        lines += [f"## {method_id}", ""]
        if entry.get("header"):
            lines += [f"`{entry['header']}`", ""]
        lines += [entry["documentation"], ""]
    return "\n".join(lines)


def _header(manifests: ManifestStore, method_id: str) -> str | None:
    try:
        return manifests.method(method_id).header
    except ManifestError:
        return None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    documentation: str = Field(max_length=MAX_DOC_CHARS)


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: str
    version: int = 1
    methods: dict[str, _Entry]


def _read_file(path: Path) -> dict[str, str]:
    try:
        size = path.stat().st_size
        if size > _MAX_FILE_BYTES:
            raise DocsError(f"{path} is {size:,} bytes; a documentation file holds at most {_MAX_FILE_BYTES:,}")
        document = _Document.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise DocsError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise DocsError(
            f"{path} is not a documentation file `pau-mcp export docs` writes ({where}: {first['msg']})"
        ) from None
    if document.format != FORMAT:
        raise DocsError(f"{path} says it is {document.format!r}, not {FORMAT!r}: write it with `pau-mcp export docs`")
    return {method_id: entry.documentation.strip() for method_id, entry in document.methods.items()}


#: Every ASCII character but a letter or a digit, as a space.
_ASCII_SPACES = str.maketrans({chr(code): " " for code in range(128) if not chr(code).isalnum()})


def _folded(text: str) -> str:
    """``text`` as ``near_gold`` compares it: compatibility-normalised, case-folded, letters and digits only, with
    one space for every run of anything else; format characters (zero-width spaces, joiners, bidi marks) and
    combining marks dropped, so that they cannot split a word."""
    if text.isascii():  # the common case, in C: nothing to drop, and every other character a space
        return " ".join(text.lower().translate(_ASCII_SPACES).split())
    kept: list[str] = []
    space = True
    for char in unicodedata.normalize("NFKC", text).casefold():
        category = unicodedata.category(char)
        if category in ("Cf", "Mn", "Me"):
            continue
        if char.isalnum():
            kept.append(char)
            space = False
        elif not space:
            kept.append(" ")
            space = True
    return "".join(kept).strip()


def _holds_within_edits(text: str, pattern: str, edits: int) -> bool:
    """True when some part of ``text`` becomes ``pattern`` in at most ``edits`` insertions, deletions or
    substitutions: Myers' bit-parallel search (1999), one pass over ``text`` with a few operations on integers of
    ``len(pattern)`` bits per character (linear for the short patterns it is given)."""
    size = len(pattern)
    if size <= edits:
        return True
    where: dict[str, int] = {}
    for i, char in enumerate(pattern):
        where[char] = where.get(char, 0) | (1 << i)
    full, top = (1 << size) - 1, 1 << (size - 1)
    plus, minus, score = full, 0, size  # the vertical deltas of the column, and its last row's distance
    for char in text:
        equal = where.get(char, 0)
        vertical = equal | minus
        horizontal = (((equal & plus) + plus) ^ plus) | equal
        up = minus | (~(horizontal | plus) & full)
        down = plus & horizontal
        score += 1 if up & top else -1 if down & top else 0
        up, down = (up << 1) & full, (down << 1) & full  # the pattern may start anywhere in the text: no carry in
        plus, minus = down | (~(vertical | up) & full), up & vertical
        if score <= edits:
            return True
    return False


def near_gold(text: str, gold: str) -> bool:
    """True when ``text`` holds ``gold`` or nearly: compared folded (``_folded``), a long gold text is near when
    the text holds 80% of its 8-character shingles; a short one, when the whole text is within one edit of it.

    Linear in both texts (sets of shingles; a bit-parallel search for short ones), so a megabyte of a hostile text
    is read once.
    """
    wanted, found = _folded(gold), _folded(text)
    if not wanted:
        return False
    if wanted in found:
        return True
    if len(wanted) < _SHORT_GOLD:  # a short one only when the whole text is it, give or take one character
        return len(found) <= len(wanted) + _SHORT_EDITS and _holds_within_edits(found, wanted, _SHORT_EDITS)
    shingles = {wanted[i : i + _SHINGLE] for i in range(len(wanted) - _SHINGLE + 1)}
    held = {found[i : i + _SHINGLE] for i in range(len(found) - _SHINGLE + 1)} & shingles
    return len(held) >= _NEAR_SHARE * len(shingles)


def load_documentation(
    source: str, store_path: Path | str, manifests: ManifestStore, suites: Iterable[str]
) -> Documentation | None:
    """What ``--docs SOURCE`` serves for the methods of ``suites``; None for ``examples`` (no documentation).

    ``none``, ``examples`` and ``gold`` are the sources' names, whatever runs are called; any other value is a file
    ``export docs`` wrote when one exists at that path, else a run of the run store at ``store_path``.

    A text that holds its method's gold description or nearly (``near_gold``) is left out, for any source but
    ``gold``: that method is served with its header only, and ``skipped`` says why.

    Raises:
        DocsError: an unknown run or a file that is not documentation; a run of gold descriptions, for any source
            but ``gold``.
        ManifestError: a suite does not exist or is broken.
    """
    if source == DOCS_EXAMPLES:
        return None
    methods: dict[str, Method] = {m.id: m for m in manifests.methods(suites)}
    if source == DOCS_NONE:
        return Documentation(DOCS_NONE, {}, {})
    if source == DOCS_GOLD:
        return Documentation(DOCS_GOLD, {method_id: m.description for method_id, m in methods.items()}, {})
    path = Path(source).expanduser()
    skipped: dict[str, str] = {}
    if path.is_file():
        texts = _read_file(path)
    else:
        store = RunStore(store_path)
        try:
            docs, skipped = learned_docs(store, source)
        finally:
            store.close()
        texts = {doc.method_id: doc.description for doc in docs}
    # Here, not at import: it brings the model clients (pau_mcp.llm), which every server start imported for nothing.
    from .descriptions import description_problem

    texts = {method_id: text for method_id, text in texts.items() if method_id in methods and text}
    for method_id, text in list(texts.items()):
        problem = description_problem(text)
        if problem is not None:  # a file written before descriptions had to be prose: served as none
            skipped[method_id] = f"its description is not prose ({problem})"
            del texts[method_id]
    quoting = tuple(method_id for method_id, text in texts.items() if near_gold(text, methods[method_id].description))
    for method_id in quoting:
        del texts[method_id]
        skipped[method_id] = "its documentation quotes its gold description (gold text is served only with --docs gold)"
    missing = {m: "the source has no documentation of it" for m in methods if m not in texts and m not in skipped}
    kept = {m: why for m, why in skipped.items() if m in methods}
    return Documentation(source, texts, {**kept, **missing}, quoting=quoting)


def docs_json(document: Mapping[str, Any]) -> str:
    """An exported document as the file holds it."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
