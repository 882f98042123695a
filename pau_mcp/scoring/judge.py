"""The LLM judge: how close a hypothesised description comes to the gold one, from 1 to 5.

The paper's setting: a judge model reads both descriptions and rates the
candidate on a five-point rubric, ending its reply with ``Rating: X``. The
candidate is an agent's text: it is fenced with a tag it cannot contain
(``fences``), and the rating is read only from the reply's last line. A reply
without a readable rating is recorded as *unscored*, with the reason, never
as a number; ``summarise_ratings`` can count unscored replies as 1 for parity
with the reference implementation, and says that it did.

Under the reference protocol (``pau_mcp.protocol``) the judge gets the
reference's own prompt (imported, unfenced, as the reference sends it), its
reply is cut at ``[STOP]``, and the first ``rating: X`` anywhere in it counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..contract import ScoreStatus
from ..llm import Completion, LLMClient, LLMError, Usage
from ..prompts import PromptSet, load_prompts
from ..protocol import Protocol, cut_at_stop
from .fences import fence, fence_tag

__all__ = [
    "JudgeResult",
    "RatingSummary",
    "judge_description",
    "judge_messages",
    "parse_rating",
    "parse_rating_anywhere",
    "summarise_ratings",
]

# The last line only, as the prompt asks: "Rating: 4", "rating:4", "**Rating:** 4", "Rating = 4/5", "Rating: [4]",
# "Final rating: 4."; not "Rating: 4.5", "Rating: 45" or "Rating: 4 because ...".
# Every repeat is possessive (``*+``): neighbouring runs of blanks never trade characters, so a long run of them
# is read once (as plain ``*`` the engine tries every split: cubic on a line of spaces that ends wrongly).
_RATING_LINE = re.compile(
    r"[*_\s]*+(?:final\s++)?rating[*_\s]*+[:=][*_\s]*+\[?\s*+([1-5])\s*+\]?(?:\s*+/\s*+5)?[*_\s]*+\.?[*_\s]*+",
    re.IGNORECASE,
)
_RATING_ANYWHERE = re.compile(r"rating\s*+\**+\s*+[:=]\s*+\**+\s*+\[?\s*+[1-5](?![\d.,]\d)(?!\d)", re.IGNORECASE)


def judge_messages(gold: str, candidate: str, protocol: Protocol | None = None) -> list[dict[str, str]]:
    """The judge's chat messages for one comparison.

    This project's protocol: both texts fenced with a tag neither contains; the same texts give the
    same messages (the tag is derived from them; see ``fences``), so the response cache answers a
    repeated judgement. The reference protocol: its prompt with both texts filled in, one user message.
    """
    if protocol is not None and protocol.reference:
        prompt = protocol.prompts.render("judge", true=gold, hypothesis=candidate)
        return [{"role": "user", "content": prompt}]
    prompts: PromptSet = protocol.prompts if protocol is not None else load_prompts()
    gold, candidate = gold.strip(), candidate.strip()
    tag = fence_tag("judge", gold, candidate)
    prompt = prompts.render(
        "judge", tag=tag, reference=fence("reference", gold, tag), candidate=fence("candidate", candidate, tag)
    )
    return [{"role": "system", "content": prompts.text("judge_system")}, {"role": "user", "content": prompt}]


def _last_line(reply: str) -> str:
    lines = [line for line in (reply or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_rating(reply: str) -> int | None:
    """The rating on the reply's last non-empty line, which must be ``Rating: X`` with X from 1 to 5, or None.

    Nothing else in the reply is read: a judge that quotes the candidate (which may say
    ``Rating: 5``) after its verdict, or puts its verdict mid-sentence, is unscored, not guessed at.
    """
    match = _RATING_LINE.fullmatch(_last_line(reply))
    return int(match.group(1)) if match else None


_REFERENCE_RATING = re.compile(r"rating:\s*([1-5])")


def parse_rating_anywhere(reply: str) -> int | None:
    """The reference's reading: the reply cut at ``[STOP]``, lower-cased, and its first ``rating: X`` (X 1 to 5)."""
    match = _REFERENCE_RATING.search(cut_at_stop(reply).lower())
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class JudgeResult:
    """One judgement.

    Attributes:
        status: ``scored`` (``rating`` holds 1 to 5), ``unscored`` (the reply had no readable
            rating; ``reason`` says why) or ``error`` (the model could not be asked; ``reason``).
        rating: The rating when scored.
        reason: Why there is no rating.
        reply: The judge's full reply (may quote the gold description: never show it to an agent).
        model: The judge model.
        usage: Tokens the judgement spent.
        cost_usd: What it cost.
        cached: True when the reply came from the response cache.
    """

    status: ScoreStatus
    rating: int | None = None
    reason: str | None = None
    reply: str = ""
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cached: bool = False


async def judge_description(
    llm: LLMClient,
    model: str,
    gold: str,
    candidate: str,
    *,
    temperature: float | None = 0.0,
    protocol: Protocol | None = None,
) -> JudgeResult:
    """Ask the judge to rate ``candidate`` against ``gold``.

    Requests the provider refused (a 400, retries used up) come back as an
    ``error`` result; fatal ones (bad key, unknown model, unreachable server) raise.

    Args:
        llm: The client.
        model: ``provider/model`` of the judge.
        gold: The gold description.
        candidate: The description to rate.
        temperature: Sampling temperature (None: the provider's default).
        protocol: Whose prompt and reading rule (default: this project's).

    Raises:
        LLMError: when ``error.fatal``: every other judgement would fail the same way.
    """
    reference = protocol is not None and protocol.reference
    max_tokens = protocol.rules.judge_max_tokens if protocol is not None else None
    try:
        completion = await llm.complete(
            model, judge_messages(gold, candidate, protocol), temperature=temperature, max_tokens=max_tokens,
            thinking_room=protocol is None or protocol.rules.thinking_room,
        )  # fmt: skip
    except LLMError as exc:
        if exc.fatal:
            raise
        return JudgeResult(status="error", reason=str(exc), model=model)
    return _result(model, completion, reference, protocol.read(completion) if protocol is not None else None)


def _result(model: str, completion: Completion, reference: bool = False, text: str | None = None) -> JudgeResult:
    """The judgement a reply gives; ``text`` is the reply as the protocol reads it (default: its answer alone)."""
    text = completion.text if text is None else text
    rating = parse_rating_anywhere(text) if reference else parse_rating(text)
    common: dict[str, Any] = {
        "reply": text,
        "model": model,
        "usage": completion.spent,
        "cost_usd": completion.cost_usd,
        "cached": completion.cached,
    }
    if rating is not None:
        return JudgeResult(status="scored", rating=rating, **common)
    if reference and text.strip():
        return JudgeResult(status="unscored", reason="the judge's reply has no 'rating: X' before any [STOP]", **common)
    if not text.strip():
        reason = "the judge's reply was empty" + (
            f" (finish reason: {completion.finish_reason})" if completion.finish_reason else ""
        )
    elif _RATING_ANYWHERE.search(text):
        reason = (
            "the judge's reply has a 'Rating: X' line, but not as its last line (a rating on any other line is not read: "
            "it could quote the candidate)"
        )
    elif re.search(r"rating", text, re.IGNORECASE):
        reason = "the judge's reply mentions a rating but none of the form 'Rating: X' with X from 1 to 5"
    else:
        reason = "the judge's reply has no 'Rating: X' line"
    return JudgeResult(status="unscored", reason=reason, **common)


@dataclass(frozen=True)
class RatingSummary:
    """Judge ratings over many submissions.

    Attributes:
        scored: Judgements with a rating.
        unscored: Replies without a readable rating.
        errors: Judgements that could not be made.
        mean_scored: Mean rating over the scored ones only (None if there are none).
        mean: Mean with unscored replies counted as ``unscored_as`` (left out when that is None).
        unscored_as: The rating an unscored reply counts as, or None to leave them out.
    """

    scored: int
    unscored: int
    errors: int
    mean_scored: float | None
    mean: float | None
    unscored_as: int | None

    def note(self) -> str:
        """One line saying how unscored replies were counted (reports must print it)."""
        if not self.unscored:
            return "no unscored judge replies"
        if self.unscored_as is None:
            return f"{self.unscored} unscored judge repl{'ies' if self.unscored != 1 else 'y'} left out of the mean"
        return (
            f"{self.unscored} unscored judge repl{'ies' if self.unscored != 1 else 'y'} counted as {self.unscored_as}, "
            "as the reference implementation does"
        )


def summarise_ratings(
    results: Iterable[JudgeResult | tuple[str, float | None]], unscored_as: int | None = 1
) -> RatingSummary:
    """Count and average judgements.

    Args:
        results: ``JudgeResult``s, or ``(status, rating)`` pairs as stored in the run store.
        unscored_as: What an unscored reply counts as in ``mean`` (1 for parity with the
            reference implementation); None leaves unscored replies out.
    """
    ratings: list[float] = []
    unscored = errors = 0
    for item in results:
        status, rating = (item.status, item.rating) if isinstance(item, JudgeResult) else item
        if status == "scored" and rating is not None:
            ratings.append(float(rating))
        elif status == "unscored":
            unscored += 1
        else:
            errors += 1
    mean_scored = sum(ratings) / len(ratings) if ratings else None
    counted = ratings + ([float(unscored_as)] * unscored if unscored_as is not None else [])
    mean = sum(counted) / len(counted) if counted else None
    return RatingSummary(len(ratings), unscored, errors, mean_scored, mean, unscored_as)
