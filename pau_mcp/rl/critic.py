"""The critic that rewards each step: asymmetric (knows the answer) or symmetric (knows what the explorer knows).

The paper's Asymmetric Actor-Critic: a critic that reads the method's source
and gold description rates the explorer's reasoning and hypotheses from 0 to
9. Its SYM-INFO baseline gives the critic only what the explorer saw. The mode
is structural: a symmetric critic is never handed the gold data
(``CriticView.gold`` is None), so it cannot leak into its prompt.

Everything the explorer wrote, and every output the hidden function gave for
the explorer's inputs (an identity function echoes them), is fenced with a tag
the text cannot contain (``pau_mcp.scoring.fences``), and the rating is read
only from the reply's last line, ``Rating: X``. A reply without one is
*unscored* and earns nothing, never a guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from wasm_runtime import SandboxInterface

from ..contract import ScoreStatus
from ..llm import Completion, LLMClient, LLMError, Usage
from ..manifests import Method
from ..prompts import load_prompts
from ..scoring import fences
from ..scoring.codematch import write_code

__all__ = [
    "ALL_MODES",
    "MODES",
    "Critic",
    "CriticView",
    "Gold",
    "LLMCritic",
    "Rating",
    "RatingStatus",
    "ScriptedCritic",
    "parse_critic_rating",
]

#: Critic modes: ``asymmetric`` (AAC: sees the source and the gold description) and ``symmetric`` (SYM-INFO).
MODES = ("asymmetric", "symmetric")
#: Every mode ``critics.critic_for`` makes: also ``unsupervised``, the reference's UNSUPERVISED reward
#: (``pau_mcp.rl.unsupervised``).
ALL_MODES = (*MODES, "unsupervised")

Mode = Literal["asymmetric", "symmetric"]


@dataclass(frozen=True)
class Gold:
    """What only a critic that knows the answer is shown about a method.

    Attributes:
        description: The gold description.
        source: The method's source.
        method: The whole method, hidden tests included, for a critic that runs code on them (the
            unsupervised mode); never shown to the explorer.
    """

    description: str
    source: str
    method: Method | None = None


@dataclass(frozen=True)
class CriticView:
    """What a critic is shown about an episode.

    Attributes:
        header: The method's header.
        examples: The initial examples, as ``test_func(...) -> ...`` lines.
        experiments: Every call the explorer made so far, as lines (its inputs and what came back).
        hypothesis: The explorer's current hypothesis ("" before the first reflection).
        gold: The source and gold description: only for a critic that knows the answer (not a symmetric one).
        observed: ``(input literal, shown outcome)`` of the initial examples and of every call that ran, for a
            critic that writes code from them.
    """

    header: str
    examples: tuple[str, ...]
    experiments: tuple[str, ...]
    hypothesis: str
    gold: Gold | None = None
    observed: tuple[tuple[str, str], ...] = ()


#: How a rating ended: a score's statuses, or ``empty`` (nothing to rate).
RatingStatus = ScoreStatus | Literal["empty"]


@dataclass(frozen=True)
class Rating:
    """One rating by the critic.

    Attributes:
        status: ``scored`` (``score`` holds 0 to 9), ``unscored`` (the reply had no readable rating),
            ``empty`` (nothing to rate: no rating was asked for) or ``error`` (the model could not be asked).
        score: 0 to 9 when scored.
        share: The rating as a fraction from 0 to 1 when it is not a count of ninths (the unsupervised mode's
            code match); ``score`` is then its nearest ninth.
        reason: Why there is no score.
        reply: The critic's full reply (an asymmetric critic's may quote the gold data: never show it to the explorer).
        usage: Tokens spent (none when cached).
        cost_usd: What it cost.
        cached: True when the reply came from the response cache.
    """

    status: RatingStatus
    score: int | None = None
    share: float | None = None
    reason: str | None = None
    reply: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cached: bool = False

    @property
    def fraction(self) -> float:
        """The rating from 0 to 1: ``share`` when given, else the score divided by 9; 0 without a score."""
        if self.share is not None:
            return self.share
        return self.score / 9 if self.score is not None else 0.0

    def summary(self) -> dict[str, Any]:
        """For the trajectory: status, score and cost, never the reply (it may quote gold data)."""
        data: dict[str, Any] = {"status": self.status, "score": self.score}
        if self.share is not None:
            data["share"] = self.share
        if self.reason:
            data["reason"] = self.reason
        if self.usage.total or self.cost_usd:
            data["input_tokens"] = self.usage.input_tokens
            data["output_tokens"] = self.usage.output_tokens
            data["cost_usd"] = self.cost_usd
        if self.cached:
            data["cached"] = True
        return data


class Critic(Protocol):
    """Rates an explorer's steps."""

    mode: str

    async def rate_reasoning(self, view: CriticView, reasoning: str) -> Rating:
        """How useful ``reasoning`` (about the next input) is for finding out what the method does."""
        ...

    async def rate_hypothesis(self, view: CriticView, hypothesis: str) -> Rating:
        """How well ``hypothesis`` describes the method."""
        ...

    async def rate_evidence(self, view: CriticView) -> Rating:
        """How completely the examples and experiments of ``view`` already determine the method, whatever the
        explorer believes (its hypothesis is not read); ``empty`` from a critic that cannot know (a symmetric one)."""
        ...

    async def code_match(self, method: Method, hypothesis: str, examples: Sequence[tuple[str, str]]) -> float | None:
        """The fraction of the method's hidden tests that code written from ``hypothesis`` passes; None if unavailable."""
        ...


# -- the scripted critic ------------------------------------------------------------------------


@dataclass
class ScriptedCritic:
    """A critic without a model, for tests and benchmarks: functions decide the scores.

    Args:
        reasoning: ``(view, reasoning) -> score`` from 0 to 9 (or None for an unscored reply).
        hypothesis: ``(view, hypothesis) -> score`` from 0 to 9 (or None).
        matcher: ``(method, hypothesis) -> fraction`` for the terminal code-match reward (None: unavailable).
        mode: ``asymmetric`` (the environment hands it the gold data) or ``symmetric``.
        evidence: ``view -> score`` from 0 to 9 (or None) for how completely the evidence gathered so far
            determines the method; without it (the default) the critic does not judge evidence (``empty``), as a
            symmetric critic cannot, and the environment falls back to the stated hypothesis.

    Its ratings never wait on anything (``synchronous``), so the environment computes them in the stepping
    thread instead of on the runtime's event loop.
    """

    synchronous = True

    reasoning: Callable[[CriticView, str], int | None] = lambda view, text: 5
    hypothesis: Callable[[CriticView, str], int | None] = lambda view, text: 5
    matcher: Callable[[Method, str], float] | None = None
    mode: str = "asymmetric"
    evidence: Callable[[CriticView], int | None] | None = None
    calls: int = 0

    async def rate_reasoning(self, view: CriticView, reasoning: str) -> Rating:
        self.calls += 1
        return _scripted(self.reasoning(view, reasoning))

    async def rate_hypothesis(self, view: CriticView, hypothesis: str) -> Rating:
        self.calls += 1
        return _scripted(self.hypothesis(view, hypothesis))

    async def rate_evidence(self, view: CriticView) -> Rating:
        if self.evidence is None or view.gold is None:
            return Rating(status="empty", reason=_NO_EVIDENCE_RULE)
        self.calls += 1
        return _scripted(self.evidence(view))

    async def code_match(self, method: Method, hypothesis: str, examples: Sequence[tuple[str, str]]) -> float | None:
        return None if self.matcher is None else self.matcher(method, hypothesis)


#: Why a critic gave no rating of the evidence (the environment then judges by the stated hypothesis).
_NO_EVIDENCE_RULE = "this critic does not judge what the evidence settles (it is not told the answer)"


def _scripted(score: int | None) -> Rating:
    if score is None:
        return Rating(status="unscored", reason="the scripted critic gave no score")
    return Rating(status="scored", score=max(0, min(9, int(score))))


# -- the LLM critic -----------------------------------------------------------------------------

_PROMPTS = load_prompts()
_SYSTEM = _PROMPTS.text("critic_system")
_REASONING_TASK = _PROMPTS.text("critic_reasoning")
_HYPOTHESIS_TASK_ASYMMETRIC = _PROMPTS.text("critic_hypothesis_asymmetric")
_HYPOTHESIS_TASK_SYMMETRIC = _PROMPTS.text("critic_hypothesis_symmetric")
_EVIDENCE_TASK = _PROMPTS.text("critic_evidence")
_ENDING = _PROMPTS.text("critic_ending")

# Possessive repeats, as the judge's (``scoring.judge``): a long run of blanks is read once.
_RATING_LINE = re.compile(
    r"[*_\s]*+(?:final\s++)?rating[*_\s]*+[:=][*_\s]*+\[?\s*+([0-9])\s*+\]?(?:\s*+/\s*+9)?[*_\s]*+\.?[*_\s]*+",
    re.IGNORECASE,
)


def parse_critic_rating(reply: str) -> int | None:
    """The rating on the reply's last non-empty line (``Rating: X``, X from 0 to 9), or None.

    Nothing else is read: a critic that quotes the explorer's text (which may say ``Rating: 9``) before its own
    verdict is read by its verdict, and one that ends on anything else is unscored.
    """
    lines = [line for line in (reply or "").splitlines() if line.strip()]
    match = _RATING_LINE.fullmatch(lines[-1]) if lines else None
    return int(match.group(1)) if match else None


def _fresh_client(client: LLMClient) -> LLMClient:
    """A client configured as ``client``, for a forked child (the parent's cache connection must not cross a fork)."""
    return LLMClient(
        env=client.env, cache_path=client.cache_path, pricing=client.pricing, capabilities=client.capabilities,
        concurrency=client.concurrency,
        timeout_s=client.timeout_s, retries=client.retries, backoff_s=client.backoff_s,
        max_backoff_s=client.max_backoff_s,
    )  # fmt: skip


class LLMCritic:
    """A critic served by any model of the LLM layer (cached, cost-accounted).

    Args:
        llm: The client (a forked child makes its own with the same settings).
        model: ``provider/model`` of the critic.
        mode: ``asymmetric`` (AAC) or ``symmetric`` (SYM-INFO).
        coder_model: ``provider/model`` that writes code from the final hypothesis, for the terminal
            code-match reward; None turns that reward off.
        sandbox: Where that code runs (needed with ``coder_model``): a callable returning this process's sandbox.
        temperature: Sampling temperature (None: the provider's default).
        max_tokens: Longest critic reply.

    Raises:
        ValueError: an unknown mode, or a coder model without a sandbox.
    """

    def __init__(
        self,
        llm: LLMClient,
        model: str,
        mode: str = "asymmetric",
        *,
        coder_model: str | None = None,
        sandbox: Callable[[], SandboxInterface] | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = 300,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown critic mode {mode!r}; choose {' or '.join(MODES)}")
        if coder_model and sandbox is None:
            raise ValueError("a critic with a coder model needs a sandbox to run the code in")
        self.model = model
        self.mode = mode
        self.coder_model = coder_model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._sandbox = sandbox
        self._llm = llm
        self._pid = os.getpid()

    @property
    def llm(self) -> LLMClient:
        """This process's client."""
        if self._pid != os.getpid():
            self._llm, self._pid = _fresh_client(self._llm), os.getpid()
        return self._llm

    def reasoning_messages(self, view: CriticView, reasoning: str) -> list[dict[str, str]]:
        """The critic's messages for rating a reasoning step (all untrusted text fenced)."""
        return self._messages("critic-reasoning", view, [("reasoning", reasoning)], _REASONING_TASK)

    def hypothesis_messages(self, view: CriticView, hypothesis: str) -> list[dict[str, str]]:
        """The critic's messages for rating a hypothesis (all untrusted text fenced)."""
        task = _HYPOTHESIS_TASK_ASYMMETRIC if view.gold is not None else _HYPOTHESIS_TASK_SYMMETRIC
        return self._messages("critic-hypothesis", view, [], task, rated=hypothesis)

    def evidence_messages(self, view: CriticView) -> list[dict[str, str]]:
        """The critic's messages for rating what the evidence settles: the gold data and the experiments, and
        neither the explorer's hypothesis nor its reasoning, so that nothing the explorer claims can sway it."""
        return self._messages("critic-evidence", view, [], _EVIDENCE_TASK, claims=False)

    def _messages(
        self, purpose: str, view: CriticView, extra: list[tuple[str, str]], task: str, rated: str | None = None,
        claims: bool = True,
    ) -> list[dict[str, str]]:  # fmt: skip
        experiments = "\n".join(view.experiments) or "(none yet)"
        hypothesis = rated if rated is not None else (view.hypothesis or "(none yet)")
        untrusted = [("experiments", experiments), *([("hypothesis", hypothesis)] if claims else []), *extra]
        trusted = (
            [] if view.gold is None else [("true-description", view.gold.description), ("source", view.gold.source)]
        )
        tag = fences.fence_tag(purpose, *(text for _, text in trusted + untrusted))
        examples = "\n".join(f"  {line}" for line in view.examples) or "  (none)"
        parts = [
            f"The hidden function is `{view.header}`. Its known examples:\n{examples}",
            _PROMPTS.render("critic_fences", tag=tag),
        ]
        if view.gold is not None:
            parts.append(
                "You know the answer, which the explorer does not. The function's true behaviour:\n"
                + fences.fence("true-description", view.gold.description, tag)
                + "\nIts source:\n"
                + fences.fence("source", view.gold.source, tag)
            )
        parts.append(
            "The explorer's experiments so far (its inputs and what came back):\n"
            + fences.fence("experiments", experiments, tag)
        )
        if claims:
            label = "The hypothesis to rate" if rated is not None else "The explorer's current hypothesis"
            parts.append(f"{label}:\n" + fences.fence("hypothesis", hypothesis, tag))
        for name, text in extra:
            parts.append(f"The explorer's {name}:\n" + fences.fence(name, text, tag))
        parts += [task, _ENDING]
        return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]

    async def rate_reasoning(self, view: CriticView, reasoning: str) -> Rating:
        return await self._rate(self.reasoning_messages(view, reasoning))

    async def rate_hypothesis(self, view: CriticView, hypothesis: str) -> Rating:
        return await self._rate(self.hypothesis_messages(view, hypothesis))

    async def rate_evidence(self, view: CriticView) -> Rating:
        if view.gold is None:  # a symmetric critic: what the evidence leaves open is what it cannot know
            return Rating(status="empty", reason=_NO_EVIDENCE_RULE)
        return await self._rate(self.evidence_messages(view))

    async def _rate(self, messages: list[dict[str, str]]) -> Rating:
        try:
            completion = await self.llm.complete(
                self.model, messages, temperature=self.temperature, max_tokens=self.max_tokens
            )
        except LLMError as exc:
            if exc.fatal:
                raise
            return Rating(status="error", reason=str(exc))
        return _rating(completion)

    async def aclose(self) -> None:
        """Close this process's client (on the loop that used it: ``runtime.run(critic.aclose())``)."""
        await self.llm.aclose()

    async def code_match(self, method: Method, hypothesis: str, examples: Sequence[tuple[str, str]]) -> float | None:
        if not self.coder_model or self._sandbox is None:
            return None
        result = await write_code(
            self.llm, self.coder_model, self._sandbox(), method, hypothesis, examples=examples,
            temperature=self.temperature,
        )  # fmt: skip
        return result.fraction if result.status == "scored" else None


def _rating(completion: Completion) -> Rating:
    score = parse_critic_rating(completion.text)
    common: dict[str, Any] = {
        "reply": completion.text,
        "usage": completion.spent,
        "cost_usd": completion.cost_usd,
        "cached": completion.cached,
    }
    if score is not None:
        return Rating(status="scored", score=score, **common)
    reason = "the critic's reply does not end with a 'Rating: X' line (X from 0 to 9)"
    return Rating(status="unscored", reason=reason, **common)
