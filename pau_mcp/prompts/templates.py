"""Prompt templates: every prompt a model gets, as text files with named fields, read from one place.

A template is a text file whose ``{name}`` fields are filled in one pass
(Python's format syntax: a literal brace is written twice, ``{{``). Each
protocol has its own set (``SPECS`` says which templates a set holds and the
exact fields of each): this project's wording ships with the package
(``pau_mcp/prompts/pau-mcp/``); the reference benchmark's wording is never
part of this repository, so ``pau-mcp prompts import-reference`` reads it out
of a checkout the user supplies into ``DATA_DIR/prompts/reference/``.

A file's text is the prompt as sent, less the file's one final newline.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "SPECS",
    "PromptSet",
    "PromptsError",
    "PromptsMissing",
    "Template",
    "load_prompts",
    "parse_template",
    "reference_dir",
]

#: This project's protocol (its wording and rules), the default.
DEFAULT_PROTOCOL = "pau-mcp"

#: Every protocol, default first.
PROTOCOLS = (DEFAULT_PROTOCOL, "reference")

#: Per protocol, each template's name and its fields, exactly.
SPECS: dict[str, dict[str, frozenset[str]]] = {
    "pau-mcp": {
        name: frozenset(fields)
        for name, fields in {
            # The harness's agents (pau_mcp.harness.agents).
            "agent_system": (),
            "paper_context": ("header", "examples", "recent", "hypothesis"),
            "paper_reason": ("context",),
            "paper_act": ("context", "plan", "arity", "example"),
            "paper_act_again": ("prompt", "arity", "example"),
            "paper_reflect": ("context", "call", "shown"),
            "paper_final": ("context",),
            "paper_final_again": ("prompt", "problem"),
            "tools_task_interactive": ("header", "examples", "tool", "budget"),
            "tools_task_incontext": ("header", "examples", "tool"),
            "tools_nudge": (),
            "observer_context": ("header", "observations", "description"),
            "observer_hypothesis": ("context",),
            "observer_inputs": ("context", "count", "arity", "example"),
            "observer_refine": ("context", "disagreements"),
            # The task agent (pau_mcp.harness.tasks).
            "task_system": (),
            "task_question": ("question", "budget", "calls", "tools"),
            "task_nudge": (),
            # The scorer (pau_mcp.scoring.judge, pau_mcp.scoring.codematch).
            "judge_system": (),
            "judge": ("tag", "reference", "candidate"),
            "coder_system": (),
            "coder": ("header", "tag", "description"),
            "coder_with_calls": ("header", "tag", "description", "calls"),
            "coder_knowledge": ("entry", "tag", "known", "shape"),
            # The failure-mode classifier (pau_mcp.reports.failures).
            "classifier_system": (),
            "classifier": ("tag", "episode", "gold", "description", "tests", "trajectory"),
            # The RL environment (pau_mcp.rl): the explorer, its critic, the SFT exports, the answer-aware teacher.
            "rl_system": (),
            "rl_context": ("header", "known", "tried", "hypothesis", "budget"),
            "rl_reason": ("context",),
            "rl_propose": ("context", "plan", "arity", "sample"),
            "rl_reflect": ("context", "result"),
            "rl_reflect_final": ("context", "result"),
            "rl_final": ("header", "examples"),
            "rl_teacher": ("description",),
            "critic_system": (),
            "critic_fences": ("tag",),
            "critic_reasoning": (),
            "critic_hypothesis_asymmetric": (),
            "critic_hypothesis_symmetric": (),
            "critic_evidence": (),
            "critic_ending": (),
        }.items()
    },
    # The reference benchmark's prompts, named by what they ask; fields are its own placeholders, lower-cased.
    "reference": {
        name: frozenset(fields)
        for name, fields in {
            "reason": ("header", "critique", "prev", "hypothesis"),
            "act": ("header", "prev", "hypothesis", "reasoning"),
            "reflect": ("header", "prev", "hypothesis", "reasoning", "last_inputs"),
            "incontext": ("header", "prev"),
            "judge": ("true", "hypothesis"),
            "coder": ("description", "header", "examples"),
        }.items()
    },
}


class PromptsError(ValueError):
    """A template set is broken (a file missing, a field wrong); the message says how to repair it."""


class PromptsMissing(PromptsError):
    """The reference's templates have not been imported yet; the message gives the command that does it."""


@dataclass(frozen=True)
class Template:
    """One prompt template.

    Attributes:
        name: Its name in the set (its file name without ``.txt``).
        text: The template, fields unfilled.
        fields: The names of its fields.
    """

    name: str
    text: str
    fields: frozenset[str]

    def render(self, **values: object) -> str:
        """The prompt, every field filled.

        Raises:
            KeyError: a field is missing or unknown (a bug in the caller, not a user error).
        """
        given = frozenset(values)
        if given != self.fields:
            raise KeyError(
                f"template {self.name} has fields {sorted(self.fields)}; got {sorted(given)}"
                + (f" (missing {sorted(self.fields - given)})" if self.fields - given else "")
            )
        return self.text.format(**values)


@dataclass(frozen=True)
class PromptSet:
    """A protocol's templates.

    Attributes:
        protocol: ``pau-mcp`` or ``reference``.
        templates: Each template by name.
        origin: Where the files were read from.
    """

    protocol: str
    templates: dict[str, Template]
    origin: str

    def render(self, name: str, **values: object) -> str:
        """Fill the template ``name``."""
        return self.templates[name].render(**values)

    def text(self, name: str) -> str:
        """A template without fields, as it is sent."""
        return self.render(name)

    @property
    def digest(self) -> str:
        """The first 12 hex digits of a SHA-256 over every template, for run records: the same texts, the same digest."""
        hashed = hashlib.sha256()
        for name in sorted(self.templates):
            for part in (name, self.templates[name].text):
                data = part.encode("utf-8")
                hashed.update(len(data).to_bytes(8, "big") + data)
        return hashed.hexdigest()[:12]


def parse_template(name: str, text: str) -> Template:
    """A template from its text, with the fields it uses.

    Raises:
        PromptsError: the text is not a valid template (a lone brace, a positional or dotted field).
    """
    fields: set[str] = set()
    try:
        for _, field, spec, conversion in string.Formatter().parse(text):
            if field is None:
                continue
            if not field.isidentifier() or spec or conversion:
                raise PromptsError(
                    f"template {name}: field {{{field}}} is not a plain name; write a literal brace as {{{{ or }}}}"
                )
            fields.add(field)
    except ValueError as exc:
        raise PromptsError(f"template {name}: {exc}; write a literal brace as {{{{ or }}}}") from None
    return Template(name, text, frozenset(fields))


def reference_dir(data_dir: Path) -> Path:
    """Where ``pau-mcp prompts import-reference`` writes the reference's templates."""
    return Path(data_dir) / "prompts" / "reference"


def _read_set(protocol: str, files: dict[str, str], origin: str, fix: str) -> PromptSet:
    spec = SPECS[protocol]
    missing = sorted(set(spec) - set(files))
    if missing:
        raise PromptsError(f"{origin} has no template {', '.join(missing)}; {fix}")
    templates = {}
    for name, fields in spec.items():
        template = parse_template(name, files[name])
        if template.fields != fields:
            raise PromptsError(
                f"{origin}/{name}.txt has fields {sorted(template.fields)}, expected {sorted(fields)}; {fix}"
            )
        templates[name] = template
    return PromptSet(protocol, templates, origin)


@lru_cache(maxsize=1)
def _packaged() -> PromptSet:
    folder = resources.files("pau_mcp.prompts").joinpath(DEFAULT_PROTOCOL)
    files = {
        entry.name.removesuffix(".txt"): entry.read_text(encoding="utf-8").removesuffix("\n")
        for entry in folder.iterdir()
        if entry.name.endswith(".txt")
    }
    return _read_set(DEFAULT_PROTOCOL, files, f"pau_mcp/prompts/{DEFAULT_PROTOCOL}", "reinstall pau-mcp")


def _imported(folder: Path) -> PromptSet:
    fix = "run `pau-mcp prompts import-reference DIR` again with DIR a checkout of github.com/DhananjayAshok/PAU-Benchmark"
    if not folder.is_dir():
        raise PromptsMissing(
            f"the reference protocol's prompts are not imported (no {folder}): run `pau-mcp prompts "
            "import-reference DIR` with DIR a checkout of github.com/DhananjayAshok/PAU-Benchmark (this repository "
            "does not contain its wording)"
        )
    files = {}
    for path in sorted(folder.glob("*.txt")):
        try:
            files[path.stem] = path.read_text(encoding="utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise PromptsError(f"cannot read {path}: {exc}; {fix}") from None
    return _read_set("reference", files, str(folder), fix)


def load_prompts(protocol: str = DEFAULT_PROTOCOL, data_dir: Path | None = None) -> PromptSet:
    """A protocol's templates.

    Args:
        protocol: ``pau-mcp`` (packaged) or ``reference`` (imported into ``data_dir``).
        data_dir: The data directory (``Settings.data_dir``); needed for ``reference``.

    Raises:
        PromptsMissing: the reference's templates were never imported (the message gives the command).
        PromptsError: a file is missing or has other fields than its template needs; or an unknown protocol.
    """
    if protocol == DEFAULT_PROTOCOL:
        return _packaged()
    if protocol == "reference":
        if data_dir is None:
            raise PromptsError("the reference protocol's prompts live in the data directory: give data_dir")
        return _imported(reference_dir(data_dir))
    raise PromptsError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
