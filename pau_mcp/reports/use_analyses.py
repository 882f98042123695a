"""The analyses of use a report adds: what explorers' descriptions are worth to others.

- Explorers compared (``--agent observer`` beside ``paper`` and ``tools``): scores, queries and tokens per episode, and
  how often an agent concluded while its own description, written as code, still disagreed with what it had seen
  (the scorer's self-contradiction check, the same for every agent).
- Knowledge components (``pau-mcp score --knowledge``): code match per combination of signature, description and
  examples, from the run's descriptions and from the gold ones, as NovelAPIBench tabulates its components.
- Tasks (``pau-mcp eval --mode tasks``): accuracy by hop count and by the documentation the tools were served with.

Pure functions over what ``report`` loaded; rendering is in ``render``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pau_mcp.contract import TASK_KIND
from pau_mcp.knowledge import all_combinations, knowledge_label, split_kind

from .data import RunData

__all__ = [
    "Explorer",
    "KnowledgeRow",
    "TaskAccuracy",
    "explorers",
    "knowledge_rows",
    "task_accuracies",
]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


@dataclass(frozen=True)
class Explorer:
    """One exploring run, for the comparison of agents.

    Attributes:
        run: The run.
        agent: Its agent (``paper``, ``tools``, ``observer``, ...).
        model: Its model.
        done: Done episodes.
        judge: Mean judge rating over the done episodes that have one (None: none).
        codematch: Mean code match, likewise.
        queries: Mean counted calls per done episode.
        tokens: Mean tokens (read and written) per finished episode; an observer's include its own code writer's.
        concluded: Done episodes the agent ended by itself.
        checked: Of those, episodes the scorer checked against the agent's own observations.
        disagreeing: Of those, episodes whose description's code disagreed with some observation: the agent
            concluded while its own check would still have disagreed.
    """

    run: str
    agent: str
    model: str
    done: int
    judge: float | None
    codematch: float | None
    queries: float | None
    tokens: float | None
    concluded: int
    checked: int
    disagreeing: int

    @property
    def disagreeing_share(self) -> float | None:
        """Concluded-while-disagreeing episodes over the checked concluded ones (None: none checked)."""
        return self.disagreeing / self.checked if self.checked else None


def explorers(runs: Sequence[RunData]) -> list[Explorer]:
    """Every exploring run (one with episodes and an agent that is not answering tasks), for the agents' table."""
    found = []
    for run in runs:
        if not run.episodes or not run.setting("agent") or run.mode == "tasks":
            continue
        done = [m for m in run.methods if m.done]
        finished = [m for m in run.methods if m.state in ("done", "failed")]
        concluded = [m for m in done if m.concluded]
        checks = [c for m in concluded if (c := m.contradiction) is not None]
        found.append(
            Explorer(
                run=run.name,
                agent=run.setting("agent"),
                model=run.setting("model"),
                done=len(done),
                judge=_mean([v for m in done if (v := run.counted(m, "judge")) is not None]),
                codematch=_mean([v for m in done if (v := run.counted(m, "codematch")) is not None]),
                queries=_mean([float(m.queries) for m in done if m.queries is not None]),
                tokens=_mean([float(m.input_tokens + m.output_tokens) for m in finished]),
                concluded=len(concluded),
                checked=len(checks),
                disagreeing=sum(1 for _, disagree in checks if disagree),
            )
        )
    # Only worth a table when it compares: several explorers, or an observer (whose check is the point).
    if len(found) < 2 and not any(e.agent == "observer" for e in found):
        return []
    return found


@dataclass(frozen=True)
class KnowledgeRow:
    """Code match from one combination of knowledge in one run.

    Attributes:
        run: The run.
        model: Its agent's model.
        knowledge: The combination, e.g. ``signature+examples``.
        explored: ``(n, mean)`` with the run's own descriptions (n 0: not scored).
        gold: ``(n, mean)`` with the gold descriptions.
    """

    run: str
    model: str
    knowledge: str
    explored: tuple[int, float | None]
    gold: tuple[int, float | None]


def knowledge_rows(runs: Sequence[RunData]) -> list[KnowledgeRow]:
    """Per run, one row per knowledge combination it was scored with (``pau-mcp score --knowledge``)."""
    rows = []
    for run in runs:
        values: dict[tuple[bool, tuple[str, ...]], list[float]] = {}
        for m in run.methods:
            if not m.done:
                continue
            for kind, score in m.scores.items():
                split = split_kind(kind)
                if split is not None and score.status == "scored" and score.value is not None:
                    values.setdefault(split, []).append(float(score.value))
        for combination in all_combinations():
            explored, gold = values.get((False, combination), []), values.get((True, combination), [])
            if explored or gold:
                rows.append(
                    KnowledgeRow(
                        run.name, run.setting("model"), knowledge_label(combination),
                        (len(explored), _mean(explored)), (len(gold), _mean(gold)),
                    )
                )  # fmt: skip
    return rows


@dataclass(frozen=True)
class TaskAccuracy:
    """A task run's accuracy, overall and by hop count.

    Attributes:
        run: The run.
        model: Its agent's model.
        docs: The documentation its tools were served with (``examples``, ``none``, ``gold``, a run or a file).
        by_hops: Per hop count, ``(tasks answered, correct)``; a task counts as correct when its answer matches
            and, where it asks for the calls, re-executing them gives the answer.
        answers: ``(answered, answer matched)`` whatever the calls.
        verified: ``(tasks asking for calls, whose calls re-executed to the answer)``.
        failed: Episodes that ended in an error (not counted above).
        calls: Mean counted tool calls per answered task.
    """

    run: str
    model: str
    docs: str
    by_hops: dict[int, tuple[int, int]]
    answers: tuple[int, int]
    verified: tuple[int, int]
    failed: int
    calls: float | None

    @property
    def accuracy(self) -> float | None:
        """Correct tasks over answered ones."""
        total = sum(n for n, _ in self.by_hops.values())
        return sum(c for _, c in self.by_hops.values()) / total if total else None


def task_accuracies(runs: Sequence[RunData]) -> list[TaskAccuracy]:
    """Per task run (``mode`` tasks), its accuracy by hops, from each task score's detail (``hops``,
    ``answer_matched``, ``asks_calls``, ``verified``)."""
    found = []
    for run in runs:
        if run.mode != "tasks":
            continue
        by_hops: dict[int, tuple[int, int]] = {}
        answered = matched = asked = verified = 0
        calls: list[float] = []
        for m in run.methods:
            score = m.scores.get(TASK_KIND)
            if not m.done or score is None or score.status != "scored":
                continue
            detail = score.detail or {}
            hops = int(detail.get("hops") or 1)
            n, correct = by_hops.get(hops, (0, 0))
            by_hops[hops] = (n + 1, correct + int((score.value or 0) >= 1))
            answered += 1
            matched += int(bool(detail.get("answer_matched")))
            if detail.get("asks_calls"):
                asked += 1
                verified += int(bool(detail.get("verified")))
            if m.queries is not None:
                calls.append(float(m.queries))
        found.append(
            TaskAccuracy(
                run=run.name,
                model=run.setting("model"),
                docs=run.setting("docs") or "examples",
                by_hops=dict(sorted(by_hops.items())),
                answers=(answered, matched),
                verified=(asked, verified),
                failed=sum(1 for m in run.methods if m.state == "failed"),
                calls=_mean(calls),
            )
        )
    return found
