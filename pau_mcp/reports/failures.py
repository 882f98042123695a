"""The failure-mode classifier: an LLM reads a failed episode and names what went wrong, in the paper's categories.

Optional (``pau-mcp report --classify-failures``). An episode failed when it
ended in an error, or its judge score is below 3, or its code match is below
0.8, each score as its run's protocol counts it. An episode that ended in an error (a provider's, the server's, a
lost connection: the run's infrastructure, not the agent) is labelled ``infrastructure`` without a request; the
others go to the classifier, which sees what the paper's annotators saw: the gold description,
the agent's description, the hidden tests the description's code fails (with
what the function does and what the code did), and the trajectory; and, when
measured, the share of the hidden function the agent's calls executed
(``pau_mcp.scoring.coverage``) and whether the description contradicts the
agent's own observations. The model answers with one label from
``FAILURE_LABELS``, read strictly from the last line of its reply; anything else
becomes ``unclassified``. Everything quoted is fenced with a tag it cannot
contain (``pau_mcp.scoring.fences``); the same case gives the same request, and
replies are cached by the LLM client, so a second report costs nothing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from pau_mcp.llm import LLMClient, LLMError
from pau_mcp.prompts import load_prompts
from pau_mcp.scoring.fences import fence, fence_tag

from .data import MethodScores, RunData, is_failure
from .labels import FAILURE_LABELS, INFRASTRUCTURE, UNCLASSIFIED

if TYPE_CHECKING:
    from pau_mcp.runstore import RunStore

__all__ = [
    "FAILURE_LABELS",
    "INFRASTRUCTURE",
    "UNCLASSIFIED",
    "Classification",
    "Evidence",
    "FailingTest",
    "FailureCase",
    "add_evidence",
    "classifier_messages",
    "classify_cases",
    "classify_failures",
    "failure_cases",
    "is_failure",
    "parse_label",
]


_MAX_STEP_CHARS = 800
_MAX_TRAJECTORY_CHARS = 12_000
_MAX_TEXT_CHARS = 2_000
_MAX_TESTS = 5
_MAX_VALUE_CHARS = 300

_LABEL_LINE = re.compile(r"^label:[ \t]*([a-z_]+)[ \t]*$", re.IGNORECASE)


@dataclass(frozen=True)
class FailingTest:
    """A hidden test the description's code gets wrong.

    Attributes:
        input: The argument literal.
        expected: What the hidden function does with it.
        got: What the code written from the description did (model output: fenced in the prompt).
    """

    input: str
    expected: str
    got: str


@dataclass(frozen=True)
class FailureCase:
    """One failed episode to classify.

    Attributes:
        run: The run's name.
        method_id: The method.
        why: Why it counts as failed (error, low judge score, low code match).
        outcome: Its state and scores, as one line for the prompt.
        trajectory: Its steps, as the harness recorded them (opaque JSON).
        errored: True when the episode ended in an error (labelled ``infrastructure``, never sent to a model).
        description: The description the agent submitted.
        code: The code whose tests failed: the code writer's from the description, else the agent's own.
        coverage: What the agent's calls executed of the hidden function, as a sentence, when measured.
        contradiction: Whether the description's code disagrees with the agent's observations, as a sentence.
        gold: The gold description (added by ``add_evidence``, from the scorer).
        tests: Hidden tests the code fails, at most five (added by ``add_evidence``).
    """

    run: str
    method_id: str
    why: str
    outcome: str
    trajectory: list[Any] = field(default_factory=list)
    description: str = ""
    code: str | None = None
    coverage: str | None = None
    contradiction: str | None = None
    gold: str = ""
    tests: tuple[FailingTest, ...] = ()
    errored: bool = False


#: What the scorer tells about one failed episode: ``await evidence(method_id, code)`` gives the gold description
#: and the hidden tests the code fails, each with ``input``, ``expected`` and ``got`` (``Scorer.evidence``).
Evidence = Callable[[str, str | None], Awaitable[tuple[str, Sequence[Any]]]]


@dataclass(frozen=True)
class Classification:
    """A failure label with the model's reasoning.

    Attributes:
        label: One of ``FAILURE_LABELS`` or ``UNCLASSIFIED``.
        reply: The model's reply (empty if the request failed).
        reason: Why the label is ``UNCLASSIFIED``, if it is.
    """

    label: str
    reply: str = ""
    reason: str | None = None


def failure_cases(store: RunStore, run: RunData, unscored_as_one: bool = False) -> list[FailureCase]:
    """The failed episodes of a run, with their trajectories, descriptions, code, coverage and contradiction check."""
    failed = [(m, why) for m in run.methods if (why := is_failure(m, unscored_as_one, run))]
    if not failed:
        return []
    rows = {row.method_id: row for row in store.episodes(run.run_id, with_trajectories=True)}
    descriptions = {row.id: row.description for row in store.submissions(run.run_id)}
    cases = []
    for m, why in failed:
        row = rows.get(m.method_id)
        scores = row.scores if row is not None else {}
        code = next((scores[k].detail.get("code") for k in ("codematch", "direct") if k in scores), None)
        submission = row.submission_id if row is not None else None
        cases.append(
            FailureCase(
                run.name, m.method_id, why, _outcome(m), (row.trajectory if row is not None else None) or [],
                description=descriptions.get(submission, "") if submission is not None else "",
                code=code, coverage=coverage_sentence(row.coverage if row is not None else None),
                contradiction=_contradiction(m), errored=m.state == "failed",
            )
        )  # fmt: skip
    return cases


def coverage_sentence(coverage: dict[str, Any] | None) -> str | None:
    """What the agent's calls executed of the hidden function, next to what its hidden tests execute, in words."""
    if not coverage or coverage.get("status") != "measured":
        return None
    lines, branches = coverage["lines"], coverage["branches"]
    text = (
        f"the agent's calls executed {lines['common']} of the {lines['tests']} lines the hidden tests execute "
        f"({_share(lines['agent_of_tests'])})"
    )
    if branches["tests"]:
        text += (
            f" and took {branches['common']} of the {branches['tests']} branches they take "
            f"({_share(branches['agent_of_tests'])})"
        )
    return text


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _contradiction(method: MethodScores) -> str | None:
    found = method.contradiction
    if found is None:
        return None
    checked, disagree = found
    if not disagree:
        return f"code written from the description agrees with all {checked} inputs the agent observed"
    return f"code written from the description disagrees with {disagree} of the {checked} inputs the agent observed"


async def add_evidence(cases: Sequence[FailureCase], evidence: Evidence) -> list[FailureCase]:
    """The cases with the gold description and the hidden tests their code fails, from the scorer (a case whose
    method is not installed goes as it is)."""
    found: list[FailureCase] = []
    for case in cases:
        try:
            gold, tests = await evidence(case.method_id, case.code)
        except LookupError:  # the method's suite is not installed here: the case goes without
            found.append(case)
            continue
        failing = tuple(FailingTest(t.input, t.expected, t.got) for t in tests[:_MAX_TESTS])
        found.append(dataclasses.replace(case, gold=gold, tests=failing))
    return found


def _outcome(method: MethodScores) -> str:
    parts = [f"state {method.state}"]
    if method.judge_status:
        parts.append(
            f"judge {method.judge_status}" + (f" {method.judge_value:g}" if method.judge_value is not None else "")
        )
    if method.codematch_status:
        parts.append(
            f"code match {method.codematch_status}"
            + (f" {method.codematch_value:.2f}" if method.codematch_value is not None else "")
        )
    if method.concluded is not None:
        parts.append("the agent concluded by itself" if method.concluded else "the agent ran out of budget")
    if method.queries is not None:
        parts.append(f"{method.queries} counted calls")
    return "; ".join(parts)


def classifier_messages(case: FailureCase) -> list[dict[str, str]]:
    """The classifier's chat messages for one failed episode: every quoted text fenced with a tag none contains."""
    episode = "\n".join(
        [
            f"method: {case.method_id}",
            f"why it failed: {case.why}",
            f"outcome: {case.outcome}",
            f"exploration coverage: {case.coverage or 'not measured'}",
            f"self-contradiction check: {case.contradiction or 'not made'}",
        ]
    )
    gold = case.gold.strip() or "(not available)"
    description = _clip(case.description.strip(), _MAX_TEXT_CHARS) or "(no description was submitted)"
    tests = _tests_text(case.tests, bool(case.code))
    trajectory = _trajectory_text(case.trajectory)
    tag = fence_tag("classifier", episode, gold, description, tests, trajectory)
    prompts = load_prompts()
    prompt = prompts.render(
        "classifier",
        tag=tag,
        episode=fence("episode", episode, tag),
        gold=fence("reference", gold, tag),
        description=fence("description", description, tag),
        tests=fence("tests", tests, tag),
        trajectory=fence("trajectory", trajectory, tag),
    )
    return [{"role": "system", "content": prompts.text("classifier_system")}, {"role": "user", "content": prompt}]


def _tests_text(tests: Sequence[FailingTest], had_code: bool) -> str:
    if not tests:
        return "(no failing test is known)" if had_code else "(no code was written from the description)"
    return "\n".join(
        f"test_func{_clip(t.input, _MAX_VALUE_CHARS)}: the function gives {_clip(t.expected, _MAX_VALUE_CHARS)}; "
        f"the description's code gave {_clip(t.got, _MAX_VALUE_CHARS)}"
        for t in tests
    )


def _trajectory_text(steps: Sequence[Any]) -> str:
    """The steps as JSON lines, each clipped; when too long, the start and the end (where the agent concludes) are kept."""
    lines = [
        f"{i}. {_clip(json.dumps(step, default=str, ensure_ascii=False), _MAX_STEP_CHARS)}"
        for i, step in enumerate(steps, 1)
    ]
    if not lines:
        return "(no steps were recorded)"
    if sum(len(line) + 1 for line in lines) <= _MAX_TRAJECTORY_CHARS:
        return "\n".join(lines)
    head: list[str] = []
    tail: list[str] = []
    used = 0
    budget = _MAX_TRAJECTORY_CHARS // 2
    for line in lines:
        if used + len(line) > budget:
            break
        head.append(line)
        used += len(line) + 1
    used = 0
    for line in reversed(lines[len(head) :]):
        if used + len(line) > budget:
            break
        tail.insert(0, line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"... {omitted} steps omitted ...", *tail])


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_label(reply: str) -> str:
    """The label on the reply's last non-empty line (``Label: X``, X one of ``FAILURE_LABELS``), else ``UNCLASSIFIED``.

    Strict on purpose: a reply that hedges, names two labels or invents one is
    counted as unclassified rather than guessed at.
    """
    lines = [line.strip() for line in (reply or "").splitlines() if line.strip()]
    match = _LABEL_LINE.match(lines[-1]) if lines else None
    label = match.group(1).lower() if match else None
    return label if label in FAILURE_LABELS else UNCLASSIFIED


async def classify_failures(
    llm: LLMClient, model: str, cases: Sequence[FailureCase], progress: Callable[..., None] | None = None
) -> list[Classification]:
    """Label each failed episode, concurrently (the client bounds requests in flight).

    An episode that ended in an error is labelled ``infrastructure`` without a request: a context overflow, an
    outage or a lost connection says nothing about how the agent explored.

    Args:
        llm: The client (its cache makes a repeated report free).
        model: ``provider/model``.
        cases: The failed episodes.
        progress: Called once per finished case.

    Returns:
        One classification per case, in the same order.

    Raises:
        LLMError: a fatal error (bad key, unknown model, unreachable server): every request would fail.
    """
    results: list[Classification | None] = [None] * len(cases)

    async def one(index: int, case: FailureCase) -> None:
        if case.errored:
            results[index] = Classification(INFRASTRUCTURE, reason=case.why)
            if progress is not None:
                progress()
            return
        try:
            completion = await llm.complete(model, classifier_messages(case), temperature=0.0)
        except LLMError as exc:
            if exc.fatal:
                raise
            results[index] = Classification(UNCLASSIFIED, reason=f"the request failed: {exc}")
        else:
            label = parse_label(completion.text)
            reason = "the reply does not end with 'Label: X' naming a known label" if label == UNCLASSIFIED else None
            results[index] = Classification(label, completion.text, reason)
        if progress is not None:
            progress()

    try:
        async with anyio.create_task_group() as group:
            for index, case in enumerate(cases):
                group.start_soon(one, index, case)
    except BaseExceptionGroup as errors:
        # A fatal error cancels the rest; callers want the provider's message, not a group.
        fatal = errors.subgroup(lambda exc: isinstance(exc, LLMError))
        if fatal is None:
            raise
        raise _first(fatal) from None
    return [r if r is not None else Classification(UNCLASSIFIED, reason="not classified") for r in results]


def _first(group: BaseExceptionGroup) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


def classify_cases(
    llm: LLMClient,
    model: str,
    cases: Sequence[FailureCase],
    progress: Callable[..., None] | None = None,
    evidence: Evidence | None = None,
) -> dict[str, dict[str, str]]:
    """Classify failed episodes from synchronous code (closes the client's connections when done).

    Args:
        llm: The client.
        model: ``provider/model``.
        cases: The failed episodes, from ``failure_cases`` of each run.
        progress: Called once per classified case.
        evidence: The scorer's ``evidence`` (gold description and failing tests), added before classifying.

    Returns:
        Per run, per method, the label.

    Raises:
        LLMError: a fatal error: every request would fail the same way.
    """

    async def main() -> list[Classification]:
        try:
            asked = [case for case in cases if not case.errored]  # no evidence needed: they are not sent anywhere
            found = iter(await add_evidence(asked, evidence) if evidence is not None else asked)
            shown = [case if case.errored else next(found) for case in cases]
            return await classify_failures(llm, model, shown, progress)
        finally:
            await llm.aclose()

    labels: dict[str, dict[str, str]] = {}
    for case, result in zip(cases, anyio.run(main) if cases else [], strict=True):
        labels.setdefault(case.run, {})[case.method_id] = result.label
    return labels
