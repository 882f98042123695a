"""Whether a model's score on a suite is fresh: the suite was made after the model could have learnt anything of it.

LiveCodeBench's rule, for pau-mcp's suites: a score counts as fresh only when nothing of the suite existed before
the model's last known date. The suite's day comes from its ``suite.json`` (``manifests.SuiteInfo``):

- made by ``pau-mcp create --after`` from dated functions: the earliest day one of them was first published
  (``first_published``), since a published function may be in a crawl from that day on;
- made by ``pau-mcp create`` from your own functions: the day it was created (``created``), since nothing of it
  was public before (keep it private, and commit to it: ``pau-mcp manifests commit``);
- made from a public dataset or suite without ``--after`` (``public_source``), imported, or written by hand: no day,
  so never fresh (the packaged ``builtin`` suite is public in this repository).

The model's day is the later of its release and its training cutoff, from the packaged capability table
(``pau_mcp/capabilities.json``, rows of your own with ``--model-capabilities``): a model keeps being trained after its
data cutoff, up to its release. A model with neither is never fresh. The comparison is by day, strictly after.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

from .llm import ModelDates
from .manifests import SuiteInfo

__all__ = ["Freshness", "assess_freshness", "freshness_line", "suite_day"]


@dataclass(frozen=True)
class Freshness:
    """The verdict for one model on one suite.

    Attributes:
        status: ``fresh`` (the suite was made after the model's day), ``stale`` (on or before it), or ``unknown``
            (the suite or the model has no day).
        suite_day: The day from which the suite existed (None: not known).
        model_day: The model's release or cutoff, whichever is later (None: neither is known).
        reason: One line saying why, for a summary or a leaderboard's note.
    """

    status: Literal["fresh", "stale", "unknown"]
    suite_day: date | None
    model_day: date | None
    reason: str

    @property
    def fresh(self) -> bool:
        """True only for a fresh score."""
        return self.status == "fresh"


def suite_day(info: SuiteInfo) -> tuple[date | None, str]:
    """The day from which anything of the suite may have been public, and what it is (or why there is none)."""
    if info.first_published is not None:
        return info.first_published, f"its earliest function was first published on {info.first_published}"
    if info.created is None:
        return None, f"suite {info.name} records no creation date (it was not made by `pau-mcp create`)"
    if info.public_source:
        return None, (
            f"suite {info.name} was made from public functions without --after, so a model may have read them"
        )
    return info.created.date(), f"suite {info.name} was created on {info.created.date()}"


def assess_freshness(info: SuiteInfo, model: str, dates: ModelDates) -> Freshness:
    """Whether ``model``'s score on the suite of ``info`` is fresh.

    Args:
        info: The suite's ``suite.json``.
        model: The model (``provider/name``), as runs record it.
        dates: What the capability table knows of it (``CapabilityTable.dates(model)``).
    """
    day, said = suite_day(info)
    known = [d for d in (dates.released, dates.cutoff) if d is not None]
    model_day = max(known) if known else None
    if day is None:
        return Freshness("unknown", None, model_day, said)
    if model_day is None:
        return Freshness(
            "unknown", day, None,
            f"no release or cutoff date is known for {model}: add one to a capability table of your own "
            "(--model-capabilities)",
        )  # fmt: skip
    which = "released" if model_day == dates.released else "trained up to"
    if day > model_day:
        return Freshness("fresh", day, model_day, f"{said}, after {model} was {which} {model_day}")
    return Freshness("stale", day, model_day, f"{said}, but {model} was {which} {model_day}")


def freshness_line(model: str, suite: str, verdict: Freshness) -> str:
    """How a summary says it: ``openai/m on suite mine: fresh (...)``."""
    word = {"fresh": "fresh", "stale": "not fresh", "unknown": "freshness unknown"}[verdict.status]
    return f"{model} on suite {suite}: {word} ({verdict.reason})"
