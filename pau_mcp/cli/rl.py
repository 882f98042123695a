"""``pau-mcp rl rollout``: a policy through the RL environment over a suite, trajectories with per-step rewards."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .. import eventloop
from ..config import options
from .common import (
    connect_cluster,
    err,
    make_sandbox,
    manifest_store,
    ray_options,
    run_bar,
    run_store,
    settings_from,
    show_llm_notices,
    step_printer,
)

if TYPE_CHECKING:
    from ..config import Settings
    from ..distributed import Cluster
    from ..manifests import Method
    from ..rl import EnvConfig
    from ..rl.rollout import RolloutConfig, RolloutProgress

__all__ = ["rl"]

_ROLLOUT_SETTINGS = (
    "manifests", "budget", "db", "data_dir", "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb",
    "llm_concurrency", "llm_retries", "timeout_s", "memory_mb", "cache_dir", "workers", "examples", "tool_key",
)  # fmt: skip


@click.group()
def rl() -> None:
    """Reinforcement learning: roll a policy out through the exploration environment (docs/training.md)."""


def _reward_overrides(pairs: tuple[str, ...], schedule: str | None) -> dict[str, Any]:
    from ..rl.rewards import SCHEDULES, RewardConfig
    from ..userfiles import UnreadableFile, read_text

    # Fields whose values are words (length_measure=words): given as they are, not as JSON.
    words = {name for name, value in RewardConfig().to_dict().items() if isinstance(value, str)}

    values: dict[str, Any] = {}
    if schedule in SCHEDULES:
        values["schedule"] = schedule
    elif schedule is not None:
        path = Path(schedule)
        try:
            loaded = json.loads(read_text(path, limit=1024 * 1024))
        except (UnreadableFile, ValueError, RecursionError) as exc:
            raise click.BadParameter(
                f"{schedule!r} is neither a schedule ({', '.join(SCHEDULES)}) nor a readable JSON file: {exc}",
                param_hint="--rewards",
            ) from None
        if not isinstance(loaded, dict):
            raise click.BadParameter(f"{path} must hold a JSON object of reward fields", param_hint="--rewards")
        values.update(loaded)
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not FIELD=VALUE, e.g. timeout_penalty=-0.5", param_hint="--reward")
        if name.strip() in words:
            values[name.strip()] = raw.strip()
            continue
        try:
            values[name.strip()] = json.loads(raw)
        except ValueError:
            raise click.BadParameter(f"{raw!r} is not a number or true/false", param_hint="--reward") from None
    return values


def _default_run(suite: str, model: str, mode: str, aware: bool) -> str:
    name = f"rl-{suite}-{model}-{mode}" + ("-aware" if aware else "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def _with_deployment_examples(settings: Any, methods: list[Any]) -> list[Any]:
    """The methods with the initial examples a server of this deployment serves (``--examples deployment``), so that
    the policy, the critic and the code writer see what an agent of that server sees."""
    from ..config import SettingsError
    from ..server.examples import cache_path, deployment_examples, serving

    try:
        key = settings.deployment_key()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    with make_sandbox(settings) as sandbox:
        served = deployment_examples(
            methods, sandbox, key, cache=cache_path(settings.data_dir, key), progress=step_printer()
        )
    return serving(methods, served)


@rl.command("rollout")
@click.option(
    "--model", required=True, help="The policy, provider/model: openai/<name> with OPENAI_BASE_URL for vLLM or SGLang."
)
@click.option("--suite", default=None, help="Suite to roll out over (default: builtin).")
@click.option(
    "--split",
    type=click.Choice(["train", "test"]),
    help="A PAU split imported with `pau-mcp import pau` (suite pau-<split>).",
)
@click.option("--methods", "method_ids", multiple=True, help="Only these method ids (repeatable).")
@click.option("--limit", type=click.IntRange(0), default=0, help="Only the first K methods (0: all).")
@click.option("--run", "run_name", help="Run name; the same name (or the same options) resumes a run.")
@click.option("--critic-model", help="The critic, provider/model (default: --judge-model / PAU_JUDGE_MODEL).")
@click.option(
    "--critic-mode",
    type=click.Choice(["asymmetric", "symmetric", "unsupervised"]),
    default="asymmetric",
    show_default=True,
    help="asymmetric: the critic sees the source and gold description (AAC); symmetric: only what the policy saw "
    "(SYM-INFO); unsupervised: the hypothesis is rewarded by the share of hidden tests passed by code --coder-model "
    "writes from the gold description and the policy's examples (the reference's UNSUPERVISED mode).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(3),
    default=40,
    show_default=True,
    help="Steps per episode (reason, propose and reflect are one each).",
)
@click.option(
    "--window", type=click.IntRange(0), default=5, show_default=True, help="Latest experiments shown in each prompt."
)
@click.option(
    "--reward",
    "reward_pairs",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Override a reward constant (repeatable), e.g. code_match_weight=1.",
)
@click.option(
    "--rewards",
    "rewards_file",
    metavar="SCHEDULE|FILE",
    help="The reward schedule: pau-mcp (the default), paper (the paper's Table 3) or reference (the reference "
    'implementation\'s env.py), or a JSON object of reward fields (its "schedule" key names the base).',
)
@click.option(
    "--answer-aware",
    is_flag=True,
    help="Tell the policy the gold description (teacher data for `export sft --kind answer-aware`).",
)
@click.option("--temperature", type=float, default=1.0, show_default=True, help="The policy's sampling temperature.")
@click.option(
    "--max-tokens", type=click.IntRange(1), default=512, show_default=True, help="Longest policy reply per step."
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 4096),
    default=4,
    show_default=True,
    help="Episodes at once (with --ray, over the whole cluster).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where the trajectory files go (default: DATA_DIR/rl/RUN).",
)
@click.option("--no-parquet", is_flag=True, help="Write trajectories.jsonl only.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the LLM response cache.")
@click.option(
    "--share-samples",
    is_flag=True,
    help="Replay policy replies sampled at a temperature above 0 from the LLM cache across runs (default: only "
    "within the run that sampled them, so a resumed run replays its own steps and a new run samples afresh).",
)
@click.option("--retry-failed", is_flag=True, help="Run the episodes that failed before again.")
@ray_options
@options(*_ROLLOUT_SETTINGS)
def rollout(model: str, suite: str | None, split: str | None, method_ids: tuple[str, ...], limit: int,
            run_name: str | None, critic_model: str | None, critic_mode: str, max_turns: int, window: int,
            reward_pairs: tuple[str, ...], rewards_file: str | None, answer_aware: bool, temperature: float,
            max_tokens: int, concurrency: int, out_dir: Path | None, no_parquet: bool, no_cache: bool,
            share_samples: bool, retry_failed: bool, ray_address: str | None, ray_workers: int | None,
            **values: object) -> None:  # fmt: skip
    """Roll a policy out through the exploration environment and write trajectories with per-step rewards.

    Every step is rewarded by the critic and the sandbox (docs/training.md has the schedule). Trajectories go to
    the run store as they finish and to OUT/trajectories.jsonl and OUT/steps.parquet at the end. Killing it (even
    with kill -9) and running the same command again finishes the run: no episode is lost or done twice. With --ray,
    Ray workers run the episodes (each with its own sandbox and critic) and this process alone writes the store.
    """
    from ..rl.rollout import RolloutConfig

    settings = settings_from(values)
    show_llm_notices()
    if suite and split:
        raise click.UsageError("give --suite or --split, not both")
    suite = suite or (f"pau-{split}" if split else "builtin")
    critic_model = critic_model or settings.judge_model
    if not critic_model:
        raise click.UsageError("the critic needs a model: --critic-model (or --judge-model / PAU_JUDGE_MODEL)")
    env_config = _env_config(settings, max_turns, window, reward_pairs, rewards_file, critic_mode)
    if not no_parquet:
        _need_pyarrow()
    methods = _rollout_methods(settings, suite, split, method_ids, limit)
    coded = env_config.rewards.code_match_weight or critic_mode == "unsupervised"
    config = RolloutConfig(
        run=run_name or _default_run(suite, model, critic_mode, answer_aware), model=model, suite=suite,
        methods=tuple(m.id for m in methods),
        critic={"model": critic_model, "mode": critic_mode, "coder_model": settings.coder_model if coded else None},
        env=env_config, answer_aware=answer_aware, temperature=temperature, max_tokens=max_tokens,
        concurrency=concurrency, retry_failed=retry_failed, share_samples=share_samples, examples=settings.examples,
    )  # fmt: skip
    cluster = connect_cluster(ray_address, ray_workers)
    progress = _rolled_out(settings, config, methods, cluster, use_cache=not no_cache)
    if _ended(settings, config, progress, out_dir or settings.data_dir / "rl" / config.run, not no_parquet, cluster):
        sys.exit(1)


def _env_config(
    settings: Settings, max_turns: int, window: int, pairs: tuple[str, ...], schedule: str | None, critic_mode: str
) -> EnvConfig:
    """The environment ``--max-turns``, ``--window``, ``--reward`` and ``--rewards`` ask for, refused when its rewards
    need a code writer the run lacks."""
    from ..rl import EnvConfig, RewardConfig

    try:
        rewards = RewardConfig.from_dict(_reward_overrides(pairs, schedule))
        env_config = EnvConfig(max_turns=max_turns, budget=settings.budget, window=window, rewards=rewards)
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    if rewards.code_match_weight and not settings.coder_model:
        raise click.UsageError("code_match_weight needs a code-writing model: --coder-model or PAU_CODER_MODEL")
    if critic_mode == "unsupervised" and not settings.coder_model:
        raise click.UsageError(
            "--critic-mode unsupervised writes code from the gold description: give the code-writing model with "
            "--coder-model or PAU_CODER_MODEL"
        )
    return env_config


def _need_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise click.UsageError("steps.parquet needs pyarrow: pip install 'pau-mcp[rl]', or pass --no-parquet") from None


def _rollout_methods(
    settings: Settings, suite: str, split: str | None, method_ids: tuple[str, ...], limit: int
) -> list[Method]:
    """The methods a rollout covers, in plan order, with the initial examples its policy sees."""
    from ..manifests import ManifestError

    try:
        found = manifest_store(settings).suite(suite)
    except ManifestError as exc:
        hint = f"; import it first with `pau-mcp import pau --split {split}`" if split else ""
        raise click.ClickException(f"{exc}{hint}") from None
    unknown = sorted(set(method_ids) - set(found.methods))
    if unknown:
        raise click.UsageError(f"not in suite {suite!r}: {', '.join(unknown)}; see `pau-mcp methods --suite {suite}`")
    methods = [m for m in found.methods.values() if not method_ids or m.id in method_ids]
    methods = methods[:limit] if limit else methods
    return _with_deployment_examples(settings, methods) if settings.examples == "deployment" else methods


def _rolled_out(
    settings: Settings, config: RolloutConfig, methods: list[Method], cluster: Cluster | None, use_cache: bool
) -> RolloutProgress:
    """Play (or resume) the rollout with a progress bar: here (``assembly.rollout_parts``) or on the cluster."""
    from ..assembly import rollout_parts
    from ..llm import LLMError
    from ..rl.rollout import LocalRollouts, RolloutError, run_rollout

    # The parts of a local rollout; their sandbox is made on first use, so a rollout on Ray makes none.
    parts = rollout_parts(settings, config, use_cache=use_cache)
    try:
        for model in (config.model, config.critic["model"], config.critic["coder_model"]):
            if model:
                parts.llm.check(model)
    except LLMError as exc:
        raise click.ClickException(str(exc)) from None
    if cluster is None:
        source: Any = LocalRollouts(config, parts.llm, parts.critic, parts.runtime)
    else:
        from ..distributed.rollouts import RayRollouts

        source = RayRollouts(cluster, settings, config, use_cache=use_cache)
    store = run_store(settings)
    with run_bar(config.run, on_ray=cluster is not None) as show:

        async def main() -> RolloutProgress:
            try:
                return await run_rollout(store, methods, config, source, show)
            finally:
                await parts.aclose()

        try:
            return eventloop.run(main)
        except (RolloutError, LLMError) as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            if cluster is not None:
                cluster.close()


def _ended(
    settings: Settings, config: RolloutConfig, progress: RolloutProgress, target: Path, parquet: bool,
    cluster: Cluster | None,
) -> bool:  # fmt: skip
    """Write the trajectories and print how the rollout ended; True when any of its episodes failed."""
    from ..harness.outcome import unpriced_note
    from ..rl.rollout import RolloutError, finished_returns, write_trajectories

    store = run_store(settings)
    run = config.run
    try:
        written = write_trajectories(store, run, target, parquet=parquet)
    except RolloutError as exc:
        raise click.ClickException(str(exc)) from None
    returns = finished_returns(store, run)  # the whole run's, so that a resumed run reports its earlier episodes too
    mean = f"{sum(returns) / len(returns):.3f} over {len(returns)} finished episodes" if returns else "n/a"
    states = list(store.episode_states(store.run_id(run)).values())
    failed = states.count("failed")  # the whole run's: failed earlier and left so (no --retry-failed) count too
    click.echo(
        f"run {run}: {progress.done} episodes finished now, {progress.skipped} earlier, {progress.failed} failed now; "
        f"whole run: {len(states)} episodes, {states.count('done')} done, {failed} failed; mean return {mean}; "
        f"{progress.input_tokens + progress.output_tokens:,} tokens, ${progress.cost_usd:.4f}"
    )
    for line in unpriced_note(settings, [config.model, config.critic["model"], config.critic["coder_model"]]):
        click.echo(line)
    if cluster is not None:
        click.echo(
            f"on Ray: episodes played by {progress.workers} worker{'' if progress.workers == 1 else 's'}; "
            f"{progress.rerun} re-run after a lost worker"
        )
    for path in written.values():
        click.echo(f"wrote {path}")
    for line in progress.errors[:10]:
        err.print(f"[red]failed[/red] {line}")
    if failed > progress.failed:
        err.print(
            f"{failed - progress.failed} episode(s) of this run failed earlier and were not played again: run the same "
            "command with --retry-failed to play them"
        )
    return bool(failed)


@rl.command("dataset")
@click.option("--suite", default=None, help="Suite whose methods become training rows (default: builtin).")
@click.option(
    "--split",
    type=click.Choice(["train", "test"]),
    help="A PAU split imported with `pau-mcp import pau` (suite pau-<split>).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory for train.parquet and val.parquet.",
)
@click.option(
    "--val-share",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.2,
    show_default=True,
    help="Share of the methods held out for validation (the reference's split keeps 80%% for training).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the shuffle before the split.")
@options("manifests")
def dataset(suite: str | None, split: str | None, out_dir: Path, val_share: float, seed: int, **values: object) -> None:
    """Write SkyRL's training and validation rows for a suite: one row per method (docs/training.md).

    Each row carries `prompt` (a placeholder the environment replaces), `env_class` (pau-explore) and `method_id`;
    `python -m pau_mcp.rl.skyrl_main data.train_data="['OUT/train.parquet']" data.val_data="['OUT/val.parquet']"
    ...` trains on them.
    """
    import random

    from ..manifests import ManifestError
    from ..rl.skyrl_env import dataset_rows

    if suite and split:
        raise click.UsageError("give --suite or --split, not both")
    suite = suite or (f"pau-{split}" if split else "builtin")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise click.UsageError("parquet files need pyarrow: pip install 'pau-mcp[rl]'") from None
    settings = settings_from(values)
    try:
        ids = sorted(manifest_store(settings).suite(suite).methods)
    except ManifestError as exc:
        hint = f"; import it first with `pau-mcp import pau --split {split}`" if split else ""
        raise click.ClickException(f"{exc}{hint}") from None
    random.Random(seed).shuffle(ids)
    held = min(len(ids) - 1, max(1, round(len(ids) * val_share))) if val_share and len(ids) > 1 else 0
    parts = {"train": ids[: len(ids) - held], "val": ids[len(ids) - held :]}
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, chosen in parts.items():
        target = out_dir / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(dataset_rows(chosen)), target)
        click.echo(f"wrote {len(chosen)} rows to {target}")
