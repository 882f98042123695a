"""SkyRL's GRPO trainer over the ``pau-explore`` environment, with the reference's recipe (the paper's Table 2).

Run it where SkyRL's trainer is installed (``pip install 'pau-mcp[skyrl]'``: ``skyrl-train``, which needs
Python 3.12, GPUs and vLLM; docs/training.md)::

    python -m pau_mcp.rl.skyrl_main \\
        data.train_data="['data/train.parquet']" data.val_data="['data/val.parquet']" \\
        trainer.policy.model.path=/models/rl_warmup/Qwen3-8B \\
        trainer.placement.policy_num_gpus_per_node=4 trainer.placement.ref_num_gpus_per_node=4 \\
        generator.num_inference_engines=4

Every argument is a Hydra override of SkyRL's ``ppo_base_config``; ``RECIPE`` supplies the reference's
values (GRPO, LoRA rank 16 and alpha 16, bf16, 5 epochs, batch size 8, KL loss, lr 1e-6, 8 samples per
prompt, step-wise trajectories, ...) for every key the command line leaves out. ``--dry-run`` prints the
overrides the trainer would get and exits (it needs nothing but this package). ``pau-mcp rl dataset`` writes
the parquet files; the environment reads its critic from ``PAU_JUDGE_MODEL`` (or
``+environment.skyrl_gym.pau-explore.critic_model=...``), and the other ``env_config`` keys the same way
(``pau_mcp.rl.skyrl_env``).

As in the reference's own entry point, the environment is registered inside the Ray task that runs the
experiment, the process whose generator makes the environments.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from .skyrl_env import ENV_ID, register

__all__ = ["RECIPE", "main", "overrides", "run_experiment"]

#: The reference's GRPO run (its ``run_rl.sh``), as Hydra overrides of SkyRL's ``ppo_base_config``: the paper's
#: Table 2 and the generator settings its environment needs. The GPU counts are the machine's: set them.
RECIPE: dict[str, str] = {
    "trainer.algorithm.advantage_estimator": "grpo",
    "trainer.policy.model.lora.rank": "16",
    "trainer.policy.model.lora.alpha": "16",
    "trainer.strategy": "fsdp2",
    "trainer.placement.colocate_all": "true",
    "trainer.epochs": "5",
    "trainer.update_epochs_per_batch": "1",
    "trainer.train_batch_size": "8",
    "trainer.policy_mini_batch_size": "8",
    "trainer.critic_mini_batch_size": "8",
    "trainer.micro_forward_batch_size_per_gpu": "2",
    "trainer.micro_train_batch_size_per_gpu": "2",
    "trainer.eval_batch_size": "16",
    "trainer.eval_before_train": "true",
    "trainer.eval_interval": "5",
    "trainer.ckpt_interval": "10",
    "trainer.max_ckpts_to_keep": "3",
    "trainer.max_prompt_length": "512",
    "trainer.policy.optimizer_config.lr": "1.0e-6",
    "trainer.algorithm.use_kl_loss": "true",
    "generator.sampling_params.max_generate_length": "1024",
    "+generator.engine_init_kwargs.max_model_len": "4096",
    "generator.backend": "vllm",
    "generator.run_engines_locally": "true",
    "generator.weight_sync_backend": "nccl",
    "generator.async_engine": "true",
    "generator.model_dtype": "bfloat16",
    "generator.batched": "false",
    "generator.step_wise_trajectories": "true",
    "generator.previous_observation_only": "true",
    "generator.n_samples_per_prompt": "8",
    "generator.gpu_memory_utilization": "0.8",
    "environment.env_class": ENV_ID,
}

_INSTALL = (
    "the SkyRL entry point needs SkyRL's trainer: on a GPU machine with Python 3.12, `pip install 'pau-mcp[skyrl]'` "
    "(skyrl-train, which brings Hydra, Ray, torch and vLLM); see docs/training.md. "
    "`python -m pau_mcp.rl.skyrl_main --dry-run ...` shows the overrides without it"
)


def _key(override: str) -> str:
    """The config key an override sets: ``trainer.epochs`` for ``trainer.epochs=2``, ``+trainer.x=1``, ``~trainer.x``."""
    return override.split("=", 1)[0].lstrip("+~").strip()


def overrides(given: Sequence[str]) -> list[str]:
    """The Hydra overrides for the trainer: ``RECIPE`` for every key ``given`` leaves out, then ``given``.

    Raises:
        ValueError: an argument that is not a Hydra override (``key=value``, ``+key=value``, ``~key``).
    """
    for item in given:
        if item.startswith("-") or ("=" not in item and not item.startswith("~")):
            raise ValueError(
                f"{item!r} is not a Hydra override; give SkyRL settings as key=value, e.g. trainer.epochs=2"
            )
    chosen = {_key(item) for item in given}
    return [f"{key}={value}" for key, value in RECIPE.items() if _key(key) not in chosen] + list(given)


def run_experiment(cfg: Any) -> None:
    """What the trainer's Ray task runs: register ``pau-explore`` in this process, then SkyRL's PPO experiment."""
    from skyrl_train.entrypoints.main_base import BasePPOExp

    register()
    BasePPOExp(cfg).run()


def main(argv: Sequence[str] | None = None) -> int:
    """Compose SkyRL's configuration with the recipe and the given overrides, then train (or print, ``--dry-run``).

    Returns:
        The exit status: 0, or 2 for a usage error or a missing trainer (the message says what to do).
    """
    given = list(sys.argv[1:] if argv is None else argv)
    dry_run = "--dry-run" in given
    given = [item for item in given if item != "--dry-run"]
    try:
        final = overrides(given)
    except ValueError as exc:
        print(f"pau_mcp.rl.skyrl_main: {exc}", file=sys.stderr)
        return 2
    if dry_run:
        print("\n".join(final))
        return 0
    try:
        import hydra
        import ray
        from skyrl_train.entrypoints.main_base import config_dir
        from skyrl_train.utils import validate_cfg
        from skyrl_train.utils.utils import initialize_ray
    except ImportError as exc:
        print(f"pau_mcp.rl.skyrl_main: {_INSTALL} ({exc})", file=sys.stderr)
        return 2
    with hydra.initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = hydra.compose(config_name="ppo_base_config", overrides=final)
    validate_cfg(cfg)
    initialize_ray(cfg)
    # On a worker, not the head node, as SkyRL's own entry point does.
    ray.get(ray.remote(num_cpus=1)(run_experiment).remote(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
