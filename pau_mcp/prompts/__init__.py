"""Prompt templates: this project's wording (packaged) and the reference benchmark's (imported by the user)."""

from .reference import WHERE, ImportedPrompts, Location, import_reference
from .templates import (
    DEFAULT_PROTOCOL,
    PROTOCOLS,
    SPECS,
    PromptsError,
    PromptSet,
    PromptsMissing,
    Template,
    load_prompts,
    parse_template,
    reference_dir,
)

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "SPECS",
    "WHERE",
    "ImportedPrompts",
    "Location",
    "PromptSet",
    "PromptsError",
    "PromptsMissing",
    "Template",
    "import_reference",
    "load_prompts",
    "parse_template",
    "reference_dir",
]
