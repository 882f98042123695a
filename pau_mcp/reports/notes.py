"""The notes under a report: what a reader must know to read its numbers (rules, runs left out, what a table
means), one sentence each, written from the ``Report`` alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .conduct import conduct_line

if TYPE_CHECKING:
    from .data import RunData
    from .report import Report, RunSummary

__all__ = ["notes"]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("s" if number != 1 else "")


def _episodes(count: int) -> str:
    return _count(count, "episode")


def notes(report: Report) -> list[str]:
    """The notes of a report, in the order a reader needs them."""
    if not report.runs:
        return []
    notes = [report.unscored_rule]
    _protocol_notes(report, notes)
    for run, s in zip(report.runs, report.summaries, strict=True):
        _run_notes(run, s, notes)
    _table_notes(report, notes)
    _analysis_notes(report, notes)
    return notes


def _protocol_notes(report: Report, notes: list[str]) -> None:
    """Which runs followed the reference protocol, and whether the runs' protocols differ."""
    reference = [s.name for s in report.summaries if s.protocol == "reference"]
    if reference:
        notes.append(
            f"{'Runs' if len(reference) > 1 else 'Run'} {', '.join(reference)} followed the reference protocol "
            "(docs/protocol.md): unscored judge replies count as 1, failed episodes and scores that could not be made "
            "count as judge 1 and code match 0 (and so fail, for the failure modes), standard deviations are the "
            "sample's (ddof=1), and two such runs are compared by their resampled means exactly (a float-noise "
            "difference is a win)."
        )
    if len({s.protocol for s in report.summaries}) > 1:
        notes.append(
            "These runs followed different protocols (see the protocol column): their numbers were made by different "
            "prompts and rules, so differences between them are not only the models'."
        )


def _run_notes(run: RunData, s: RunSummary, notes: list[str]) -> None:
    """What a run leaves out or lacks: episodes unfinished, failed or undescribed, scores not made yet."""
    if not run.episodes:
        made = f"a {run.kind} run" if run.kind else "a run"
        if not run.methods:
            notes.append(f"Run {s.name} ({made}) has no episodes and no submissions yet: there is nothing to report.")
            return
        notes.append(
            f"Run {s.name} ({made}) has no episodes: its {_count(s.planned, 'submission')} "
            f"{'is' if s.planned == 1 else 'are'} reported, the latest per session and method."
        )
        if run.replaced:
            notes.append(
                f"Run {s.name}: {_count(run.replaced, 'earlier submission')} replaced by a later one in the same "
                "session left out."
            )
    elif s.done == 0:
        notes.append(f"Run {s.name} has no finished episodes: it has no scores yet (n/a).")
    if s.unfinished:
        notes.append(
            f"Run {s.name}: {s.unfinished} of {_episodes(s.planned)} not finished (pending or running) and left out."
        )
    if s.failed:
        notes.append(f"Run {s.name}: {_episodes(s.failed)} failed with an error and left out of the scores.")
    if (line := conduct_line(s.name, s.conduct)) is not None:
        notes.append(line)
    if s.undescribed:
        notes.append(
            f"Run {s.name}: {_episodes(s.undescribed)} ended without a description (the agent gave none, or only "
            "JSON or a tool call where prose belongs): nothing was submitted, so there is nothing to score."
        )
    if run.kind == "rl":
        notes.append(
            f"Run {s.name} is an RL rollout: its episodes are scored by their returns (the RL returns table), not "
            "by `pau-mcp score`; `pau-mcp rl rollout` writes their steps and rewards."
        )
        return
    scored = any(m.scores for m in run.methods if m.done)
    if any(m.done and m.described for m in run.methods) and not scored:
        notes.append(
            f"Run {s.name} has no scores yet: score it with `pau-mcp score {s.name}` and --judge-model and "
            f"--coder-model, or, with no model, score the code it submitted: `pau-mcp score {s.name} --scores direct`."
        )


def _table_notes(report: Report, notes: list[str]) -> None:
    """How the score tables compare runs: suites, Max, pairs left out, methods counted once per session."""
    if not report.kinds and not report.tasks and not report.knowledge:
        notes.append("No score of any kind is recorded in these runs, so there are no score tables.")
    suites = {s.suite for s in report.summaries}
    if len(suites) > 1:
        shown = ", ".join(sorted(x or "(unrecorded)" for x in suites))
        notes.append(
            f"The runs come from different suites ({shown}): pairwise statistics use only methods scored in both runs (n)."
        )
    if report.max_stats is not None and report.kinds:
        notes.append(
            f"Max: for each method the best score over the {len(report.runs)} runs, then mean and distribution over the methods "
            f"scored in at least one run ({report.max_methods} methods; n per score in the tables)."
        )
    for pair in report.pairs:
        if not any(test.n for test in pair.tests.values()):
            notes.append(f"Runs {pair.a} and {pair.b} have no method scored in both: they are not compared.")
    if any(not run.episodes and len({m.method_id for m in run.methods}) < len(run.methods) for run in report.runs):
        notes.append(
            "A method submitted in several sessions of one run counts once per session in that run's numbers, "
            "once (its mean) in the pairwise tests and once (its best) in Max."
        )


def _analysis_notes(report: Report, notes: list[str]) -> None:
    """What each of the paper's analyses shown means, and how the tests were drawn."""
    if report.correlations:
        notes.append(
            "Rank correlation: Spearman's rho of two runs' per-method scores over the methods both scored (ties share "
            "their mean rank); n/a when one run gives every method the same score."
        )
    if report.contradictions:
        notes.append(
            "Self-contradiction: the code written from an episode's description is run on the inputs its agent "
            "observed; the episode contradicts itself when that code disagrees with what the function did there."
        )
        unsolved = [c.run for c in report.contradictions if c.among == "unsolved"]
        if unsolved:
            notes.append(
                f"Self-contradiction of {', '.join(unsolved)} (reference protocol): among the checked episodes that "
                "failed (judge below 3 or code match below 0.8, as the protocol counts them), as the paper counts "
                "it among the functions not solved."
            )

    if report.coverage:
        notes.append(
            "Coverage: per episode, the share of the lines (branches) of the hidden function that its hidden tests "
            "execute which the agent's own calls also executed (pau-mcp coverage; operator only); rho is Spearman's "
            "between line coverage and the score, 'full' the episodes whose calls ran every such line."
        )
    elif any(run.episodes for run in report.runs):
        notes.append("No exploration coverage is measured for these runs: `pau-mcp coverage RUN` measures it.")
    if report.upper_bounds:
        notes.append(
            "Upper bound: code match of the gold descriptions (pau-mcp score --gold) on the same methods, by the same "
            "code writer; the ratio is the run's share of it."
        )
    if report.variants:
        notes.append(
            "Originals against variants: per model, the methods of a suite made with `pau-mcp create --variants-of` "
            "paired with the methods they were made from, both scored by that model; a drop that the paired bootstrap "
            "calls significant (p(orig>var) small) is evidence that the originals' answers were remembered."
        )
    if report.modes and report.kinds:
        notes.append(
            f"In the interactive against in-context comparison, * marks a difference with p < {report.significance:g}."
        )
    if report.pairs and report.kinds:
        notes.append(
            f"Paired bootstrap: {report.resamples} resamples, each drawing half of the common methods with replacement, seed {report.seed}; "
            "p(A>B) = 1 - share of resamples in which A's mean beats B's."
        )
