"""``pau-mcp eval`` (whole runs) and ``pau-mcp demo`` (one method, no network, no LLM)."""

from __future__ import annotations

import sys
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
    check_configs,
    check_models,
    connect_cluster,
    err,
    execute,
    manifest_store,
    ray_options,
    settings_from,
    show_llm_notices,
    step_printer,
)

if TYPE_CHECKING:
    from ..config import Settings
    from ..harness.configuration import EvalConfig
    from ..harness.runner import RunProgress
    from ..llm import Overrides
    from ..scoring.codematch import CodeMatch

__all__ = ["demo", "evaluate", "replayed"]

_EVAL_SETTINGS = (
    "manifests", "budget", "db", "data_dir", "tool_key", "token", "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb",
    "llm_concurrency", "llm_retries", "timeout_s", "memory_mb", "max_output_kb", "max_argument_kb", "cache_dir",
    "workers", "sandbox_engine", "model_capabilities", "temperature", "max_tokens", "reasoning_effort", "protocol", "mcp_era", "examples",
)  # fmt: skip


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
    agent = _agent_of(mode, agent, docs)
    name = run_name or default_name(suite, agent, mode if mode != "tasks" else f"tasks-{docs}", model)
    config = EvalConfig(
        run=name, model=model, suite=suite, agent=agent, mode=mode,
        budget=settings.budget, concurrency=concurrency, limit=limit, methods=tuple(method_ids), server=server,
        score=not no_score, kinds=score_kinds(settings), retry_failed=retry_failed, overrides=overrides_of(settings),
        protocol=settings.protocol, cache=not no_cache, share_samples=share_samples, examples=settings.examples, docs=docs,
    )  # fmt: skip
    if _played(settings, config.run, _epochs(config, epochs, seed), no_cache, ray_address, ray_workers):
        sys.exit(1)


def _agent_of(mode: str, agent: str, docs: str) -> str:
    """The agent a run uses: task mode is answered by the tools agent; ``--docs`` belongs to task mode."""
    if mode == "tasks":
        if (
            click.get_current_context().get_parameter_source("agent") is ParameterSource.COMMANDLINE
            and agent != "tools"
        ):
            raise click.UsageError(
                "--mode tasks is answered by native tool calling (the tools agent): leave --agent out"
            )
        return "tools"
    if docs != "examples":
        raise click.UsageError("--docs documents the tools for --mode tasks; add --mode tasks")
    return agent


def _played(
    settings: Settings, run: str, configs: list[EvalConfig], no_cache: bool, ray_address: str | None,
    ray_workers: int | None,
) -> bool:  # fmt: skip
    """Check, then play the runs of ``run`` (it alone, or its epochs one after another) and print how each ended; True
    when any episode failed or any score could not be made."""
    from ..harness.outcome import epoch_lines

    config = configs[0]
    check_configs(configs)
    _check_suite(settings, config)
    check_models(settings, configs)
    cluster = connect_cluster(ray_address, ray_workers)
    troubled = False
    try:
        for one in configs:
            progress = execute(settings, one, no_cache=no_cache, cluster=cluster, note=one is config)
            troubled |= _ended(settings, one, progress, config.retry_failed, on_ray=cluster is not None)
    finally:
        if cluster is not None:
            cluster.close()
    if len(configs) > 1:
        for line in epoch_lines(settings, run):
            click.echo(line)
    click.echo(f"see `pau-mcp report {run}`")
    return troubled


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
    from ..harness.outcome import score_errors, summary

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


def score_kinds(settings: Settings) -> tuple[str, ...]:
    """The scores a run records: judge and code match when their models are set, and direct code always."""
    return tuple(
        k for k, model_ in (("judge", settings.judge_model), ("codematch", settings.coder_model)) if model_
    ) + ("direct",)


def overrides_of(settings: Settings) -> Overrides:
    """The agent model's request settings the user chose."""
    from ..llm import Overrides

    return Overrides(settings.temperature, settings.max_tokens, settings.reasoning_effort)


#: What the demo ends with: how to go on (the installed ``pau-mcp`` command's path filled in).
_NEXT_STEPS = (
    "Next steps:\n"
    "  * Judge scores need an LLM: set PAU_JUDGE_MODEL and PAU_CODER_MODEL (e.g. openai/gpt-4o-mini) and "
    "OPENAI_API_KEY (or OPENAI_BASE_URL for a local server), then `pau-mcp eval --model openai/gpt-4o-mini`.\n"
    "  * Connect Claude Desktop: add to claude_desktop_config.json\n"
    '      {{"mcpServers": {{"pau-mcp": {{"command": "{command}", "args": ["serve"]}}}}}}\n'
    "    (more clients in docs/clients.md)."
)


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
    _floor(console, scored.direct, len(method.tests))


def _floor(console: Console, direct: CodeMatch | None, tests: int) -> None:
    """Print the memorising baseline's code match (the floor a real agent must beat), then how to go on."""
    shown = f"{direct.fraction:.2f}" if direct is not None and direct.fraction is not None else "n/a"
    console.print(
        f"\n[bold]Code match of the memorising baseline: {shown}[/bold] on {tests} hidden test inputs "
        f"({sum(direct.matches) if direct else 0} matched). This is the floor a real agent must beat.\n"
    )
    console.print(_NEXT_STEPS.format(command=Path(sys.executable).parent / "pau-mcp"))
