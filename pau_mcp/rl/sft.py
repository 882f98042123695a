"""The paper's SFT baselines as data: chat datasets from recorded runs, in the format TRL's SFTTrainer reads.

Three kinds (the paper's Table 4):

* ``distill``: a teacher's trajectories, kept when the episode's outcome was
  good: every step the teacher took becomes one example (the prompt it saw,
  the reply it gave). From ``pau-mcp eval`` runs of the paper agent or from
  ``pau-mcp rl rollout`` runs. With ``step_filter="reference"`` (runs under
  ``--protocol reference``), the reference's own rule instead, as its RL
  warm-up data was made: every episode, and each step kept or dropped by
  ``reference_step_kept``.
* ``final``: final answers only: for every method of the run, the method's
  header and initial examples, answered with its gold description (for a run
  under the reference protocol, its in-context prompt: the dataset's
  ``direct_prompt``, which its FT baseline trained on).
* ``answer-aware``: trajectories of a teacher that was told the answer
  (``pau-mcp rl rollout --answer-aware``, CodeARC-SFT style), with prompts as
  the student sees them: the answer never appears in an example's prompt.

Each example is one JSON line ``{"messages": [{"role": ..., "content": ...}, ...]}``
in ``DIR/train.jsonl``, which ``datasets.load_dataset("json",
data_files="DIR/train.jsonl")`` and ``load_dataset("DIR")`` both read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..manifests import ManifestError, ManifestStore, Method, call_arguments, call_text
from ..prompts import PromptSet, load_prompts
from ..protocol import cut_at_stop, load_protocol, protocol_of, reference_example, results_list
from ..runstore import EpisodeRow, RunStore
from . import prompts
from .rewards import word_count

__all__ = [
    "FILTERS",
    "KINDS",
    "ExportError",
    "ExportReport",
    "episode_outcome",
    "export_sft",
    "final_prompt",
    "reference_final_prompt",
    "reference_step_kept",
]

#: The dataset kinds ``export_sft`` writes.
KINDS = ("distill", "final", "answer-aware")
#: How ``distill`` chooses: ``outcome`` (this project's: whole episodes whose outcome reaches ``min_score``) or
#: ``reference`` (the reference's warm-up rule: every episode, step by step, ``reference_step_kept``).
FILTERS = ("outcome", "reference")
#: The reference keeps a reasoning or reflection reply shorter than this many words.
_REFERENCE_MAX_WORDS = 250


class ExportError(ValueError):
    """The run cannot give this kind of dataset; the message says why and what would."""


@dataclass
class ExportReport:
    """What an export wrote.

    Attributes:
        path: The ``train.jsonl`` file.
        examples: Examples written.
        episodes: Episodes used.
        skipped: Episodes left out, by reason.
    """

    path: Path
    examples: int = 0
    episodes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        """Count an episode left out."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def episode_outcome(episode: EpisodeRow) -> float | None:
    """How good an episode's result was, from 0 to 1, or None when nothing rated it.

    An evaluation episode: the judge's rating mapped from 1..5 to 0..1, else its code-match fraction, else its
    direct-code fraction. A rollout episode: its terminal code-match fraction when there is one, else the
    critic's last rating of the hypothesis divided by 9.
    """
    scores = episode.scores
    judge = scores["judge"].value if "judge" in scores else None
    if judge is not None:
        return (float(judge) - 1) / 4
    for kind in ("codematch", "direct"):
        value = scores[kind].value if kind in scores else None
        if value is not None:
            return float(value)
    steps = [s for s in (episode.trajectory or []) if s.get("phase")]
    for step in reversed(steps):
        if step.get("code_match") is not None:
            return float(step["code_match"])
    for step in reversed(steps):
        critic = step.get("critic") or {}
        if step.get("phase") == "reflect" and critic.get("score") is not None:
            return float(critic["score"]) / 9
    return None


def final_prompt(method: Method) -> str:
    """The final-answer task: the header and the initial examples, and a request for the description."""
    examples = "\n".join(
        f"  {call_text(method.entry, case.input)} -> {case.outcome.shown() if case.outcome else '(not frozen)'}"
        for case in method.examples
    )
    return load_prompts().render("rl_final", header=method.header, examples=examples or "  (none)")


def reference_final_prompt(method: Method, reference: PromptSet) -> str:
    """The reference's in-context prompt for a method (its dataset's ``direct_prompt``): its header and initial
    examples as the dataset writes them, with the imported wording."""
    shown = []
    for case in method.examples:
        if case.outcome is None:
            continue
        literal = call_arguments(call_text(method.entry, case.input)) or case.input
        shown.append(reference_example(literal, case.outcome.shown(), case.original).shown)
    return reference.render("incontext", header=method.header, prev=results_list(shown))


def reference_step_kept(step: str, reply: str, failed_call: bool) -> tuple[bool, str]:
    """Whether the reference's warm-up data keeps one step of its loop, and the reply as it records it.

    Its rule (``baselines.py``, the ``create`` command): a reasoning reply, cut at ``[STOP]``, shorter than 250
    words; a reflection shorter than 250 words with exactly one ``summary:``; an action whose call gave an error
    (its code marks an action good when the error is set: a call that failed, or an input that was not a
    literal). Each reply is recorded cut at ``[STOP]`` (the reference's client cuts every reply there; runs
    recorded before replies were stored cut still hold the rest) with a line ``[STOP]`` after it.

    Args:
        step: ``reason``, ``act`` or ``reflect``.
        reply: The model's reply.
        failed_call: For an action: its call did not return a value.
    """
    text = cut_at_stop(reply)
    if step == "reason":
        return word_count(text) < _REFERENCE_MAX_WORDS, text + "\n[STOP]"
    if step == "act":
        return failed_call, text + "\n[STOP]"
    kept = word_count(text) < _REFERENCE_MAX_WORDS and text.lower().count("summary:") == 1
    return kept, text + "\n[STOP]"


def _reference_steps(episode: EpisodeRow) -> Iterator[list[dict[str, str]]]:
    """A reference-protocol episode's steps that the reference's rule keeps, as its prompts alone (no system)."""
    trajectory = episode.trajectory or []
    for index, step in enumerate(trajectory):
        kind = step.get("step")
        if step.get("kind") != "model" or kind not in ("reason", "act", "reflect") or not step.get("prompt"):
            continue
        failed = False
        if kind == "act":
            after = []
            for later in trajectory[index + 1 :]:
                if later.get("kind") == "model":
                    break
                after.append(later)
            if any(s.get("kind") == "note" and s.get("event") == "malformed_action" for s in after):
                failed = True  # no input could be read: the reference records an error for it
            else:
                results = [s for s in after if s.get("kind") == "tool_result"]
                status = str(((results[0].get("structured") or {}) if results else {}).get("status", ""))
                if status in ("", "over_budget"):
                    continue  # a call the server refused for the budget: the reference's loop has no such step
                failed = status != "ok"
        kept, reply = reference_step_kept(kind, step.get("reply") or "", failed)
        if kept:
            yield [{"role": "user", "content": step["prompt"]}, {"role": "assistant", "content": reply}]


def _steps(config: dict[str, Any], episode: EpisodeRow) -> Iterator[list[dict[str, str]]]:
    trajectory = episode.trajectory or []
    if config.get("kind") == "rl":
        for step in trajectory:
            if step.get("phase") and step.get("observation"):
                yield [
                    {"role": "system", "content": prompts.SYSTEM},
                    {"role": "user", "content": step["observation"]},
                    {"role": "assistant", "content": step["action"]},
                ]
        return
    reference = protocol_of(config) == "reference"
    for step in trajectory:
        if step.get("kind") == "model" and step.get("prompt"):
            if reference:  # the reference sends each prompt alone, as one user message
                yield [
                    {"role": "user", "content": step["prompt"]},
                    {"role": "assistant", "content": step.get("reply") or ""},
                ]
                continue
            yield [
                # The harness's agents' system prompt: runs store only the user prompts.
                {"role": "system", "content": load_prompts().text("agent_system")},
                {"role": "user", "content": step["prompt"]},
                {"role": "assistant", "content": step.get("reply") or ""},
            ]


def _check(kind: str, run: str, config: dict[str, Any], step_filter: str = "outcome") -> None:
    rollout = config.get("kind") == "rl"
    aware = bool(config.get("answer_aware"))
    loop = protocol_of(config) == "reference" and not rollout and config.get("mode") in (None, "interactive")
    if step_filter == "reference" and kind == "distill" and not loop:
        raise ExportError(
            f"run {run!r} is not an interactive run of the paper agent under the reference protocol; the "
            "reference's warm-up rule reads that loop's steps: record one with `pau-mcp eval --protocol "
            "reference`, or export this run with --filter outcome"
        )
    if kind == "answer-aware" and not aware:
        raise ExportError(
            f"run {run!r} was not answer-aware; record one with `pau-mcp rl rollout --answer-aware` and export that"
        )
    if kind == "distill" and aware:
        raise ExportError(
            f"run {run!r} is answer-aware (its teacher knew the answer); export it with --kind answer-aware"
        )
    if kind == "distill" and not rollout and config.get("agent") not in (None, "paper"):
        raise ExportError(
            f"run {run!r} used the {config.get('agent')} agent, whose trajectories record no prompts; distil from a "
            "run of the paper agent (`pau-mcp eval --agent paper`) or from `pau-mcp rl rollout`"
        )


def export_sft(
    store: RunStore,
    manifests: ManifestStore,
    runs: list[str],
    kind: str,
    directory: Path,
    min_score: float = 0.75,
    *,
    step_filter: str = "outcome",
    data_dir: Path | None = None,
) -> ExportReport:
    """Write one SFT dataset from one or more recorded runs.

    Args:
        store: The run store.
        manifests: Where the methods (and, for ``final``, their gold descriptions) come from.
        runs: Run names.
        kind: ``distill``, ``final`` or ``answer-aware``.
        directory: Where ``train.jsonl`` goes (created).
        min_score: Keep trajectories whose outcome (``episode_outcome``) is at least this (0 keeps every
            finished episode); ``final`` and the reference's filter ignore it.
        step_filter: ``outcome`` (``min_score``) or ``reference`` (for ``distill`` of runs under the reference
            protocol: the reference's warm-up rule, ``reference_step_kept``).
        data_dir: Where the reference's imported prompts are (``final`` of a run under the reference protocol).

    Raises:
        ExportError: an unknown kind, a run that cannot give this kind, or nothing to write.
        StoreError: an unknown run.
    """
    if kind not in KINDS:
        raise ExportError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    if step_filter not in FILTERS:
        raise ExportError(f"unknown filter {step_filter!r}; choose from {', '.join(FILTERS)}")
    reference_prompts: PromptSet | None = None
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "train.jsonl"
    report = ExportReport(path=target)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    seen_methods: set[str] = set()
    with temporary.open("w", encoding="utf-8") as handle:
        for run in runs:
            run_id = store.run_id(run)
            config = store.run_config(run_id)
            _check(kind, run, config, step_filter)
            reference = protocol_of(config) == "reference"
            if reference and kind == "final" and reference_prompts is None:
                reference_prompts = load_protocol("reference", data_dir).prompts
            for episode in store.episodes(run_id, with_trajectories=kind != "final"):
                if episode.state != "done":
                    report.skip("not finished")
                    continue
                if kind == "final":
                    if episode.method_id in seen_methods:
                        report.skip("method already exported")
                        continue
                    try:
                        method = manifests.method(episode.method_id)
                    except ManifestError:
                        report.skip("method not in the manifests")
                        continue
                    seen_methods.add(method.id)
                    if reference_prompts is not None and reference:
                        # The reference's FT baseline: its in-context prompt alone, answered with the description.
                        messages = [
                            {"role": "user", "content": reference_final_prompt(method, reference_prompts)},
                            {"role": "assistant", "content": method.description},
                        ]
                    else:
                        messages = [
                            {"role": "system", "content": prompts.SYSTEM},
                            {"role": "user", "content": final_prompt(method)},
                            {"role": "assistant", "content": method.description},
                        ]
                    handle.write(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
                    report.examples += 1
                    report.episodes += 1
                    continue
                outcome = episode_outcome(episode)
                if step_filter == "outcome" and min_score > 0 and (outcome is None or outcome < min_score):
                    report.skip("unrated" if outcome is None else "outcome below --min-score")
                    continue
                written = 0
                chosen = _reference_steps(episode) if step_filter == "reference" else _steps(config, episode)
                for messages in chosen:
                    handle.write(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
                    written += 1
                if written:
                    report.episodes += 1
                    report.examples += written
                else:
                    report.skip("no recorded prompts")
    if not report.examples:
        temporary.unlink(missing_ok=True)
        reasons = ", ".join(f"{n} {why}" for why, n in report.skipped.items()) or "no episodes"
        raise ExportError(
            f"nothing to export from {', '.join(runs)} ({reasons}); lower --min-score or record more runs"
        )
    temporary.replace(target)
    return report
