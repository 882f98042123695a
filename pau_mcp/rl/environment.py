"""The exploration environment: one episode per hidden method, in the paper's cycle, with per-step rewards.

Each step takes one reply of the policy and answers with the next prompt:

1. **reason**: the policy says which input it will try next and why; the critic rates the reasoning.
2. **propose**: the policy gives the input (``INPUT: (...)``); it runs in the sandbox under the same rules as
   the MCP server's tools (``pau_mcp.rules``: a literal of the method's arity; each call that runs counts
   against the budget; refused inputs do not).
3. **reflect**: the policy sees the result and says ``CONCLUDED: YES`` or ``NO`` with its hypothesis; the
   critic rates the hypothesis. ``YES`` ends the episode; so do a spent budget (after its last reflection)
   and the turn limit.

The plain API is ``reset()`` and ``step(reply)``; ``astep`` is the same step for async code. Steps of many
environments may run at once from many threads; an environment itself is stepped by one caller at a time.
Calls run in the process's sandbox (``Runtime``), made again in a forked child, so an environment works in a
process that forks from threads. The policy sees the method's header and initial examples and its own
calls, nothing else: the source and gold description go only to an asymmetric critic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from wasm_runtime import InvalidInput, Outcome, Status

from ..contract import QueryBudget
from ..llm import Usage
from ..manifests import Method, call_text
from ..rules import call_arguments
from . import prompts
from .actions import parse_input, parse_reflection, visible_text
from .critic import Critic, CriticView, Gold, Rating
from .rewards import RewardConfig, termination_term
from .runtime import Runtime, default_runtime

__all__ = ["PHASES", "EnvConfig", "EpisodeError", "ExplorationEnv", "StepResult"]

#: The steps of one cycle, in order.
PHASES = ("reason", "propose", "reflect")


class EpisodeError(RuntimeError):
    """The environment was stepped when it could not be (before ``reset`` or after the episode ended)."""


@dataclass(frozen=True)
class EnvConfig:
    """How episodes run.

    Attributes:
        max_turns: Steps per episode (each of reason, propose and reflect is one); ``T_max`` of the reward schedule.
        budget: Counted calls per episode, as the server's ``--budget`` (0: no limit).
        window: How many of the latest experiments the prompts show.
        shown_chars: Longest result text shown to the policy per call.
        rewards: The reward schedule.
    """

    max_turns: int = 40
    budget: int = 20
    window: int = 5
    shown_chars: int = 300
    rewards: RewardConfig = field(default_factory=RewardConfig)

    def __post_init__(self) -> None:
        if self.max_turns < 3:
            raise ValueError(f"max_turns must be at least 3 (one reason, propose, reflect cycle), got {self.max_turns}")
        if self.budget < 0 or self.window < 0 or self.shown_chars < 20:
            raise ValueError("budget and window must not be negative, and shown_chars must be at least 20")

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready."""
        return asdict(self)


@dataclass(frozen=True)
class StepResult:
    """What one step gave back.

    Attributes:
        observation: The next prompt for the policy ("" once the episode is over).
        reward: This step's reward (the sum of ``info["components"]``).
        done: True when the episode is over.
        info: ``phase``, ``turn``, ``components`` (reward parts by name), and as applicable ``call``
            (input, status, what the policy was shown, whether it counted), ``critic`` (status and score),
            ``concluded`` and ``hypothesis``; ``unread`` when the step reached the turn limit and the schedule
            does not read such a step (``RewardConfig.read_last_turn``).
    """

    observation: str
    reward: float
    done: bool
    info: dict[str, Any]

    def messages(self) -> list[dict[str, str]]:
        """The observation as chat messages (empty once the episode is over)."""
        return [{"role": "user", "content": self.observation}] if self.observation else []


def _drive(coroutine: Any) -> Any:
    """Run a coroutine that never waits (a scripted critic's) to its end in this thread.

    Handing it to the runtime's loop thread would cost a thread switch per rating: with Python's 5 ms switch
    interval, more than the sandbox call of a step.
    """
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("a critic marked synchronous awaited something; leave `synchronous` unset for such critics")


def _shown(outcome: Outcome, limit: int) -> str:
    if outcome.status is Status.OK:
        text = f"returned {outcome.value}"
    elif outcome.status is Status.ERROR:
        text = f"raised {outcome.error_type}" + (f": {outcome.error_message}" if outcome.error_message else "")
    else:
        text = f"stopped ({outcome.status}): {outcome.error_message}"
    if outcome.stdout:
        text += f" (printed: {outcome.stdout!r})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ExplorationEnv:
    """One hidden method as an RL environment.

    Args:
        method: The method (from the manifests; its source runs in the sandbox, its gold data goes only to an
            asymmetric critic).
        critic: Rates reasoning and hypotheses.
        config: Turn limit, budget, history window, rewards.
        runtime: The process's sandbox and event loop (default: shared, in-process sandbox).

    Example:
        >>> env = ExplorationEnv(method, ScriptedCritic())
        >>> prompt = env.reset()
        >>> result = env.step("I will try zero, the boundary.")   # reason
        >>> result = env.step("INPUT: (0,)")                      # propose: runs test_func(0)
        >>> result = env.step("CONCLUDED: NO\\nHYPOTHESIS: ...")  # reflect
    """

    def __init__(
        self, method: Method, critic: Critic, config: EnvConfig | None = None, runtime: Runtime | None = None
    ) -> None:
        self.method = method
        self.critic = critic
        self.config = config or EnvConfig()
        self.runtime = runtime or default_runtime()
        self.examples = tuple(
            f"{call_text(method.entry, case.input)} -> {case.outcome.shown() if case.outcome else '(not frozen)'}"
            for case in method.examples
        )
        self._started = False
        self._reset_state()

    def _reset_state(self) -> None:
        self.phase = PHASES[0]
        self.turn = 0
        self.done = False
        self.concluded = False
        self.hypothesis = ""
        self.concludable = False  # the critic rated the evidence (or the hypothesis) good enough to conclude on
        self.plan = ""
        self.budget = QueryBudget(self.config.budget)
        self.experiments: list[str] = []
        self.observed: list[tuple[str, str]] = []  # (input literal, shown outcome) of counted calls that ran
        self.seen_inputs: set[str] = set()
        self.trajectory: list[dict[str, Any]] = []
        self.critic_usage = Usage()
        self.critic_cost_usd = 0.0
        self.total_reward = 0.0
        self._prompt = ""

    # -- the plain API --------------------------------------------------------------------------

    def reset(self) -> list[dict[str, str]]:
        """Start a new episode; returns the first messages (system and the first prompt)."""
        self._reset_state()
        self._started = True
        self._prompt = self._reason_prompt()
        return [{"role": "system", "content": prompts.SYSTEM}, {"role": "user", "content": self._prompt}]

    def step(self, action: str) -> StepResult:
        """Take one reply of the policy for the current phase; returns the next prompt, the reward and more.

        Raises:
            EpisodeError: before ``reset`` or after the episode ended.
            LLMError: the critic's model failed for good (bad key, unknown model, unreachable server).
        """
        if not self._started:
            raise EpisodeError("call reset() before step()")
        if self.done:
            raise EpisodeError("the episode is over; call reset() to start another")
        text = visible_text(action if isinstance(action, str) else str(action))
        self.turn += 1
        prompt = self._prompt
        phase = self.phase
        rewards = self.config.rewards
        if not rewards.read_last_turn and self.turn >= self.config.max_turns:
            # The reference implementation's turn limit: the step that reaches it is not read, only timed out.
            timeout = {"timeout": rewards.timeout_penalty}
            result = self._finish(self._result("", timeout, unread=True), timeout, concluded=False)
        else:
            if phase == "reason":
                result = self._reason(text)
            elif phase == "propose":
                result = self._propose(text)
            else:
                result = self._reflect(text)
            if not result.done and self.turn >= self.config.max_turns:
                components = dict(result.info["components"])
                components["timeout"] = rewards.timeout_penalty
                result = self._finish(result, components, concluded=False)
        result = StepResult(
            result.observation, result.reward, result.done, {"phase": phase, "turn": self.turn, **result.info}
        )
        self._prompt = result.observation
        self.total_reward += result.reward
        self.trajectory.append(
            {"turn": self.turn, "phase": phase, "observation": prompt, "action": action, "reward": result.reward,
             "done": result.done, **{k: v for k, v in result.info.items() if k not in ("turn", "phase")}}
        )  # fmt: skip
        return result

    async def astep(self, action: str) -> StepResult:
        """``step`` for async code: runs in a worker thread, so the caller's event loop is never blocked."""
        return await anyio.to_thread.run_sync(self.step, action)

    def summary(self) -> dict[str, Any]:
        """The episode so far: return, whether it concluded, the hypothesis, calls, turns, critic cost."""
        return {
            "method_id": self.method.id,
            "return": self.total_reward,
            "done": self.done,
            "concluded": self.concluded,
            "hypothesis": self.hypothesis,
            "queries": self.budget.used(),
            "turns": self.turn,
            "critic_input_tokens": self.critic_usage.input_tokens,
            "critic_output_tokens": self.critic_usage.output_tokens,
            "critic_cost_usd": self.critic_cost_usd,
        }

    # -- the phases -----------------------------------------------------------------------------

    def _view(self, hypothesis: str | None = None) -> CriticView:
        # The critics that know the answer: asymmetric (AAC), and unsupervised, which also runs the hidden tests.
        knows = self.critic.mode in ("asymmetric", "unsupervised")
        gold = Gold(self.method.description, self.method.source, self.method) if knows else None
        return CriticView(
            header=self.method.header, examples=self.examples, experiments=tuple(self.experiments),
            hypothesis=self.hypothesis if hypothesis is None else hypothesis, gold=gold,
            observed=(*self._initial_pairs(), *self.observed),
        )  # fmt: skip

    def _initial_pairs(self) -> list[tuple[str, str]]:
        """The initial examples as ``(input literal, shown outcome)``."""
        return [(case.input, case.outcome.shown()) for case in self.method.examples if case.outcome is not None]

    def _ask(self, rating: Any) -> Rating:
        result: Rating = _drive(rating) if getattr(self.critic, "synchronous", False) else self.runtime.run(rating)
        self.critic_usage = self.critic_usage + result.usage
        self.critic_cost_usd += result.cost_usd
        return result

    def _recent(self) -> list[str]:
        return self.experiments[-self.config.window :] if self.config.window else []

    def _reason_prompt(self) -> str:
        return prompts.reason_prompt(
            self.method.header, self.examples, self._recent(), self.hypothesis, self.budget.left
        )

    def _learned(self) -> bool:
        """True when exploring can teach nothing the schedule pays for: the evidence (or, from a critic that cannot
        judge evidence, the hypothesis) was rated good enough to conclude on."""
        return self.concludable and self.config.rewards.exploration_pays_until_concludable

    def _reason(self, text: str) -> StepResult:
        rewards = self.config.rewards
        if not text.strip():
            rating = Rating(status="empty", reason="no reasoning was given")
        elif self._learned():
            rating = Rating(status="empty", reason="the function was already rated settled enough to conclude on")
        else:
            rating = self._ask(self.critic.rate_reasoning(self._view(), text))
        components = {
            "critic": rewards.reasoning_scale * rating.fraction,
            "length": rewards.penalty(text, rewards.reasoning_tau, rewards.reasoning_alpha),
        }
        self.plan = text
        self.phase = "propose"
        observation = prompts.propose_prompt(
            self.method.header, self.examples, self._recent(), self.hypothesis, self.budget.left,
            len(self.method.params), text,
        )  # fmt: skip
        return self._result(observation, components, critic=rating.summary())

    def _propose(self, text: str) -> StepResult:
        rewards = self.config.rewards
        components: dict[str, float] = {}
        literal = parse_input(text, len(self.method.params))
        call: dict[str, Any] = {"input": literal, "counted": False}
        if literal is None:
            components["parse"] = rewards.parse_penalty
            call.update(status="unparsed", shown="no input was found: give one line `INPUT: (...)`")
        else:
            try:
                args, canonical = call_arguments(literal, self.method.header, self.method.params)
            except InvalidInput as exc:
                components["parse"] = rewards.parse_penalty
                call.update(status="invalid_input", shown=f"not run: {exc}")
            else:
                if self.budget.reserve() is None:
                    components["budget"] = 0.0
                    call.update(status="over_budget", shown="not run: the budget is spent")
                else:
                    try:
                        outcome = self.runtime.sandbox().call(
                            self.method.source, args, entry=self.method.entry, engine=self.method.engine
                        )
                    except BaseException:
                        self.budget.refund()  # the call never ran: it does not count (contract.Budget)
                        raise
                    repeated = canonical in self.seen_inputs
                    self.seen_inputs.add(canonical)
                    if outcome.status is Status.OK:
                        unpaid = repeated and rewards.repeated_input_reward is not None
                        components["execution"] = (
                            rewards.repeated_input_reward or 0.0
                            if unpaid or self._learned()
                            else rewards.clean_execution(self.config.max_turns)
                        )
                    else:
                        components["execution"] = rewards.runtime_error_penalty
                    shown = _shown(outcome, self.config.shown_chars)
                    line = f"{call_text(self.method.entry, canonical)} -> {shown}"
                    self.experiments.append(line)
                    self.observed.append((canonical, shown))
                    call.update(input=canonical, status=outcome.status.value, shown=shown, counted=True,
                                repeated=repeated)  # fmt: skip
        # The reference implementation counts the input it read (nothing when it read none), this project the reply.
        measured = text if rewards.input_length_of == "reply" else (literal or "")
        components["length"] = rewards.penalty(measured, rewards.input_tau, rewards.input_alpha)
        self.phase = "reflect"
        if call["counted"]:
            result_line = f"{call_text(self.method.entry, call['input'])} {call['shown']}"
        else:
            result_line = f"your input was {call['shown']}"
        observation = prompts.reflect_prompt(
            self.method.header, self.examples, self._recent(), self.hypothesis, self.budget.left, result_line,
            must_conclude=self.budget.spent,
        )  # fmt: skip
        return self._result(observation, components, call=call)

    def _reflect(self, text: str) -> StepResult:
        rewards = self.config.rewards
        reflection = parse_reflection(text)
        self.hypothesis = reflection.hypothesis.strip()
        done = reflection.concluded or self.budget.spent
        components: dict[str, float] = {}
        if not reflection.clean:
            components["parse"] = rewards.parse_penalty
        extra: dict[str, Any] = {"hypothesis": self.hypothesis, "decision": "yes" if reflection.concluded else "no"}
        paid = rewards.judge_every_reflection or done
        # Whether exploring has anything left to teach, asked while it may: only of a reflection that goes on.
        gating = rewards.exploration_pays_until_concludable and not self.concludable and not done
        evidence: Rating | None = None
        if gating and rewards.concludable_from == "evidence":
            evidence = self._ask(self.critic.rate_evidence(self._view()))
            extra["evidence"] = evidence.summary()
            if evidence.status == "empty":  # a critic that cannot judge evidence: the hypothesis decides
                evidence = None
        if paid or (gating and evidence is None):
            rating = self._hypothesis_rating()
            if paid:
                # A critic reply without a rating, or one that could not be asked, says nothing about whether
                # stopping was right: it pays nothing, as the reference implementation's does.
                rated = rating.status not in ("unscored", "error")
                components["hypothesis"] = (
                    rewards.hypothesis_scale * (rating.fraction + termination_term(rewards, rating.fraction, done))
                    if rated
                    else 0.0
                )
            if gating and evidence is None:
                evidence = rating
            extra["critic"] = rating.summary()
        # Once concludable, always: a worse hypothesis later does not make exploring pay again. An unscored rating
        # (fraction 0) leaves exploring paid.
        if evidence is not None:
            self.concludable = evidence.fraction > rewards.conclude_threshold
        components["length"] = rewards.penalty(text, rewards.reflection_tau, rewards.reflection_alpha)
        if done:
            return self._finish(self._result("", components, **extra), components, concluded=reflection.concluded)
        self.phase = "reason"
        return self._result(self._reason_prompt(), components, **extra)

    def _hypothesis_rating(self) -> Rating:
        if not self.hypothesis:
            return Rating(status="empty", reason="no hypothesis was given")
        return self._ask(self.critic.rate_hypothesis(self._view(self.hypothesis), self.hypothesis))

    def _finish(self, result: StepResult, components: dict[str, float], concluded: bool) -> StepResult:
        """End the episode: the terminal code-match reward, if configured, joins this step's components."""
        rewards = self.config.rewards
        self.done = True
        self.concluded = concluded
        info = dict(result.info)
        if rewards.code_match_weight and self.hypothesis:
            matching = self.critic.code_match(self.method, self.hypothesis, self._initial_pairs() + self.observed)
            fraction = _drive(matching) if getattr(self.critic, "synchronous", False) else self.runtime.run(matching)
            if fraction is not None:
                components["code_match"] = rewards.code_match_weight * fraction
                info["code_match"] = fraction
        info["concluded"] = concluded
        info["hypothesis"] = self.hypothesis
        info["components"] = components
        return StepResult(observation="", reward=sum(components.values()), done=True, info=info)

    def _result(self, observation: str, components: dict[str, float], **info: Any) -> StepResult:
        return StepResult(
            observation=observation,
            reward=sum(components.values()),
            done=False,
            info={"components": components, **info},
        )
