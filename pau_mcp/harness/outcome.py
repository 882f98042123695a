"""What a finished evaluation run comes to, in the lines a command prints: this invocation and the whole run as stored,
its means and costs as the report computes them, its conduct, the models without a price, whether the model's score
is fresh, and the epochs of an ``eval --epochs`` group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import Settings
from .configuration import EvalConfig
from .runner import RunProgress

if TYPE_CHECKING:
    from ..reports import RunSummary
    from ..reports.stats import ScoreStats

__all__ = ["epoch_lines", "freshness_note", "score_errors", "summary", "unpriced_note"]


def epoch_lines(settings: Settings, group: str) -> list[str]:
    """What the epochs of ``group`` add up to, as the report computes it: pass@k and pass^k, each epoch's mean with
    its 95% interval, and outcome consistency."""
    from ..reports import ReportError, build_report, load_runs
    from ..runstore import RunStore, StoreError

    try:
        store = RunStore(settings.db_path)
    except StoreError:
        return []
    try:
        found = build_report(load_runs(store, [group])).epochs
    except (ReportError, StoreError):
        return []
    finally:
        store.close()
    lines = []
    for epochs in found:
        score = "code match" if epochs.kind == "codematch" else "direct code"
        rates = ", ".join(
            f"pass@{k} {at:.3f} pass^{k} {hat:.3f}"
            for k, (at, hat) in enumerate(zip(epochs.pass_at, epochs.pass_hat, strict=True), start=1)
        )
        consistency = "n/a" if epochs.consistency is None else f"{epochs.consistency:.0%}"
        lines.append(
            f"epochs of {epochs.group}: {len(epochs.epochs)} epochs over {epochs.methods} methods, passing at {score} >= "
            f"{epochs.threshold:g}: {rates}; outcome consistency {consistency}"
        )
        for epoch in epochs.epochs:
            i = epoch.interval
            shown = "n/a" if i.low is None or i.high is None else f"{i.mean:.3f} [95% CI {i.low:.3f}, {i.high:.3f}]"
            lines.append(f"  epoch {epoch.index} ({epoch.run}, seed {epoch.seed}): mean {score} {shown}, n={i.n}")
    return lines


def score_errors(progress: RunProgress) -> list[str]:
    """The run's scores that could not be made, one line each: the method, the score's name, the reason."""
    whole = progress.whole
    if whole is None:
        return []
    return [f"{method_id} {kind}: {' '.join(reason.split())}" for method_id, kind, reason in whole.score_errors]


def summary(settings: Settings, config: EvalConfig, progress: RunProgress, on_ray: bool = False) -> list[str]:
    """The lines that end a run's output: what this invocation did, then the whole run as stored.

    The means and the agent's tokens and cost are the ones `pau-mcp report RUN` gives (the report's own
    summary of the run); what scoring spent is counted apart, and models without a price are named.
    """
    whole = progress.whole
    now = f"{progress.done} episodes finished now, {progress.skipped} earlier, {progress.failed} failed now"
    if whole is not None:
        unfinished = f", {whole.unfinished} unfinished" if whole.unfinished else ""
        errors = len(whole.score_errors)
        unscored = f", {errors} score{'s' * (errors != 1)} could not be made" if errors else ""
        now += f"; whole run: {whole.episodes} episodes, {whole.done} done, {whole.failed} failed{unfinished}{unscored}"
    reported = _reported(settings, config.run)
    answers = whole.answers if whole is not None else progress.answers
    if answers:
        correct = sum(1 for a in answers if a >= 1)
        means = f"task accuracy {correct / len(answers):.3f} ({correct} of {len(answers)} correct)"
    elif reported is None:
        means = "mean scores n/a"
    else:
        means = ", ".join(
            f"mean {title} {_mean(kind, reported.scores[kind])}"
            for kind, title in (("judge", "judge"), ("codematch", "code match"), ("direct", "direct code"))
        )
    if reported is None:  # the run ended before its totals were read: this invocation's live totals
        spent = (
            f"{progress.input_tokens + progress.output_tokens:,} tokens, ${progress.cost_usd:.4f} (scoring included)"
        )
    else:
        tokens = reported.input_tokens + reported.output_tokens
        spent = f"agent {tokens:,} tokens, ${reported.cost_usd:.4f}"
        if whole is not None and (whole.scoring_tokens or whole.scoring_cost_usd):
            spent += f"; scoring {whole.scoring_tokens:,} tokens, ${whole.scoring_cost_usd:.4f}"
    lines = [f"run {config.run}: {now}; {means}; {spent}"]
    lines += _conduct(config, reported)
    if on_ray:
        lines.append(
            f"on Ray: episodes played by {progress.workers} worker{'' if progress.workers == 1 else 's'}; "
            f"{progress.rerun} re-run after a lost worker"
        )
    used: list[str | None] = [config.model] if config.agent != "probe" else []
    if config.score:
        used += [settings.judge_model if "judge" in config.kinds else None]
        used += [settings.coder_model if "codematch" in config.kinds else None]
    lines += unpriced_note(settings, used)
    lines += freshness_note(settings, config)
    return lines


def freshness_note(settings: Settings, config: EvalConfig) -> list[str]:
    """Whether the model's score on this suite is fresh (``pau_mcp.freshness``), as one line; none for the probe."""
    from ..freshness import assess_freshness, freshness_line
    from ..llm import CapabilityTable, LLMNotConfigured
    from ..manifests import ManifestError, ManifestStore

    if config.agent == "probe" or not config.model:
        return []
    try:
        info = ManifestStore(settings.manifests).suite(config.suite).info
        dates = CapabilityTable.load(settings.model_capabilities).dates(config.model)
    except (ManifestError, LLMNotConfigured):
        return []
    return [freshness_line(config.model, config.suite, assess_freshness(info, config.model, dates))]


def _conduct(config: EvalConfig, reported: RunSummary | None) -> list[str]:
    """The run's malformed actions, invalid arguments, refusals and zero-query episodes, zeros included; a run meant
    to query whose every done episode made none gets one line saying so."""
    from ..reports.conduct import conduct_counts

    if reported is None or not reported.conduct.episodes or config.mode == "tasks":
        return []
    conduct = reported.conduct
    lines = [f"conduct: {conduct_counts(conduct)}"]
    if conduct.every_episode_without_query:
        lines.append(
            f"every episode of run {config.run} made zero queries: its descriptions were written without a single call "
            "of the function (see the malformed actions above and `pau-mcp report " + config.run + "`)"
        )
    return lines


def _mean(kind: str, stats: ScoreStats) -> str:
    """A mean as the report prints it (two decimals for the judge's 1-5 scale, three for fractions), n/a for none."""
    if not stats.n:
        return "n/a"
    return f"{stats.mean:.2f}" if kind == "judge" else f"{stats.mean:.3f}"


def _reported(settings: Settings, run: str) -> RunSummary | None:
    """The report's summary of one run (``RunSummary``), or None when the store cannot give it."""
    from ..reports import ReportError, build_report, load_runs
    from ..runstore import RunStore, StoreError

    try:
        store = RunStore(settings.db_path)
    except StoreError:
        return None
    try:
        return build_report(load_runs(store, [run])).summaries[0]
    except (ReportError, StoreError):
        return None
    finally:
        store.close()


def unpriced_note(settings: Settings, models: Sequence[str | None]) -> list[str]:
    """A line naming the models used that ``pricing.json`` (or ``--pricing``) has no price for, if any."""
    from ..llm import LLMNotConfigured, Pricing

    try:
        pricing = Pricing.load(settings.pricing)
    except LLMNotConfigured:
        return []
    missing = sorted({m for m in models if m and pricing.price(m) is None})
    if not missing:
        return []
    return [
        f"no price for {', '.join(missing)}: counted as $0 above (add a price to a copy of pricing.json and pass "
        "--pricing / PAU_MCP_PRICING; a local model may be priced at 0)"
    ]
