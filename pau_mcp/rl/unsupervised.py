"""The reference's UNSUPERVISED reward mode: the hypothesis is rewarded by code, not by a rating.

In the reference RL environment's unsupervised mode, no model rates the
explorer's hypothesis. Instead a model writes the function from the **gold
description** and the examples the explorer has gathered so far (the initial
examples and its own calls), and the share of the hidden tests that code
passes stands where the hypothesis rating stood: scaled by ``H``, with the same
termination term. The hypothesis text itself plays no part; the reward pays
for exploration that makes the gold description implementable. Reasoning steps
are rated as in the asymmetric mode, by a critic that knows the answer.

Here the code is written by this project's code writer (``scoring.codematch.write_code``,
with its prompt) and matched by this project's equality rule; the reference used
a prompt of its own and compared JSON values (an error matching an error).
docs/training.md lists the differences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from wasm_runtime import SandboxInterface

from ..llm import LLMClient, LLMError
from ..manifests import Method
from ..scoring.codematch import write_code
from .critic import CriticView, LLMCritic, Rating, RatingStatus

__all__ = ["UnsupervisedCritic"]


class UnsupervisedCritic:
    """Reasoning rated by an asymmetric critic; a hypothesis rewarded by code written from the gold description.

    Args:
        llm: The client (for both models).
        model: ``provider/model`` of the critic that rates reasoning.
        coder_model: ``provider/model`` that writes the code.
        sandbox: Where that code runs: a callable returning this process's sandbox.
        temperature: Sampling temperature of both models (None: the provider's default).
        max_tokens: Longest reasoning rating.
    """

    mode = "unsupervised"

    def __init__(
        self,
        llm: LLMClient,
        model: str,
        coder_model: str,
        sandbox: Callable[[], SandboxInterface],
        *,
        temperature: float | None = 0.0,
        max_tokens: int | None = 300,
    ) -> None:
        self.model = model
        self.coder_model = coder_model
        self._sandbox = sandbox
        self._rater = LLMCritic(
            llm, model, "asymmetric", coder_model=coder_model, sandbox=sandbox, temperature=temperature,
            max_tokens=max_tokens,
        )  # fmt: skip

    @property
    def llm(self) -> LLMClient:
        """This process's client."""
        return self._rater.llm

    async def rate_reasoning(self, view: CriticView, reasoning: str) -> Rating:
        """As the asymmetric critic rates it (the reference's unsupervised mode keeps its reasoning judge)."""
        return await self._rater.rate_reasoning(view, reasoning)

    async def rate_hypothesis(self, view: CriticView, hypothesis: str) -> Rating:
        """The share of hidden tests passed by code written from the gold description and ``view.observed``.

        The hypothesis is not read. No code in the reply, or no model reply, is ``unscored`` / ``error``.
        """
        gold = view.gold
        if gold is None or gold.method is None:
            return Rating(status="error", reason="the unsupervised critic needs the method (the environment's gold)")
        try:
            written = await write_code(
                self.llm, self.coder_model, self._sandbox(), gold.method, gold.description,
                examples=list(view.observed), temperature=self._rater.temperature,
            )  # fmt: skip
        except LLMError as exc:
            if exc.fatal:
                raise
            return Rating(status="error", reason=str(exc))
        status: RatingStatus
        share: float | None
        if written.status != "scored" or written.fraction is None:
            status, share = "error", None
        elif written.code is None:  # the reply held no code: nothing to score, as the reference's None
            status, share = "unscored", None
        else:
            status, share = "scored", written.fraction
        return Rating(
            status=status, score=None if share is None else round(share * 9), share=share,
            reason=None if status == "scored" else written.reason, reply=written.reply or "", usage=written.usage,
            cost_usd=written.cost_usd, cached=written.cached,
        )  # fmt: skip

    async def rate_evidence(self, view: CriticView) -> Rating:
        """What ``rate_hypothesis`` gives: it never reads the hypothesis, so it already judges the evidence (whether
        the examples gathered so far make the gold description implementable)."""
        return await self.rate_hypothesis(view, "")

    async def code_match(self, method: Method, hypothesis: str, examples: Sequence[tuple[str, str]]) -> float | None:
        """The terminal code-match reward, from the hypothesis (as the asymmetric critic's)."""
        return await self._rater.code_match(method, hypothesis, examples)

    async def aclose(self) -> None:
        """Close this process's client."""
        await self._rater.aclose()
