"""Reading the reference benchmark's prompt strings out of a checkout the user supplies.

This repository never contains the reference's wording; ``import_reference``
finds each prompt where the reference keeps it (``WHERE``), by parsing the
file with ``ast`` (nothing of the checkout is run), turns its placeholders
(``[HEADER]``, and ``{header}`` in its f-strings) into template fields, and
writes one template file per prompt into ``DATA_DIR/prompts/reference/``.
Anything else in brackets (``[STOP]``) stays text, as the reference sends it.
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

from .templates import SPECS, PromptsError, parse_template, reference_dir

__all__ = ["WHERE", "ImportedPrompts", "Location", "import_reference"]

_REPOSITORY = "github.com/DhananjayAshok/PAU-Benchmark"


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
                f"{where} interpolates {ast.unparse(part)}, which is none of its fields ({', '.join(sorted(fields))}); "
                f"is this a checkout of {_REPOSITORY}?"
            )
    return "".join(text)


def _read(checkout: Path, name: str, location: Location) -> str:
    path = checkout / location.file
    where = f"{location.file}: {location.scope + '.' if location.scope else ''}{location.name}"
    if not path.is_file():
        raise PromptsError(
            f"{checkout} has no {location.file}: give the directory of a checkout of {_REPOSITORY} "
            "(the one holding eval.py, baselines.py, creation.py and utils/)"
        )
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise PromptsError(f"cannot parse {path}: {exc}") from None
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
    return text


def _commit(checkout: Path) -> str | None:
    """The checkout's commit, read from ``.git`` without running git (None when there is none)."""
    git = checkout / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: "):
            ref = head[5:]
            loose = git / ref
            if loose.is_file():
                return loose.read_text(encoding="utf-8").strip()
            for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
            return None
        return head or None
    except OSError:
        return None


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
    texts = {name: _read(checkout, name, location) for name, location in WHERE.items()}
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
            "files": {
                name: {
                    "file": WHERE[name].file,
                    "sha256": hashlib.sha256((checkout / WHERE[name].file).read_bytes()).hexdigest(),
                }
                for name in texts
            },
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
