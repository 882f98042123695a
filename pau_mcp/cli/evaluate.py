"""``pau-mcp eval`` (whole runs) and ``pau-mcp demo`` (one method, no network, no LLM)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from .. import eventloop
from ..config import options
from .common import (
    CommandFunction,
    err,
    make_sandbox,
    manifest_store,
    run_bar,
    settings_from,
    show_llm_notices,
    step_printer,
)

if TYPE_CHECKING:
    from ..config import Settings
    from ..distributed import Cluster
    from ..harness.configuration import EvalConfig
    from ..harness.runner import RunProgress
    from ..llm import LLMClient, Overrides
    from ..reports import RunSummary
    from ..reports.stats import ScoreStats

__all__ = [
    "check_configs", "check_models", "connect_cluster", "demo", "epoch_lines", "evaluate", "execute",
    "freshness_note", "overrides_of", "ray_options", "replayed", "score_errors", "score_kinds", "summary",
    "unpriced_note",
]  # fmt: skip

_EVAL_SETTINGS = (
    "manifests", "budget", "db", "data_dir", "tool_key", "token", "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb",
    "llm_concurrency", "llm_retries", "timeout_s", "memory_mb", "max_output_kb", "max_argument_kb", "cache_dir",
    "workers", "sandbox_engine", "model_capabilities", "temperature", "max_tokens", "reasoning_effort", "protocol", "mcp_era", "examples",
)  # fmt: skip


def ray_options(command: CommandFunction) -> CommandFunction:
    """The ``--ray`` and ``--ray-workers`` options of the commands that can spread episodes over a cluster."""
    command = click.option(
        "--ray-workers",
        type=click.IntRange(1, 4096),
        help="Episode workers on the Ray cluster, each holding one CPU (default: one per node with a CPU).",
    )(command)
    return click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="auto",
        default=None,
        metavar="[ADDRESS]",
        help="Spread episodes over a Ray cluster: its ADDRESS (host:port, ray://host:10001); alone, RAY_ADDRESS or "
        "the cluster started on this machine; `local`, a cluster of this machine for this command "
        "(pip install 'pau-mcp[ray]'; docs/scaling.md).",
    )(command)


def connect_cluster(address: str | None, workers: int | None) -> Cluster | None:
    """The Ray cluster ``--ray`` names, or None without ``--ray``; a cluster that cannot be used ends the command."""
    if address is None:
        if workers is not None:
            raise click.UsageError("--ray-workers needs --ray")
        return None
    from ..distributed import ClusterError, RayOptions, connect

    try:
        cluster = connect(RayOptions(address=address, workers=workers))
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    err.print(f"Ray cluster: {cluster.nodes} node(s) with CPUs; {cluster.workers} episode worker(s) per run")
    return cluster


@click.command("eval")
@click.option("--model", default="", help="The agent's model, provider/model (not needed for --agent probe).")
@click.option("--suite", default="builtin", show_default=True, help="Suite to evaluate.")
@click.option(
    "--agent",
    type=click.Choice(["paper", "tools", "probe", "observer"]),
    default="paper",
    show_default=True,
    help="paper: reason/act/reflect loop; tools: native function calling; probe: no LLM (the floor); observer: "
    "checks its own description by running code written from it (--coder-model, else --model) beside the hidden "
    "function on fresh inputs, and revises until they agree.",
)
@click.option(
    "--mode",
    type=click.Choice(["interactive", "incontext", "tasks"]),
    default="interactive",
    show_default=True,
    help="interactive: the agent queries the function; incontext: the initial examples only; tasks: the agent "
    "answers the suite's tasks with its tools (native tool calling), documented as --docs says.",
)
@click.option(
    "--docs",
    default="examples",
    show_default=True,
    metavar="SOURCE",
    help="With --mode tasks, what the tools are documented with: examples (header and initial examples), none "
    "(header only), a run name or a file from `pau-mcp export docs` (an explorer's final descriptions), or gold "
    "(the gold descriptions; only when you ask).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 4096),
    default=4,
    show_default=True,
    help="Episodes at once (with --ray, over the whole cluster).",
)
@click.option("--limit", type=click.IntRange(0), default=0, help="Only the first K methods (0: all).")
@click.option("--methods", "method_ids", multiple=True, help="Only these method ids (repeatable).")
@click.option("--run", "run_name", help="Run name; the same name (or the same options) resumes a run.")
@click.option(
    "--server",
    help="Use a running `pau-mcp serve --transport http` at this URL (its token from --token, its tool key from "
    "--tool-key or the same --data-dir).",
)
@click.option("--no-score", is_flag=True, help="Only explore and submit; score later with `pau-mcp score RUN`.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option(
    "--share-samples",
    is_flag=True,
    help="Replay the agent's replies sampled at a temperature above 0 from the LLM cache across runs (default: "
    "only within the run that sampled them).",
)
@click.option(
    "--replay",
    "replay",
    metavar="RUN",
    help="Play the finished run RUN again from its recorded model replies and tool results (no model is asked, no "
    "hidden function runs), score it again, and say whether every score is identical, or where it first differs.",
)
@click.option(
    "--epochs",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Run each method this many times, each epoch a run of its own (NAME-epoch1, ...) with its own sampling seed; "
    "its replies are never replayed in another epoch. The report of NAME gives pass@k, pass^k and consistency.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="With --epochs: the sampling seed of the first epoch (epoch k gets SEED+k-1), sent where the provider takes one.",
)
@click.option(
    "--retry-failed/--keep-failed",
    default=True,
    show_default=True,
    help="Re-running a run plays its failed episodes again; --keep-failed leaves them failed.",
)
@ray_options
@options(*_EVAL_SETTINGS)
def evaluate(model: str, suite: str, agent: str, mode: str, docs: str, concurrency: int, limit: int,
             method_ids: tuple[str, ...], run_name: str | None, server: str | None, no_score: bool, no_cache: bool,
             share_samples: bool, replay: str | None, epochs: int, seed: int, retry_failed: bool,
             ray_address: str | None,
             ray_workers: int | None, **values: object) -> None:  # fmt: skip
    """Run an agent over a suite through the MCP server, submit, score, and store every trajectory.

    Killing it (even with kill -9) and running the same command again finishes the run: no episode is lost or done twice.
    With --ray, Ray workers run the episodes (each with its own server and sandbox) and this process alone writes
    the run store; an episode whose worker dies runs again on another one, and is recorded once.
    """
    from ..harness.configuration import EvalConfig
    from ..harness.runner import run_name as default_name

    settings = settings_from(values)
    show_llm_notices()
    if replay is not None:
        sys.exit(0 if replayed(settings, replay) else 1)
    if ray_address is not None and server:
        raise click.UsageError("--server and --ray do not mix: each Ray worker starts its own server; drop one")
    if mode == "tasks":
        if (
            click.get_current_context().get_parameter_source("agent") is ParameterSource.COMMANDLINE
            and agent != "tools"
        ):
            raise click.UsageError(
                "--mode tasks is answered by native tool calling (the tools agent): leave --agent out"
            )
        agent = "tools"
    elif docs != "examples":
        raise click.UsageError("--docs documents the tools for --mode tasks; add --mode tasks")
    name = run_name or default_name(suite, agent, mode if mode != "tasks" else f"tasks-{docs}", model)
    config = EvalConfig(
        run=name, model=model, suite=suite, agent=agent, mode=mode,
        budget=settings.budget, concurrency=concurrency, limit=limit, methods=tuple(method_ids), server=server,
        score=not no_score, kinds=score_kinds(settings), retry_failed=retry_failed, overrides=overrides_of(settings),
        protocol=settings.protocol, cache=not no_cache, share_samples=share_samples, examples=settings.examples, docs=docs,
    )  # fmt: skip
    configs = _epochs(config, epochs, seed)
    check_configs(configs)
    _check_suite(settings, config)
    check_models(settings, configs)
    cluster = connect_cluster(ray_address, ray_workers)
    troubled = False
    try:
        for one in configs:
            progress = execute(settings, one, no_cache=no_cache, cluster=cluster, note=one is configs[0])
            troubled |= _ended(settings, one, progress, retry_failed, on_ray=cluster is not None)
    finally:
        if cluster is not None:
            cluster.close()
    if len(configs) > 1:
        for line in epoch_lines(settings, config.run):
            click.echo(line)
    click.echo(f"see `pau-mcp report {config.run}`")
    if troubled:
        sys.exit(1)


def replayed(settings: Settings, run: str) -> bool:
    """Replay ``run`` from its record (``harness.replay``) and print the verdict; True when every score is identical."""
    from ..harness.configuration import EvalError
    from ..harness.replay import replay_run
    from ..scoring import Scorer

    say = step_printer()
    say(f"replaying run {run} from its recorded replies and tool results")
    scorer = Scorer.from_settings(settings, progress=say)

    async def main() -> object:
        try:
            return await replay_run(settings, run, scorer)
        finally:
            await scorer.aclose()

    try:
        result = eventloop.run(main)
    except EvalError as exc:
        raise click.ClickException(str(exc)) from None
    from ..harness.replay import ReplayResult

    assert isinstance(result, ReplayResult)
    for method, why in result.skipped:
        err.print(f"not replayed: {method} ({why})")
    if result.identical:
        click.echo(
            f"replay of {run}: identical: {result.episodes} episodes played again step for step, all "
            f"{result.scores} scores the same"
        )
        return True
    first = result.differences[0]
    where = f"step {first.step}" if first.step is not None else "its scores"
    click.echo(
        f"replay of {run}: differs in {len(result.differences)} of {result.episodes} episodes; first in "
        f"{first.method_id} at {where}: {first.what}"
    )
    for other in result.differences[1:10]:
        shown = f"step {other.step}" if other.step is not None else "its scores"
        click.echo(f"  also {other.method_id} at {shown}: {other.what}")
    return False


def _epochs(config: EvalConfig, epochs: int, seed: int) -> list[EvalConfig]:
    """The runs to play: ``config`` alone, or its epochs."""
    if epochs == 1:
        return [config]
    from ..harness.configuration import EvalError
    from ..harness.epochs import epoch_configs

    try:
        return epoch_configs(config, epochs, seed)
    except EvalError as exc:
        raise click.UsageError(str(exc)) from None


def _ended(settings: Settings, config: EvalConfig, progress: RunProgress, retry_failed: bool, on_ray: bool) -> bool:
    """Print how one run ended (its summary, failed episodes, scores not made); True when any failed."""
    for line in summary(settings, config, progress, on_ray=on_ray):
        click.echo(line)
    for line in progress.errors[:10]:
        err.print(f"[red]failed[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if len(progress.errors) > 10:
        err.print(f"[red]failed[/red] ... and {len(progress.errors) - 10} more (`pau-mcp report {config.run}`)")
    unscored = score_errors(progress)
    for line in unscored[:10]:
        err.print(f"[red]score error[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if len(unscored) > 10:
        err.print(f"[red]score error[/red] ... and {len(unscored) - 10} more")
    if unscored:
        err.print(f"score the run again with `pau-mcp score {config.run}` once the scoring models answer")
    failed = progress.whole.failed if progress.whole is not None else progress.failed
    if failed and not retry_failed and not progress.failed:
        err.print(f"{failed} episode(s) of this run failed earlier; run it again without --keep-failed to retry them")
    return bool(failed or unscored)


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


def _check_suite(settings: Settings, config: EvalConfig) -> None:
    """An unknown or broken suite (in task mode, one without frozen tasks) ends the command in one line, before the
    models are asked and the sandbox starts."""
    from ..harness.configuration import EvalError
    from ..harness.runner import planned_methods
    from ..manifests import ManifestError

    try:
        planned_methods(settings, config)
        if config.mode == "tasks":
            from ..harness.tasks import planned_tasks

            planned_tasks(settings, config)
    except (ManifestError, EvalError) as exc:
        raise click.ClickException(str(exc)) from None


def check_configs(configs: Sequence[EvalConfig]) -> None:
    """Refuse runs that cannot play an episode (no model, an unknown provider) before any run or sandbox exists."""
    from ..harness.configuration import EvalError, check_config

    for config in configs:
        try:
            check_config(config)
        except EvalError as exc:
            raise click.ClickException(str(exc)) from None


def score_kinds(settings: Settings) -> tuple[str, ...]:
    """The scores a run records: judge and code match when their models are set, and direct code always."""
    return tuple(
        k for k, model_ in (("judge", settings.judge_model), ("codematch", settings.coder_model)) if model_
    ) + ("direct",)


def overrides_of(settings: Settings) -> Overrides:
    """The agent model's request settings the user chose."""
    from ..llm import Overrides

    return Overrides(settings.temperature, settings.max_tokens, settings.reasoning_effort)


def check_models(settings: Settings, configs: Sequence[EvalConfig]) -> None:
    """One cheap check per model of these runs before any run exists (and before the sandbox starts).

    A wrong key, URL or model name fails in seconds, in one line, instead of in every episode.
    """
    from ..llm import LLMClient, LLMError

    models: list[str] = []
    for config in configs:
        if config.agent != "probe" and config.model:
            models.append(config.model)
        if config.agent == "observer" and settings.coder_model:
            models.append(settings.coder_model)
        if config.score and config.mode != "tasks":  # a task's answer is checked with no model
            models += [m for m in (settings.judge_model, settings.coder_model) if m]
    models = list(dict.fromkeys(models))
    if not models:
        return
    try:
        for warning in eventloop.run(_preflight, LLMClient.from_settings(settings, use_cache=False), models):
            err.print(f"[yellow]note:[/yellow] {warning}")
    except LLMError as exc:
        raise click.ClickException(str(exc)) from None


def execute(
    settings: Settings, config: EvalConfig, *, no_cache: bool = False, cluster: Cluster | None = None, note: bool = True
) -> RunProgress:
    """Run (or resume) one evaluation with a progress bar on stderr; returns its progress.

    ``note``: say when judge and code-match scores are off for want of their models.

    Raises:
        click.ClickException: the run cannot start or continue (the message says why).
    """
    from ..assembly import run_scorer
    from ..harness.runner import run_eval
    from ..harness.tasks import run_tasks
    from ..llm import LLMNotConfigured
    from ..prompts import PromptsError
    from ..protocol import load_protocol
    from ..runs import RunError

    try:
        protocol = load_protocol(config.protocol, settings.data_dir)
    except PromptsError as exc:
        raise click.ClickException(str(exc)) from None
    if no_cache:
        config = replace(config, cache=False)  # the agent's model too, not only the scorer's
    scorer = sandbox = source = None
    if cluster is not None and config.mode == "tasks":
        raise click.ClickException("task mode runs its episodes here: leave out --ray")
    if cluster is not None:
        from ..distributed.evaluation import RayEpisodes

        try:
            source = RayEpisodes(cluster, settings, config)
        except RunError as exc:
            raise click.ClickException(str(exc)) from None
    else:
        # Scoring runs in sandbox worker processes: the harness's one event loop is what limits a run's
        # throughput, and sandbox work in its own process competed with it (docs/benchmarks.md).
        sandbox = make_sandbox(settings, progress=step_printer(), processes=config.score)
        scorer = run_scorer(
            settings, sandbox, run=config.run, share_samples=config.share_samples, use_cache=not no_cache,
            protocol=protocol,
        )  # fmt: skip
    if note and config.score and len(config.kinds) < 3 and config.mode != "tasks":
        err.print("[yellow]note:[/yellow] judge and code-match scores need --judge-model/PAU_JUDGE_MODEL and "
                  "--coder-model/PAU_CODER_MODEL; without them only code the agent submits is scored")  # fmt: skip
    with run_bar(config.run, on_ray=cluster is not None) as show:

        async def main() -> RunProgress:
            try:
                if config.mode == "tasks":
                    return await run_tasks(settings, config, scorer, show)
                return await run_eval(settings, config, scorer, show, source=source)
            finally:
                if scorer is not None:
                    await scorer.aclose()
                if sandbox is not None:
                    sandbox.close()

        try:
            progress = eventloop.run(main)
        except (RunError, LLMNotConfigured) as exc:
            raise click.ClickException(str(exc)) from None
    return progress


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
    from ..manifests import ManifestError

    if config.agent == "probe" or not config.model:
        return []
    try:
        info = manifest_store(settings).suite(config.suite).info
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


async def _preflight(llm: LLMClient, models: list[str]) -> list[str]:
    try:
        return await llm.preflight(models)
    finally:
        await llm.aclose()


@click.command()
@click.option(
    "--method", "method_id", default="builtin/b005", show_default=True, help="The built-in method to explore."
)
@options("manifests", "budget", "db", "data_dir", "tool_key", "cache_dir", "mcp_era")
def demo(method_id: str, **values: object) -> None:
    """Explore one hidden method end to end with no network and no LLM, and score the result.

    Starts `pau-mcp serve` as a subprocess, connects with the official MCP client, probes the
    method with type-appropriate inputs, submits code from a memorising baseline, and prints the
    transcript and the code-match score.
    """
    settings = settings_from(values)
    anyio.run(_demo, settings, method_id)


async def _demo(settings: Settings, method_id: str) -> None:
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    from ..config import SettingsError
    from ..eras import client_mode
    from ..harness.agents import ProbeAgent
    from ..harness.environment import Environment
    from ..manifests import ManifestError, tool_name
    from ..runstore import RunStore, StoreError
    from ..scoring import Scorer
    from ..server.launch import stdio_server

    console = Console()
    try:
        method = manifest_store(settings).method(method_id)
        key = settings.deployment_key()
        RunStore(settings.db_path).close()  # a store the server could not open ends the demo here, in one line
    except (ManifestError, SettingsError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    say = step_printer()
    say("preparing the sandbox (built once, 1 to 2 minutes on first use, then cached)")
    scorer = Scorer.from_settings(settings, progress=say)
    say(f"starting `pau-mcp serve --methods {method.id}` and connecting with the MCP client over stdio")
    # The server gets this command's whole settings (its store, key, budget, limits and caches) in a private file.
    served = settings.model_copy(update={"tool_key": key, "db": settings.db_path})
    with stdio_server(served, ["--methods", method.id, "--run", "demo"]) as params:
        try:
            async with Client(params, mode=client_mode(settings.mcp_era), cache=None) as client:
                env = await Environment.open(client.session, tool_name(key, method.id))
                server = client.server_info.name if client.server_info else "pau-mcp"
                console.print(
                    f"\n[bold]{server}[/bold] ({client.protocol_version}) offers [bold]{env.tool.name}[/bold]: "
                    f"{env.header}"
                )
                for line in env.examples:
                    console.print(f"  known: {line}")
                result = await ProbeAgent().run(env, "interactive", settings.budget)
                console.print(f"\n[bold]Probe explorer[/bold] ({env.queries} queries):")
                for observation in env.observations:
                    console.print(f"  {observation.text.splitlines()[0]}")
                submitted = await env.submit(result.description, result.code)
                console.print(f"\n[bold]submit[/bold] (memorising baseline code): {submitted.text}")
        except Exception as caught:  # noqa: BLE001 - sorted just below
            cause: BaseException = caught
            while isinstance(cause, BaseExceptionGroup) and cause.exceptions:  # the MCP client's task groups
                cause = cause.exceptions[0]
            if not isinstance(cause, (MCPError, OSError)):
                raise
            await scorer.aclose()
            raise click.ClickException(
                f"the demo's server stopped before the demo ended ({cause}); its own error is printed above"
            ) from None
    scored = await scorer.score(method.id, code=result.code, kinds=("direct",))
    await scorer.aclose()
    direct = scored.direct
    shown = f"{direct.fraction:.2f}" if direct is not None and direct.fraction is not None else "n/a"
    console.print(
        f"\n[bold]Code match of the memorising baseline: {shown}[/bold] on {len(method.tests)} hidden test inputs "
        f"({sum(direct.matches) if direct else 0} matched). This is the floor a real agent must beat.\n"
    )
    console.print(
        "Next steps:\n"
        "  * Judge scores need an LLM: set PAU_JUDGE_MODEL and PAU_CODER_MODEL (e.g. openai/gpt-4o-mini) and "
        "OPENAI_API_KEY (or OPENAI_BASE_URL for a local server), then `pau-mcp eval --model openai/gpt-4o-mini`.\n"
        "  * Connect Claude Desktop: add to claude_desktop_config.json\n"
        f'      {{"mcpServers": {{"pau-mcp": {{"command": "{Path(sys.executable).parent / "pau-mcp"}", "args": ["serve"]}}}}}}\n'
        "    (more clients in docs/clients.md)."
    )
