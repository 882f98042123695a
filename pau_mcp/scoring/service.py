"""The scorer, in process: every score of one submission, for the server, the harness and the endpoint.

``Scorer.score`` takes a method id and a description and/or code and returns
a ``ScoreResult``: the judge's rating (or why there is none), the code
writer's match fraction, the direct-code match fraction with an optional
counterexample, the generated code, tokens and cost. ``ScoreResult.feedback``
is the part an agent may see. ``feedback_for`` wraps a scorer for the MCP
server's ``submit`` tool (``pau-mcp serve --feedback score``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from wasm_runtime import Limits, SandboxInterface

from ..config import Settings
from ..contract import Feedback as ShownFeedback
from ..descriptions import description_problem, is_description
from ..fairness import FairShare
from ..knowledge import COMPONENTS
from ..llm import LLMClient, LLMError, LLMNotConfigured, Usage
from ..manifests import ManifestError, ManifestStore, Method, Task, call_arguments, call_text
from ..protocol import Protocol, load_protocol
from ..runstore import RunStore
from ..sandboxing import SandboxMaker, make_sandbox, sandbox_limits, shared_sandbox
from ..tracing import scoring_span
from .codematch import CodeMatch, Counterexample, extract_code, failing_tests, match_code, write_code
from .cpu import off_loop
from .judge import JudgeResult, judge_description
from .metering import DEFAULT_SECONDS, MeteredSandbox
from .records import record_scores
from .tasks import TaskCall, TaskCheck, check_answer

__all__ = ["KINDS", "NothingToScore", "ScoreResult", "Scorer", "UnknownMethod", "feedback_for", "initial_examples"]

log = logging.getLogger("pau_mcp.scoring")

#: The scores a submission can get: the judge's rating, the code writer's match, the submitted code's match.
KINDS = ("judge", "codematch", "direct")


def initial_examples(method: Method) -> list[tuple[str, str]]:
    """A method's initial examples as an episode observes them: ``(argument literal, shown outcome)`` pairs."""
    return [
        (call_arguments(call_text(method.entry, case.input)) or case.input, case.outcome.shown())
        for case in method.examples
        if case.outcome is not None
    ]


class UnknownMethod(LookupError):
    """No method has this id; the message says how to list them."""


class NothingToScore(ValueError):
    """A submission with neither a description nor code (or a score asked for that needs what is missing)."""


@dataclass(frozen=True)
class ScoreResult:
    """Every score of one submission.

    Attributes:
        method_id: The method scored against.
        judge: The judge's rating, when asked for.
        codematch: The code writer's code and its match, when asked for.
        direct: The submitted code's match (with an optional counterexample), when asked for.
        gold: True when the code writer got the gold description (the method's upper bound).
        usage: Tokens spent on this submission (cached replies spend none).
        cost_usd: Dollars spent on it.
        unpriced: Models used that have no price (their cost counts as 0).
        protocol: The protocol the scores followed (``pau-mcp`` or ``reference``).
        knowledge: The components the code writer was handed (``pau_mcp.knowledge``); None: all it is given.
    """

    method_id: str
    judge: JudgeResult | None = None
    codematch: CodeMatch | None = None
    direct: CodeMatch | None = None
    gold: bool = False
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    unpriced: tuple[str, ...] = ()
    protocol: str = "pau-mcp"
    knowledge: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (for evaluators: the judge's reply may quote the gold description)."""
        return asdict(self)

    def feedback(self) -> dict[str, Any]:
        """What an agent may see, in the contract's shape (``pau_mcp.contract.Feedback``): scores, fixed words about
        its own code, at most one counterexample.

        Keys, whichever apply: ``judge_rating`` (1 to 5, or ``unscored``/``error``), ``code_match``
        and ``direct_code_match`` (fractions, or ``error``), ``direct_code_note`` (counts and fixed
        words, or the code's own syntax error), ``direct_code_failures`` (``{FAILURE_KINDS value:
        count}``) and ``counterexample`` (``{"input", "expected"}``, only when one was asked for).
        Never the gold description, the source, another test input, or any text the submitted code
        produced (its values, exception names and messages, printed text).
        """
        judge = self.judge
        rating: int | str | None = None
        if judge is not None:
            rating = judge.rating if judge.status == "scored" else judge.status
        code_match: float | str | None = None
        if self.codematch is not None:
            fraction = self.codematch.fraction
            code_match = round(fraction, 3) if self.codematch.status == "scored" and fraction is not None else "error"
        direct = self.direct
        shown = ShownFeedback.model_validate({
            "judge_rating": rating,
            "code_match": code_match,
            **(_direct_feedback(direct) if direct is not None else {}),
        })  # fmt: skip
        return shown.shown(counterexample=True)


def _direct_feedback(direct: CodeMatch) -> dict[str, Any]:
    """The submitted code's part of the feedback."""
    out: dict[str, Any] = {}
    if direct.status == "scored" and direct.fraction is not None:
        out["direct_code_match"] = round(direct.fraction, 3)
        out["direct_code_note"] = direct.reason or None
        out["direct_code_failures"] = dict(direct.failures) if direct.failures else None
    else:
        out["direct_code_match"] = "error"
    if direct.counterexample is not None:
        out["counterexample"] = {"input": direct.counterexample.input, "expected": direct.counterexample.expected}
    return out


def _first_llm_error(group: BaseExceptionGroup) -> LLMError | None:
    for exc in group.exceptions:
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            inner = _first_llm_error(exc)
            if inner is not None:
                return inner
    return None


def _missing(setting: str, what: str) -> LLMNotConfigured:
    return LLMNotConfigured(f"no {what} is configured: set {Settings.named(setting)} (e.g. openai/gpt-4o-mini)")


_FROM_PROTOCOL: Any = object()


class Scorer:
    """Scores submissions for methods of the manifest store.

    Args:
        manifests: Where methods are looked up by id.
        sandbox: Where code runs.
        llm: The client for the judge and the code writer (needed only for those scores).
        judge_model: ``provider/model`` of the judge.
        coder_model: ``provider/model`` of the code writer.
        limits: Per-input sandbox limits for scored code (default: the sandbox's).
        temperature: Sampling temperature of both models (None: the provider's default; default: the
            protocol's, 0 for this project's).
        protocol: Whose prompts and rules (default: this project's).
        seconds: Most time one piece of scored code (submitted, or written by the code writer) spends in the sandbox
            over a method's tests (``--score-seconds``; None: no total; ``metering``).
        shares: The fair share of the sandbox's workers across whose submissions are scored (None: no turns).
    """

    def __init__(
        self,
        manifests: ManifestStore,
        sandbox: SandboxInterface,
        llm: LLMClient | None = None,
        *,
        judge_model: str | None = None,
        coder_model: str | None = None,
        limits: Limits | None = None,
        temperature: float | None = _FROM_PROTOCOL,
        protocol: Protocol | None = None,
        seconds: float | None = DEFAULT_SECONDS,
        shares: FairShare | None = None,
    ) -> None:
        self.manifests = manifests
        self.sandbox = sandbox
        self.llm = llm
        self.judge_model = judge_model
        self.coder_model = coder_model
        self.limits = limits
        self.protocol = protocol if protocol is not None else load_protocol()
        self.temperature = self.protocol.rules.temperature if temperature is _FROM_PROTOCOL else temperature
        self.seconds = seconds
        self.shares = shares
        self._suites: set[str] = set()

    def metered(self, party: Hashable | None = None) -> MeteredSandbox:
        """The sandbox as one piece of scored code gets it: turns for ``party`` (a credential; by default a party of
        its own) and ``seconds`` in all."""
        return MeteredSandbox(self.sandbox, self.seconds, self.shares, party)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        use_cache: bool = True,
        sandbox: SandboxInterface | None = None,
        progress: Any = None,
        protocol: Protocol | None = None,
        shares: FairShare | None = None,
    ) -> Scorer:
        """A scorer as the settings describe it (models, price table, cache, sandbox limits, manifests, protocol).

        Raises:
            pau_mcp.prompts.PromptsMissing: the settings ask for the reference protocol, whose prompts were never
                imported (the message gives the command).
        """
        return cls(
            ManifestStore(settings.manifests),
            sandbox if sandbox is not None else make_sandbox(settings, progress=progress),
            LLMClient.from_settings(settings, use_cache=use_cache),
            judge_model=settings.judge_model,
            coder_model=settings.coder_model,
            limits=sandbox_limits(settings),
            protocol=protocol if protocol is not None else load_protocol(settings.protocol, settings.data_dir),
            seconds=settings.score_seconds or None,
            shares=shares,
        )

    def method(self, method_id: str) -> Method:
        """A method by id.

        Raises:
            UnknownMethod: no such suite or method.
            ManifestError: the suite's files are broken.
        """
        suite = method_id.split("/", 1)[0]
        if suite not in self._suites:
            self._suites = set(self.manifests.names())  # listed again only for a name not seen: a suite added since
        if "/" not in method_id or suite not in self._suites:
            raise UnknownMethod(f"no method {method_id!r}: ids look like builtin/b001; see `pau-mcp methods --json`")
        try:
            return self.manifests.method(method_id)
        except ManifestError as exc:
            if "has no method" in str(exc):
                raise UnknownMethod(
                    f"no method {method_id!r} in suite {suite!r}; see `pau-mcp methods --suite {suite}`"
                ) from None
            raise

    def kinds_for(
        self, description: str | None, code: str | None, requested: Collection[str] | None = None, gold: bool = False,
        knowledge: Collection[str] | None = None,
    ) -> tuple[str, ...]:  # fmt: skip
        """The scores to compute: those requested that the submission allows, or every one it allows.

        The judge needs a description (prose: not a placeholder, a tool call or JSON); code match a description (or
        ``gold``), unless ``knowledge`` leaves the description out; direct code needs code.
        A requested score the submission cannot have is left out. Under the reference protocol a missing
        description is scored as the text ``None``, as the reference does.

        Raises:
            NothingToScore: an unknown kind, or no score applies (the message says what is missing).
        """
        # The reference scores a missing description as the text "None"; this project has nothing to score, and
        # never hands the judge or the code writer a placeholder, a tool call or JSON (pau_mcp.descriptions).
        has_text = is_description(description) or self.protocol.reference
        has_code = bool(code and code.strip())
        needs = {"judge": "a description", "codematch": "a description", "direct": "code"}
        described = knowledge is None or "description" in knowledge
        possible = {"judge": has_text, "codematch": has_text or gold or not described, "direct": has_code}
        if requested:
            unknown = sorted(set(requested) - set(KINDS))
            if unknown:
                raise NothingToScore(f"unknown score kind {', '.join(unknown)}; choose from {', '.join(KINDS)}")
            kinds = tuple(kind for kind in KINDS if kind in requested and possible[kind])
            if not kinds:
                wanted = [kind for kind in KINDS if kind in requested]
                raise NothingToScore("nothing to score: " + "; ".join(f"{kind} needs {needs[kind]}" for kind in wanted))
            return kinds
        if gold:
            kinds = ("codematch",) + (("direct",) if has_code else ())
        else:
            kinds = tuple(kind for kind in KINDS if possible[kind])
        if not kinds:
            problem = description_problem(description) or "it is empty"
            raise NothingToScore(f"nothing to score: the submission has no code, and no description ({problem})")
        return kinds

    def check(self, kinds: Collection[str]) -> None:
        """Fail early when a score needs a model that is not configured.

        Raises:
            LLMNotConfigured: naming the flag and the variable to set.
        """
        if "judge" in kinds:
            if not self.judge_model:
                raise _missing("judge_model", "judge model")
            self._client().check(self.judge_model)
        if "codematch" in kinds:
            if not self.coder_model:
                raise _missing("coder_model", "code-writing model")
            self._client().check(self.coder_model)

    def _description(self, description: str | None) -> str:
        if self.protocol.reference and not (description and description.strip()):
            return "None"
        return description or ""

    def _client(self) -> LLMClient:
        if self.llm is None:
            self.llm = LLMClient()
        return self.llm

    async def score(
        self,
        method_id: str,
        description: str | None = None,
        code: str | None = None,
        *,
        examples: Sequence[Sequence[Any]] | None = None,
        kinds: Collection[str] | None = None,
        gold: bool = False,
        counterexample: bool = False,
        knowledge: Collection[str] | None = None,
        party: Hashable | None = None,
    ) -> ScoreResult:
        """Score one submission.

        Args:
            method_id: The method, e.g. ``builtin/b001``.
            description: The agent's description (judge and code writer).
            code: Code the agent submitted (direct code; fenced code is unwrapped).
            examples: What the agent observed, given to the code writer: ``(input literal, shown output)``
                pairs, or ``(input, output, error)`` triples in the reference's stored form.
            kinds: Scores to compute (``judge``, ``codematch``, ``direct``); default: all the submission allows.
            gold: The code writer gets the gold description instead (the method's upper bound).
            counterexample: Report the first test input the submitted code gets wrong.
            knowledge: Hand the code writer only these components (``pau_mcp.knowledge.COMPONENTS``); the
                examples are ``examples``, or the method's initial examples when none are given. None: the
                header, the description and ``examples``, as always.
            party: Whose submission it is (a credential), for the fair share of the workers; None: its own.

        Raises:
            UnknownMethod: no such method.
            NothingToScore: empty submission, or a score asked for that it cannot have.
            LLMNotConfigured: a needed model is not configured.
            LLMError: a fatal model failure (bad key, unknown model, unreachable server).
        """
        method = self.method(method_id)
        chosen = self.kinds_for(description, code, kinds, gold, knowledge)
        self.check(chosen)
        components = None if knowledge is None else tuple(c for c in COMPONENTS if c in set(knowledge))
        if components is not None and "examples" in components and not examples:
            examples = initial_examples(method)
        results: dict[str, Any] = {}
        party = party if party is not None else object()

        async def judge() -> None:
            assert self.judge_model is not None
            with scoring_span("judge", method.id, self.judge_model):
                results["judge"] = await judge_description(
                    self._client(), self.judge_model, method.description, self._description(description),
                    temperature=self.temperature, protocol=self.protocol,
                )  # fmt: skip

        async def codematch() -> None:
            assert self.coder_model is not None
            text = method.description if gold else self._description(description)
            with scoring_span("codematch", method.id, self.coder_model):
                results["codematch"] = await write_code(
                    self._client(), self.coder_model, self.metered(party), method, text,
                    examples=examples, limits=self.limits, temperature=self.temperature, protocol=self.protocol,
                    knowledge=components,
                )  # fmt: skip

        async def direct() -> None:
            submitted = await off_loop(extract_code, code or "", method.entry)
            with scoring_span("direct", method.id):
                results["direct"] = await match_code(
                    self.metered(party),
                    method,
                    submitted,
                    limits=self.limits,
                    counterexample=counterexample,
                    protocol=self.protocol,
                )

        jobs = {"judge": judge, "codematch": codematch, "direct": direct}
        try:
            async with anyio.create_task_group() as group:
                for kind in chosen:
                    group.start_soon(jobs[kind])
        except BaseExceptionGroup as group_error:
            # Judge and code writer share a provider: both fail alike. Raise the error, not a group of it.
            first = _first_llm_error(group_error)
            if first is None:
                raise
            raise first from None
        usage, cost, models = Usage(), 0.0, []
        for part in (results.get("judge"), results.get("codematch")):
            if part is not None:
                usage, cost = usage + part.usage, cost + part.cost_usd
                if part.model:
                    models.append(part.model)
        pricing = self._client().pricing
        unpriced = tuple(sorted({m for m in models if pricing.price(m) is None}))
        return ScoreResult(
            method_id=method.id,
            judge=results.get("judge"),
            codematch=results.get("codematch"),
            direct=results.get("direct"),
            gold=gold,
            usage=usage,
            cost_usd=cost,
            unpriced=unpriced,
            protocol=self.protocol.name,
            knowledge=components,
        )

    def task(self, task_id: str) -> Task:
        """A task by id (``suite/name``).

        Raises:
            UnknownMethod: no such suite or task (the message says how to list them).
        """
        suite_name = task_id.split("/", 1)[0]
        try:
            suite = self.manifests.suite(suite_name)
        except ManifestError as exc:
            raise UnknownMethod(str(exc)) from None
        if task_id not in suite.tasks:
            raise UnknownMethod(f"suite {suite_name!r} has no task {task_id!r}; see `pau-mcp manifests list`")
        return suite.tasks[task_id]

    async def check_task(
        self, task_id: str, answer: str, calls: Sequence[TaskCall], tools: Mapping[str, str]
    ) -> TaskCheck:
        """Check an answer to a task: exact match with its frozen answer and, where it asks for them, its calls
        re-executed with the gold functions in this scorer's sandbox (``scoring.tasks``).

        Args:
            task_id: The task.
            answer: The agent's answer, a Python literal.
            calls: The calls it says compute the answer.
            tools: Each tool name of the deployment the agent used -> its method id.

        Raises:
            UnknownMethod: no such task.
            ValueError: the task has no frozen answer.
        """
        task = self.task(task_id)
        methods = self.manifests.suite(task.suite).methods
        return await check_answer(
            task, answer, calls, methods=methods, tools=tools, sandbox=self.sandbox, limits=self.limits
        )

    async def evidence(self, method_id: str, code: str | None, limit: int = 5) -> tuple[str, list[Counterexample]]:
        """What a reviewer of a failed episode needs (the failure classifier): the gold description and the first
        ``limit`` hidden tests ``code`` gets wrong, with what the function does and what the code did.

        For the operator only: it holds the gold description and test inputs.

        Raises:
            UnknownMethod: no such method.
        """
        method = self.method(method_id)
        return method.description, await failing_tests(self.sandbox, method, code, limit=limit, limits=self.limits)

    async def aclose(self) -> None:
        """Close the model clients and the response cache."""
        if self.llm is not None:
            await self.llm.aclose()


#: What ``feedback_for`` returns: ``await feedback(method_id, description, code, *, submission_id=None,
#: counterexample=False, credential=None) -> dict``, the agent's view of the scores.
Feedback = Callable[..., Awaitable[dict[str, Any]]]

_UNAVAILABLE = {"scores": "unavailable: the scorer failed; your submission is recorded"}


def feedback_for(
    settings: Settings, *, use_cache: bool = True, scorer: Scorer | None = None, sandboxes: SandboxMaker | None = None
) -> Feedback:
    """Scores for the MCP server's ``submit`` tool (``pau-mcp serve --feedback score``).

    Every score the configuration allows: the judge and the code writer when
    their models are set (a warning names the settings otherwise), and direct
    code whenever code is submitted. The scorer (and its sandbox, in worker
    processes) is built on the first submission, off the event loop; reading
    a submission is CPU work done off the event loop too (``cpu.off_loop``).

    Args:
        settings: Models, price table, cache, sandbox limits, manifests.
        use_cache: Use the LLM response cache.
        scorer: Use this scorer instead of building one.
        sandboxes: Builds the scorer's sandbox from the settings (default: ``make_sandbox``).

    Returns:
        ``async feedback(method_id, description, code, *, submission_id=None, counterexample=False,
        credential=None) -> dict`` (``credential``: whose submission, for the fair share of the scorer's workers):
        ``ScoreResult.feedback()``. With ``counterexample=False`` the dict never holds one; with True
        it may hold ``"counterexample": {"input": ..., "expected": ...}`` (the first test input the
        submitted code gets wrong, and what the hidden function does with it, as agents see call
        results); the caller charges for it. The dict never holds the gold description, the source,
        another test input or any text the submitted code produced; a scorer failure of any kind
        answers ``{"scores": "unavailable: ..."}`` without its message. With a submission id the
        scores are also written to the run store.
    """
    missing = [name for name in ("judge_model", "coder_model") if not getattr(settings, name)]
    for name in missing:
        log.warning(
            "submission feedback leaves out the %s score: set %s",
            "judge" if name == "judge_model" else "code match",
            Settings.named(name),
        )
    allowed = (
        {"direct"} | ({"judge"} if settings.judge_model else set()) | ({"codematch"} if settings.coder_model else set())
    )
    state: dict[str, Scorer] = {"scorer": scorer} if scorer is not None else {}
    guard: dict[str, anyio.Lock] = {}  # the lock is made on first use: it belongs to the server's event loop
    stores: list[RunStore] = []  # opened on the first scored submission

    async def build() -> Scorer:
        if "scorer" in state:
            return state["scorer"]
        async with guard.setdefault("lock", anyio.Lock()):
            if "scorer" not in state:
                # Worker processes, as the scorer endpoint's: the host side of running scored code (reading what
                # it hands back, parsing it to choose an engine) then holds no lock the server's event loop needs.
                maker = sandboxes or make_sandbox
                # Shared fairly by every credential's submissions (``fairness``), as the server's calls are.
                box_settings, shares = shared_sandbox(settings)
                state["scorer"] = await anyio.to_thread.run_sync(
                    lambda: Scorer.from_settings(
                        settings, use_cache=use_cache, sandbox=maker(box_settings, processes=True), shares=shares
                    )
                )
        return state["scorer"]

    async def feedback(
        method_id: str,
        description: str,
        code: str | None,
        *,
        submission_id: int | None = None,
        counterexample: bool = False,
        credential: Hashable | None = None,
    ) -> dict[str, Any]:
        active = await build()
        has_code = bool(code and code.strip())
        kinds = [
            k for k in KINDS if k in allowed and (k != "direct" or has_code) and (k == "direct" or description.strip())
        ]
        if not kinds:
            return {}
        try:
            result = await active.score(
                method_id, description, code, kinds=kinds, counterexample=counterexample, party=credential
            )
        except Exception as exc:
            # Whatever failed, its message stays in the operator's log: it could quote what the code handed back.
            log.warning("scoring a submission for %s failed: %s: %s", method_id, type(exc).__name__, str(exc)[:500])
            return dict(_UNAVAILABLE)
        if submission_id is not None:
            # In a thread: a store write may wait for its lock, and the server's event loop must never wait on one.
            await anyio.to_thread.run_sync(_record, stores, settings, submission_id, result)
        return result.feedback()

    return feedback


_OPENING = threading.Lock()


def _record(stores: list[RunStore], settings: Settings, submission_id: int, result: Any) -> None:
    """Record a submission's scores in the run store (opened on the first)."""
    with _OPENING:
        if not stores:
            stores.append(RunStore(settings.db_path))
    record_scores(stores[0], submission_id, result)
