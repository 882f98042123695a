"""What a report reads: runs from the run store, as typed data every analysis and rendering shares.

``load_runs`` reads the named runs: the episodes of an evaluation run, or, for a run without episodes (a ``serve``
run such as the demo's, a scored predictions file, gold descriptions), its submissions, one per session and method.
Each becomes a ``RunData`` of ``MethodScores``; how a score counts (the protocol's rules, the unscored rule) and
whether an episode failed are decided here, once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pau_mcp.contract import TASK_KIND, EpisodeState, ScoreStatus
from pau_mcp.protocol import RULES, protocol_of
from pau_mcp.runstore import EpisodeRow, RunStore, ScoreRow, StoreError

from .conduct import Conduct, conduct_of

__all__ = [
    "FRACTION_KINDS",
    "KINDS",
    "KIND_TITLES",
    "WORST",
    "MethodScores",
    "ReportError",
    "RunData",
    "Score",
    "epoch_info",
    "is_failure",
    "load_runs",
    "load_trajectories",
    "run_names",
]

#: Every score kind the run store records, in display order: the judge's rating of the description, code
#: written from the description, code written from the gold description (``pau-mcp score --gold``), and code
#: the agent submitted itself, run against the hidden tests.
KINDS = ("judge", "codematch", "codematch_gold", "direct")

#: The kinds whose values are fractions of matching tests (0 to 1).
FRACTION_KINDS = ("codematch", "codematch_gold", "direct")

#: What a row without a score counts as under a protocol that counts failed rows (the reference's): the
#: judge's lowest rating, no matching test.
WORST: dict[str, float] = {"judge": 1.0, "codematch": 0.0, "codematch_gold": 0.0}

#: Each kind's name in headings.
KIND_TITLES = {
    "judge": "Judge score (1-5)",
    "codematch": "Code match (0-1)",
    "codematch_gold": "Code match from the gold description (0-1)",
    "direct": "Direct code (0-1)",
}


class ReportError(ValueError):
    """The report cannot be made as asked; the message says what to do instead."""


@dataclass(frozen=True)
class Score:
    """The latest recorded score of one kind.

    Attributes:
        status: ``scored`` (a value), ``unscored`` (the judge's reply had no readable rating) or ``error``.
        value: The rating or fraction when scored.
        observed: For code match: the code writer's code on the agent's observed inputs, ``{"checked",
            "disagree"}`` (the self-contradiction check), when it was made.
        detail: For a task's answer (``pau_mcp.contract.TASK_KIND``): how it was checked (hops, answer matched, calls
            verified); None for other kinds, whose details can be large.
    """

    status: ScoreStatus
    value: float | None = None
    observed: dict[str, int] | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class MethodScores:
    """One episode (or, in a run without episodes, one submission) as a report sees it.

    Attributes:
        method_id: The method explored.
        state: ``done``, ``failed``, ``pending`` or ``running``; a submission is ``done``.
        scores: The latest score of each kind recorded (``judge``, ``codematch``, ``codematch_gold``, ``direct``).
        concluded: True when the agent concluded by itself, False when the budget ran out.
        queries: Tool calls that counted.
        input_tokens: Tokens the agent read.
        output_tokens: Tokens the agent wrote.
        cost_usd: What the episode cost.
        error: Why a failed episode failed.
        coverage: Its exploration coverage, when measured (``pau-mcp coverage``; ``pau_mcp.scoring.coverage``).
        described: False for a done episode whose agent gave no description: nothing was submitted or scored.
        rl_return: An RL rollout episode's return (the sum of its step rewards), when it finished.
        conduct: Its malformed actions, invalid arguments and refused calls, counted from its trajectory (None for a
            submission, which has none).
        seconds: How long its last attempt took, start to end (None when not recorded).
    """

    method_id: str
    state: EpisodeState
    scores: dict[str, Score] = field(default_factory=dict)
    concluded: bool | None = None
    queries: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    coverage: dict[str, Any] | None = None
    described: bool = True
    rl_return: float | None = None
    conduct: Conduct | None = None
    seconds: float | None = None

    @property
    def done(self) -> bool:
        """Only finished, successful episodes count in the scores."""
        return self.state == "done"

    def status(self, kind: str) -> str | None:
        """The status of the latest score of a kind, or None when none was recorded."""
        score = self.scores.get(kind)
        return score.status if score is not None else None

    def value(self, kind: str) -> float | None:
        """The recorded value of a kind, whatever the episode's state (None when not scored)."""
        score = self.scores.get(kind)
        return score.value if score is not None else None

    @property
    def judge_status(self) -> str | None:
        """``scored``, ``unscored``, ``error``, or None when the judge never ran."""
        return self.status("judge")

    @property
    def judge_value(self) -> float | None:
        """The judge's rating when scored."""
        return self.value("judge")

    @property
    def codematch_status(self) -> str | None:
        """As ``judge_status``, for code match."""
        return self.status("codematch")

    @property
    def codematch_value(self) -> float | None:
        """The code-match fraction when scored."""
        return self.value("codematch")

    def score(self, kind: str, unscored_as_one: bool = False, failed_as_worst: bool = False) -> float | None:
        """The score of one kind this episode counts with, or None when it does not count.

        Args:
            kind: One of ``KINDS``.
            unscored_as_one: Count an unscored judge reply as 1 (the reference benchmark's rule)
                instead of leaving it out.
            failed_as_worst: Count a failed episode, and a score that could not be made, as the
                worst score of its kind (``WORST``; the reference protocol's rule) instead of leaving
                it out.
        """
        score = self.scores.get(kind)
        unmade = (
            self.state == "failed"
            or (self.done and not self.described)  # no description: nothing a score could be made of
            or (self.done and score is not None and score.status in ("error", "unscored"))
        )
        if failed_as_worst and kind in WORST and unmade:
            return WORST[kind]
        if not self.done or score is None:
            return None
        if score.status == "scored" and score.value is not None:
            return float(score.value)
        if kind == "judge" and score.status == "unscored" and unscored_as_one:
            return 1.0
        return None

    def covered(self, part: str = "lines") -> float | None:
        """The share of the lines (or ``branches``) the hidden tests run that the agent's calls ran, when measured."""
        if not self.coverage or self.coverage.get("status") != "measured":
            return None
        value = self.coverage[part].get("agent_of_tests")
        return None if value is None else float(value)

    @property
    def contradiction(self) -> tuple[int, int] | None:
        """``(observed inputs checked, of those where the description's code disagrees)`` for a done episode whose
        code match made the self-contradiction check, else None."""
        score = self.scores.get("codematch")
        if not self.done or score is None or not score.observed or not score.observed.get("checked"):
            return None
        return int(score.observed["checked"]), int(score.observed.get("disagree", 0))

    def judge(self, unscored_as_one: bool = False) -> float | None:
        """The judge score this episode counts with, or None."""
        return self.score("judge", unscored_as_one)

    def codematch(self) -> float | None:
        """The code-match fraction this episode counts with, or None."""
        return self.score("codematch")


@dataclass(frozen=True)
class RunData:
    """A run's configuration and what it recorded, as read from the store.

    Attributes:
        name: The run.
        run_id: Its id in the store.
        config: The configuration it was created with.
        methods: Its episodes, or for a run without episodes its submissions (the latest per session and method).
        kind: How the run was made: ``eval``, ``serve`` (the demo's too), ``file`` (a predictions file) or ``gold``.
        episodes: True when ``methods`` are evaluation episodes, False when they are submissions.
        replaced: Submissions left out because a later one in the same session replaced them.
    """

    name: str
    run_id: int
    config: dict[str, Any]
    methods: tuple[MethodScores, ...]
    kind: str = "eval"
    episodes: bool = True
    replaced: int = 0

    def setting(self, key: str) -> str:
        """A configuration value as text ("" when the run does not record it)."""
        value = self.config.get(key)
        return "" if value is None else str(value)

    @property
    def protocol(self) -> str:
        """The protocol the run recorded (``pau-mcp`` for runs made before protocols were recorded)."""
        return protocol_of(self.config)

    def counted(self, method: MethodScores, kind: str, unscored_as_one: bool = False) -> float | None:
        """The score one of its methods counts with, by the run's protocol.

        Under the reference protocol an unscored judge reply counts as 1, and a failed episode or a score
        that could not be made as the worst score of its kind, for the kinds the run was scored on.
        """
        rules = RULES[self.protocol]
        worst = rules.failed_as_worst and kind in self._scored_kinds
        return method.score(kind, unscored_as_one or rules.failed_as_worst, failed_as_worst=worst)

    @property
    def ddof(self) -> int:
        """The standard deviation's degrees of freedom its protocol uses (1: the sample's)."""
        return 1 if RULES[self.protocol].sample_std else 0

    @property
    def _scored_kinds(self) -> frozenset[str]:
        return frozenset(kind for m in self.methods for kind in m.scores)

    @property
    def mode(self) -> str:
        """``interactive`` or ``incontext`` (spelling variants such as ``in-context`` folded), or ""."""
        return self.setting("mode").lower().replace("-", "").replace("_", "")

    @property
    def suite(self) -> str:
        """The suite (or suites, comma-separated) the run covers: from its configuration, else its method ids."""
        if self.setting("suite"):
            return self.setting("suite")
        suites = self.config.get("suites") or sorted({m.method_id.split("/", 1)[0] for m in self.methods})
        return ", ".join(str(s) for s in suites)


def epoch_info(config: dict[str, Any]) -> tuple[str, int, int | None] | None:
    """``(group, index, seed)`` of a run recorded as one epoch of a group (``eval --epochs``), or None."""
    info = config.get("epoch")
    if not isinstance(info, dict) or not isinstance(info.get("group"), str) or not isinstance(info.get("index"), int):
        return None
    seed = info.get("seed", config.get("seed"))
    return info["group"], info["index"], seed if isinstance(seed, int) else None


def run_names(store: RunStore, names: Sequence[str]) -> list[str]:
    """The runs ``names`` stand for: each run by its name, and the name of an epoch group (``eval --epochs``) as its
    epochs' runs in order (duplicates dropped, order kept). Names of neither kind are kept, for the caller to refuse."""
    known = {row.name: row for row in store.runs()}
    groups: dict[str, list[tuple[int, str]]] = {}
    for row in known.values():
        if (info := epoch_info(row.config)) is not None:
            groups.setdefault(info[0], []).append((info[1], row.name))
    found: list[str] = []
    for name in names:
        if name not in known and name in groups:
            found += [member for _, member in sorted(groups[name])]
        else:
            found.append(name)
    return list(dict.fromkeys(found))


def load_runs(store: RunStore, names: Sequence[str]) -> list[RunData]:
    """Read the named runs (duplicates dropped, order kept); an epoch group's name reads its epochs.

    A run with episodes (``pau-mcp eval``) is read as its episodes. A run without (``pau-mcp serve``, the
    demo, a predictions file or gold descriptions scored with ``pau-mcp score``) is read as its submissions:
    one per session and method, the latest, since a later submission in a session replaces the earlier one.

    Raises:
        ReportError: a name is not a run; the message lists the known runs.
    """
    runs = []
    known = {row.name: row for row in store.runs()}
    for name in run_names(store, names):
        try:
            run_id = store.run_id(name)
        except StoreError:
            listed = ", ".join(sorted(known)) or "none yet"
            raise ReportError(f"no run named {name!r} in {store.location}; known runs: {listed}") from None
        kind = known[name].kind if name in known else ""
        config = known[name].config if name in known else store.run_config(run_id)
        # Trajectories are read to count each episode's conduct (malformed actions, invalid arguments, refusals).
        episodes = store.episodes(run_id, with_trajectories=True)
        if episodes:
            methods = tuple(_episode_scores(row, kind) for row in episodes)
            runs.append(RunData(name, run_id, config, methods, kind=kind))
        else:
            methods, replaced = _submission_scores(store, run_id)
            runs.append(RunData(name, run_id, config, methods, kind=kind, episodes=False, replaced=replaced))
    return runs


def load_trajectories(store: RunStore, run: RunData) -> dict[str, list[Any]]:
    """Each episode's trajectory by method (read only when failures are classified: they can be large)."""
    return {row.method_id: row.trajectory or [] for row in store.episodes(run.run_id, with_trajectories=True)}


def _latest_scores(rows: Iterable[ScoreRow]) -> dict[str, Score]:
    """The latest score of each kind (rows come oldest first)."""
    return {
        row.kind: Score(
            row.status, row.value, row.detail.get("observed"), row.detail if row.kind == TASK_KIND else None
        )
        for row in rows
    }


def _episode_scores(row: EpisodeRow, kind: str = "eval") -> MethodScores:
    rl_return = None
    if kind == "rl" and row.state == "done" and row.trajectory:
        first = row.trajectory[0]
        value = first.get("return") if isinstance(first, dict) else None
        rl_return = float(value) if isinstance(value, int | float) else None
    return MethodScores(
        method_id=row.method_id,
        state=row.state,
        scores=_latest_scores(row.scores.values()),
        concluded=row.concluded,
        queries=row.queries,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
        error=row.error,
        coverage=row.coverage,
        # A rollout submits nothing; an exploring episode that ended without a description submitted nothing too.
        described=kind == "rl" or row.state != "done" or row.submission_id is not None,
        rl_return=rl_return,
        conduct=conduct_of(row.trajectory or []),
        seconds=_seconds(row.started_at, row.finished_at),
    )


def _seconds(started: str | None, finished: str | None) -> float | None:
    """Seconds between two run store times (``...Z``), or None when either is missing."""
    if not started or not finished:
        return None
    begin = datetime.fromisoformat(started.replace("Z", "+00:00"))
    return max(0.0, (datetime.fromisoformat(finished.replace("Z", "+00:00")) - begin).total_seconds())


def _submission_scores(store: RunStore, run_id: int) -> tuple[tuple[MethodScores, ...], int]:
    """A run without episodes as its submissions: the latest per session and method, with its counted calls."""
    submissions = store.submissions(run_id)
    latest = {(row.session_id, row.method_id): row for row in submissions}  # in id order: the later one replaces
    counted = Counter((c.session_id, c.method_id) for c in store.calls(run_id) if c.counted)
    methods = tuple(
        MethodScores(
            method_id=row.method_id,
            state="done",
            scores=_latest_scores(store.scores(row.id)),
            queries=counted.get(key, 0),
        )  # fmt: skip
        for key, row in latest.items()
    )
    return methods, len(submissions) - len(latest)


def is_failure(method: MethodScores, unscored_as_one: bool = False, run: RunData | None = None) -> str | None:
    """Why an episode counts as failed, or None if it did not fail (or has not finished).

    Args:
        method: The episode.
        unscored_as_one: The report's unscored rule: an unscored judge reply counts as 1 only under it.
        run: The episode's run, whose protocol counts its scores (``RunData.counted``): under the reference's,
            an unscored judge reply counts as 1 and a score that could not be made as the worst, so such an
            episode failed.
    """
    if method.state == "failed":
        return f"the episode ended in an error ({_clip(method.error or 'no message', 300)})"
    if run is not None:
        judge, codematch = run.counted(method, "judge", unscored_as_one), run.counted(method, "codematch")
    else:
        judge, codematch = method.judge(unscored_as_one), method.codematch()
    reasons = []
    if judge is not None and judge < 3:
        reasons.append(f"the description was rated {judge:g} out of 5")
    if codematch is not None and codematch < 0.8:
        reasons.append(f"code written from it matched {codematch:.0%} of the tests")
    return " and ".join(reasons) or None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
