"""Reading the reference benchmark's prompt strings out of a checkout the user supplies.

This repository never contains the reference's wording; ``import_reference``
finds each prompt where the reference keeps it (``WHERE``), by parsing the
file with ``ast`` (nothing of the checkout is run), turns its placeholders
(``[HEADER]``, and ``{header}`` in its f-strings) into template fields, and
writes one template file per prompt into ``DATA_DIR/prompts/reference/``.
Anything else in brackets (``[STOP]``) stays text, as the reference sends it.

The checkout is the user's to give and is read as untrusted: only regular
files inside it, each under a size cap (``pau_mcp.userfiles``); a file that
links out of it, a FIFO or a device is refused in one line, as is source
that nests deeper than Python's parser goes. Its commit is recorded only
when ``.git`` holds one, a hexadecimal object name, read from files inside
``.git``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..userfiles import UnreadableFile, is_inside, read_bytes, read_text
from .templates import SPECS, PromptsError, parse_template, reference_dir

__all__ = ["WHERE", "ImportedPrompts", "Location", "import_reference"]

_REPOSITORY = "github.com/DhananjayAshok/PAU-Benchmark"
#: The largest source file read (the reference's are a few tens of kilobytes).
_MAX_SOURCE_BYTES = 4 * 1024 * 1024
#: The largest ``.git/HEAD`` or loose ref read, and the largest ``.git/packed-refs``.
_MAX_REF_BYTES = 4096
_MAX_PACKED_REFS_BYTES = 16 * 1024 * 1024
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Location:
    """Where the reference keeps one prompt.

    Attributes:
        file: The file, relative to the checkout.
        name: The variable (or class attribute) the string is assigned to.
        scope: The function or class the assignment sits in, or None at module level.
    """

    file: str
    name: str
    scope: str | None = None


#: Each reference template and where its string is (the reference benchmark as published).
WHERE: dict[str, Location] = {
    "reason": Location("utils/__init__.py", "first_reasoning_prompt"),
    "act": Location("baselines.py", "input_prompt", "interactive"),
    "reflect": Location("baselines.py", "reflection_prompt", "interactive"),
    "incontext": Location("creation.py", "direct", "Prompts"),
    "judge": Location("eval.py", "eval_prompt"),
    "coder": Location("baselines.py", "code_prediction_prompt"),
}


@dataclass(frozen=True)
class ImportedPrompts:
    """What an import wrote.

    Attributes:
        directory: The template directory.
        templates: Template name to its fields.
        digest: The set's digest (``PromptSet.digest``), which runs record.
    """

    directory: Path
    templates: dict[str, list[str]]
    digest: str


def _assigned_strings(tree: ast.Module, location: Location) -> list[ast.expr]:
    """The values assigned to ``location.name`` in its scope (module level when the scope is None)."""
    found: list[ast.expr] = []

    def visit(body: list[ast.stmt], scope: str | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(node.body, node.name)
            elif isinstance(node, ast.Assign) and scope == location.scope:
                if any(isinstance(t, ast.Name) and t.id == location.name for t in node.targets):
                    found.append(node.value)
            elif isinstance(node, ast.AnnAssign) and scope == location.scope and node.value is not None:
                if isinstance(node.target, ast.Name) and node.target.id == location.name:
                    found.append(node.value)
            elif isinstance(node, (ast.If, ast.With, ast.Try)):
                visit(node.body, scope)

    visit(tree.body, None)
    return found


def _template_text(value: ast.expr, fields: frozenset[str], where: str) -> str:
    """The string as a template: literal braces doubled, expected placeholders (``[NAME]``, ``{name}``) as fields."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        parts: list[ast.expr] = [value]
    elif isinstance(value, ast.JoinedStr):
        parts = list(value.values)
    else:
        raise PromptsError(f"{where} is not a string literal; is this a checkout of {_REPOSITORY}?")
    names = "|".join(re.escape(field.upper()) for field in sorted(fields))
    placeholder = re.compile(rf"\[({names})\]") if names else None
    text = []
    for part in parts:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            literal = part.value.replace("{", "{{").replace("}", "}}")
            if placeholder is not None:
                literal = placeholder.sub(lambda match: "{" + match.group(1).lower() + "}", literal)
            text.append(literal)
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id in fields
            and part.conversion == -1
            and part.format_spec is None
        ):
            text.append("{" + part.value.id + "}")
        else:
            raise PromptsError(
                f"{where} interpolates {_shown(part)}, which is none of its fields ({', '.join(sorted(fields))}); "
                f"is this a checkout of {_REPOSITORY}?"
            )
    return "".join(text)


def _shown(node: ast.expr, limit: int = 80) -> str:
    """An expression as source, clipped (one of any size or depth: the checkout chose it)."""
    try:
        text = " ".join(ast.unparse(node).split())
    except (RecursionError, MemoryError, ValueError):
        text = f"a {type(node).__name__} expression"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read(checkout: Path, name: str, location: Location) -> tuple[str, str]:
    """The template read from ``location``, and the SHA-256 of the file it came from."""
    path = checkout / location.file
    where = f"{location.file}: {location.scope + '.' if location.scope else ''}{location.name}"
    if not os.path.lexists(path):
        raise PromptsError(
            f"{checkout} has no {location.file}: give the directory of a checkout of {_REPOSITORY} "
            "(the one holding eval.py, baselines.py, creation.py and utils/)"
        )
    try:
        source = read_bytes(path, limit=_MAX_SOURCE_BYTES, inside=checkout)
    except UnreadableFile as exc:
        raise PromptsError(f"{exc}; give the directory of a checkout of {_REPOSITORY}") from None
    from wasm_runtime.literals import parse_python  # its lock (python/cpython#106905); only this command reads files

    try:
        tree = parse_python(source.decode("utf-8"))
    except (UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise PromptsError(f"cannot parse {path}: {' '.join(str(exc).split())}") from None
    except (RecursionError, MemoryError):
        raise PromptsError(
            f"cannot parse {path}: it nests deeper than Python's parser goes; the reference's files do not "
            f"(is this a checkout of {_REPOSITORY}?)"
        ) from None
    values = _assigned_strings(tree, location)
    if not values:
        raise PromptsError(
            f"{where} not found: the checkout's layout differs from the reference as published ({_REPOSITORY})"
        )
    fields = SPECS["reference"][name]
    text = _template_text(values[-1], fields, where)
    template = parse_template(name, text)
    if template.fields != fields:
        raise PromptsError(
            f"{where} has the placeholders {sorted(f.upper() for f in template.fields)}, expected "
            f"{sorted(f.upper() for f in fields)}: the checkout's prompts differ from the reference as published"
        )
    return text, hashlib.sha256(source).hexdigest()


def _commit(checkout: Path) -> str | None:
    """The checkout's commit, read from ``.git`` without running git (None when there is none).

    Only files inside the checkout's own ``.git`` directory are read, each under a small cap, and only a
    hexadecimal object name counts as a commit: a ``HEAD`` naming a ref outside ``.git``, a link, a FIFO or
    a device gives None, never what it points at.
    """
    git = checkout / ".git"
    if git.is_symlink() or not git.is_dir() or not is_inside(git, checkout):
        return None
    try:
        head = read_text(git / "HEAD", limit=_MAX_REF_BYTES, inside=git).strip()
        if not head.startswith("ref: "):
            return _object_name(head)
        ref = head[5:].strip()
        if not ref.startswith("refs/") or not is_inside(git / ref, git):
            return None
        if os.path.lexists(git / ref):
            return _object_name(read_text(git / ref, limit=_MAX_REF_BYTES, inside=git).strip())
        if not os.path.lexists(git / "packed-refs"):
            return None
        packed = read_text(git / "packed-refs", limit=_MAX_PACKED_REFS_BYTES, inside=git)
    except UnreadableFile:
        return None
    for line in packed.splitlines():
        if line.endswith(" " + ref):
            return _object_name(line.split(" ", 1)[0])
    return None


def _object_name(text: str) -> str | None:
    """``text`` when it is a git object name (40 or 64 lower-case hexadecimal digits), else None."""
    return text if len(text) in (40, 64) and set(text) <= _HEX else None


def import_reference(checkout: Path, data_dir: Path) -> ImportedPrompts:
    """Import the reference's prompts from ``checkout`` into ``DATA_DIR/prompts/reference/``.

    Every template is read and checked before anything is written; the new set then replaces
    the old one whole.

    Raises:
        PromptsError: the directory is not a checkout of the reference (a file, a prompt or a
            placeholder is missing); the message names it.
    """
    checkout = Path(checkout).expanduser()
    if not checkout.is_dir():
        raise PromptsError(f"{checkout} is not a directory: give a checkout of {_REPOSITORY}")
    read = {name: _read(checkout, name, location) for name, location in WHERE.items()}
    texts = {name: text for name, (text, _) in read.items()}
    target = reference_dir(data_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".reference-", dir=target.parent))
    try:
        for name, text in texts.items():
            (staging / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
        origin = {
            "repository": _REPOSITORY,
            "checkout": str(checkout.resolve()),
            "commit": _commit(checkout),
            "files": {name: {"file": WHERE[name].file, "sha256": digest} for name, (_, digest) in read.items()},
        }
        (staging / "origin.json").write_text(json.dumps(origin, indent=2) + "\n", encoding="utf-8")
        old = target.with_name(f".old-{os.getpid()}") if target.exists() else None
        if old is not None:
            target.rename(old)
        staging.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    from .templates import load_prompts

    prompts = load_prompts("reference", data_dir)
    return ImportedPrompts(
        target, {name: sorted(t.fields) for name, t in sorted(prompts.templates.items())}, prompts.digest
    )
