"""What requests cost: a user-editable price table and the running spend of a client."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import LLMNotConfigured
from .replies import Completion, Usage

__all__ = ["DEFAULT_PRICING", "Price", "Pricing", "Spend"]

#: The price table used unless ``--pricing`` / the settings name another.
DEFAULT_PRICING = Path(__file__).resolve().parent.parent / "pricing.json"


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = ""
    models: dict[str, Price]


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class Pricing:
    """A price table: model string to price per million input and output tokens.

    Args:
        prices: Prices by model string (``openai/gpt-4o-mini``).
        source: Where they came from, for messages.
    """

    def __init__(self, prices: Mapping[str, Price], source: str = "") -> None:
        self.prices = dict(prices)
        self.source = source

    @classmethod
    def load(cls, path: Path | None = None) -> Pricing:
        """Read a price file (the packaged ``pricing.json`` when ``path`` is None).

        Raises:
            LLMNotConfigured: the file is missing or malformed; the message names the file and the field.
        """
        try:
            path = DEFAULT_PRICING if path is None else Path(path).expanduser()
            text = path.read_text(encoding="utf-8")
            source = str(path)
        except OSError as exc:
            raise LLMNotConfigured(f"cannot read the price file {path}: {exc.strerror or exc}; fix --pricing") from None
        try:
            parsed = _PriceFile.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(file)"
            raise LLMNotConfigured(
                f"{source}: invalid price file at {where}: {first['msg']}; "
                'expected {"models": {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}}} (dollars per million tokens)'
            ) from None
        return cls(parsed.models, source)

    def price(self, model: str) -> Price | None:
        """The price of a model: an exact entry, else the entry without a date or ``-latest`` suffix."""
        if model in self.prices:
            return self.prices[model]
        undated = _DATED.sub("", model)
        return self.prices.get(undated)

    def cost(self, model: str, usage: Usage) -> float | None:
        """Dollars for ``usage`` tokens of ``model``; None when the model is unpriced."""
        price = self.price(model)
        if price is None:
            return None
        return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


@dataclass
class Spend:
    """What a client's requests have cost so far.

    Attributes:
        calls: Completions returned (including cached ones).
        cached_calls: Of those, answered from the cache.
        usage: Tokens actually spent (cached replies excluded).
        cost_usd: Dollars actually spent.
        unpriced: Models used that have no price.
    """

    calls: int = 0
    cached_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def add(self, completion: Completion) -> None:
        """Count one completion."""
        self.calls += 1
        self.cached_calls += int(completion.cached)
        self.usage = self.usage + completion.spent
        self.cost_usd += completion.cost_usd
        if not completion.priced:
            self.unpriced.add(completion.model)
