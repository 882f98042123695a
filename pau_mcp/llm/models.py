"""Model strings and what each model accepts: a packaged capability table, a user's own rows, and overrides.

A model is written ``provider/name``. What the request for it must look like
(whether a temperature is accepted, which token-limit field the API wants,
whether the model thinks before it answers and how that is switched) comes
from ``capabilities.json``: rows of name patterns, each setting some fields.
A user's own table (``--model-capabilities``) is read before the packaged one,
so its rows win field by field.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, fields
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import LLMNotConfigured

__all__ = [
    "DEFAULT_CAPABILITIES",
    "EFFORTS",
    "PROVIDERS",
    "Capabilities",
    "CapabilityTable",
    "ModelDates",
    "Overrides",
    "check_effort",
    "parse_model",
]

#: The providers a model string may name.
PROVIDERS = ("openai", "azure", "anthropic")

#: Reasoning efforts, least to most; each provider gets the nearest it accepts.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")

#: The capability table used unless ``--model-capabilities`` adds rows of one's own.
DEFAULT_CAPABILITIES = Path(__file__).resolve().parent.parent / "capabilities.json"


def parse_model(model: str | None) -> tuple[str, str]:
    """Split ``provider/model`` (only at the first ``/``: ``openai/meta-llama/Llama-3-8B`` names an OpenAI-compatible model).

    Raises:
        LLMNotConfigured: the string names no known provider.
    """
    provider, sep, name = (model or "").partition("/")
    if not sep or not name.strip() or provider not in PROVIDERS:
        raise LLMNotConfigured(
            f"model {model!r} must be written provider/model: openai/<model> for OpenAI or any OpenAI-compatible server "
            "(OpenRouter, vLLM, Ollama, ...: set OPENAI_BASE_URL), azure/<deployment> for Azure OpenAI, or "
            "anthropic/<model>",
            model=model,
        )
    return provider, name.strip()


def check_effort(effort: str | None) -> str | None:
    """The effort itself when it is one of :data:`EFFORTS` (or None).

    Raises:
        LLMNotConfigured: naming the accepted values.
    """
    if effort is not None and effort not in EFFORTS:
        raise LLMNotConfigured(
            f"reasoning effort {effort!r} is not one of {', '.join(EFFORTS)}; fix --reasoning-effort"
        )
    return effort


@dataclass(frozen=True)
class Capabilities:
    """What one model's API accepts, as the request for it must be shaped.

    Attributes:
        api: ``chat`` (chat completions) or ``responses`` (OpenAI's Responses API), for ``openai/`` and ``azure/``.
        temperature: Whether a sampling temperature is accepted; when not, none is sent.
        token_limit: The chat completions field for the reply's length: ``max_tokens`` or ``max_completion_tokens``.
        reasoning: Whether the model thinks before answering unless told not to.
        reasoning_effort: The effort sent when the caller names none (None: the provider's default).
        thinking_tokens: Room for thinking added to the caller's token limit whenever the model thinks (the
            limit covers hidden reasoning too); for Claude's extended thinking, the budget at ``medium`` effort.
        thinking: Claude's thinking switch: ``enabled`` (a token budget) or ``adaptive`` (an effort).
        thinking_switch: How an effort turns a hybrid open model's thinking on or off: ``chat_template_kwargs``
            (``enable_thinking``, read by vLLM and SGLang) or ``prompt`` (a ``/think`` or ``/no_think`` tag).
    """

    api: Literal["chat", "responses"] = "chat"
    temperature: bool = True
    token_limit: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    reasoning: bool = False
    reasoning_effort: str | None = None
    thinking_tokens: int = 8192
    thinking: Literal["enabled", "adaptive"] | None = None
    thinking_switch: Literal["chat_template_kwargs", "prompt"] | None = None

    def thinks(self, effort: str | None) -> bool:
        """Whether a request with this effort (None: the caller named none) lets the model think."""
        effort = effort if effort is not None else self.reasoning_effort
        if effort == "none":
            return False
        return self.reasoning or effort is not None


@dataclass(frozen=True)
class ModelDates:
    """What is known of when a model learnt what it knows (None: not known).

    Attributes:
        released: The day the model (the snapshot a name stands for) was first served.
        cutoff: The last day of its training data, as its provider states it.
    """

    released: date | None = None
    cutoff: date | None = None


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    match: list[str] = Field(min_length=1)
    note: str = ""
    api: Literal["chat", "responses"] | None = None
    temperature: bool | None = None
    token_limit: Literal["max_tokens", "max_completion_tokens"] | None = None
    reasoning: bool | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    thinking_tokens: int | None = Field(None, ge=0, le=1_000_000)
    thinking: Literal["enabled", "adaptive"] | None = None
    thinking_switch: Literal["chat_template_kwargs", "prompt"] | None = None
    released: date | None = None
    cutoff: date | None = None

    def matches(self, model: str) -> bool:
        # A pattern with a slash is matched against the whole model string; otherwise against the last part of the
        # name, so openai/gpt-5, openai/openai/gpt-5 (OpenRouter) and azure/gpt-5 share a row.
        whole = model.lower()
        base = whole.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(whole if "/" in p else base, p.lower()) for p in self.match)


class _TableFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = ""
    models: list[_Row]


_FIELDS = tuple(f.name for f in fields(Capabilities))


class CapabilityTable:
    """Rows of model-name patterns and the capabilities they set; each field comes from the first row setting it.

    Args:
        rows: The rows, first match first.
        source: Where they came from, for messages.
    """

    def __init__(self, rows: list[_Row], source: str = "") -> None:
        self.rows = rows
        self.source = source
        self._seen: dict[str, Capabilities] = {}

    @classmethod
    def load(cls, path: Path | None = None) -> CapabilityTable:
        """The packaged table, preceded by the rows of ``path`` when one is given.

        Raises:
            LLMNotConfigured: a file is missing or malformed; the message names the file and the field.
        """
        rows = _read(DEFAULT_CAPABILITIES)
        if path is None:
            return cls(rows, str(DEFAULT_CAPABILITIES))
        return cls(_read(Path(path).expanduser()) + rows, f"{path} + {DEFAULT_CAPABILITIES}")

    def lookup(self, model: str) -> Capabilities:
        """The capabilities of ``provider/name``: every matching row's fields, earlier rows first; defaults else."""
        if model not in self._seen:
            values: dict[str, Any] = {}
            for row in self.rows:
                if row.matches(model):
                    for name in _FIELDS:
                        if name not in values and name in row.model_fields_set:
                            values[name] = getattr(row, name)
            self._seen[model] = Capabilities(**{k: v for k, v in values.items() if v is not None or k in _NULLABLE})
        return self._seen[model]

    def dates(self, model: str) -> ModelDates:
        """When ``provider/name`` was released and its training data ends, from the first matching rows that say."""
        found: dict[str, date] = {}
        for row in self.rows:
            if row.matches(model):
                for name in ("released", "cutoff"):
                    value = getattr(row, name)
                    if name not in found and value is not None:
                        found[name] = value
        return ModelDates(**found)


_NULLABLE = {"reasoning_effort", "thinking", "thinking_switch"}


def _read(path: Path) -> list[_Row]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LLMNotConfigured(
            f"cannot read the model capability table {path}: {exc.strerror or exc}; fix --model-capabilities"
        ) from None
    try:
        return _TableFile.model_validate_json(text).models
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise LLMNotConfigured(
            f"{path}: invalid model capability table at {where}: {first['msg']}; expected "
            '{"models": [{"match": ["o3*"], "temperature": false, "token_limit": "max_completion_tokens"}]}'
        ) from None


@dataclass(frozen=True)
class Overrides:
    """Request settings a user chose for an agent's model, replacing the agent's own (None: keep the agent's).

    Attributes:
        temperature: Sampling temperature (sent only where the model accepts one).
        max_tokens: The longest visible reply per request; a thinking model gets its thinking room on top.
        reasoning_effort: One of :data:`EFFORTS`.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None

    def __post_init__(self) -> None:
        check_effort(self.reasoning_effort)

    def any(self) -> bool:
        """True when at least one setting is overridden."""
        return any(value is not None for value in (self.temperature, self.max_tokens, self.reasoning_effort))
