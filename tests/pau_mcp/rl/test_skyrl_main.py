"""The SkyRL entry point's wiring: the reference's recipe as overrides, the trainer's missing install, and the
experiment's process registering the environment before SkyRL makes one.

SkyRL's trainer (``skyrl-train``) needs Python 3.12 and GPUs, so the last test gives the entry point a stand-in
``skyrl_train`` package with the one class it calls; the environment it makes is the real one, through the real
``skyrl_gym`` registry. Training itself is not tested here.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

from pau_mcp.rl.skyrl_env import ENV_ID  # noqa: E402
from pau_mcp.rl.skyrl_main import RECIPE, main, overrides, run_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_the_reference_recipe_fills_every_key_the_command_line_leaves_out() -> None:
    final = overrides(["trainer.epochs=2", "+trainer.policy.model.lora.alpha=32", "data.train_data=['t.parquet']"])
    assert "trainer.epochs=5" not in final and "trainer.epochs=2" in final
    assert "trainer.policy.model.lora.alpha=16" not in final and "+trainer.policy.model.lora.alpha=32" in final
    # The rest of the reference's run: GRPO, LoRA 16/16, bf16, KL loss, batch 8, 8 samples, lr 1e-6, step-wise.
    for expected in (
        "trainer.algorithm.advantage_estimator=grpo", "trainer.policy.model.lora.rank=16",
        "generator.model_dtype=bfloat16", "trainer.algorithm.use_kl_loss=true", "trainer.train_batch_size=8",
        "generator.n_samples_per_prompt=8", "trainer.policy.optimizer_config.lr=1.0e-6",
        "generator.step_wise_trajectories=true", f"environment.env_class={ENV_ID}",
    ):  # fmt: skip
        assert expected in final
    assert final[-3:] == ["trainer.epochs=2", "+trainer.policy.model.lora.alpha=32", "data.train_data=['t.parquet']"]
    assert len(final) == len(RECIPE) - 2 + 3
    with pytest.raises(ValueError, match="not a Hydra override"):
        overrides(["--epochs", "2"])


def test_a_dry_run_prints_the_overrides_with_nothing_but_this_package() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp.rl.skyrl_main", "--dry-run", "trainer.epochs=3"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == overrides(["trainer.epochs=3"])


def test_without_skyrl_train_the_entry_point_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "skyrl_train", None)  # as on a machine without it
    assert main(["trainer.epochs=1"]) == 2
    error = capsys.readouterr().err
    assert "pip install 'pau-mcp[skyrl]'" in error and "Python 3.12" in error and "--dry-run" in error
    assert main(["epochs"]) == 2 and "not a Hydra override" in capsys.readouterr().err


def test_the_experiment_registers_the_environment_in_its_process_before_skyrl_makes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "stand-in" / "skyrl_train"
    (package / "entrypoints").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "entrypoints" / "__init__.py").write_text("")
    (package / "entrypoints" / "main_base.py").write_text(
        textwrap.dedent(
            """
            import skyrl_gym

            MADE = []


            class BasePPOExp:  # what SkyRL's generator does with the config: make the named environment
                def __init__(self, cfg):
                    self.cfg = cfg

                def run(self):
                    env = skyrl_gym.make(
                        self.cfg["environment"]["env_class"],
                        env_config=self.cfg["environment"]["skyrl_gym"][ENV],
                        extras={"method_id": "builtin/b005"},
                    )
                    MADE.append(env.init([{"role": "user", "content": "placeholder"}]))
            """
        ).replace("ENV", repr(ENV_ID))
    )
    monkeypatch.syspath_prepend(str(tmp_path / "stand-in"))
    for name in [n for n in sys.modules if n.startswith("skyrl_train")]:
        monkeypatch.delitem(sys.modules, name)
    from skyrl_gym.envs.registration import registry

    monkeypatch.delitem(registry, ENV_ID, raising=False)  # a fresh process: nothing registered yet
    monkeypatch.setenv("PAU_MCP_DATA_DIR", str(tmp_path))
    cfg = {"environment": {"env_class": ENV_ID, "skyrl_gym": {ENV_ID: {"critic_model": "openai/fake-critic"}}}}
    run_experiment(cfg)
    from skyrl_train.entrypoints.main_base import MADE

    ((messages, info),) = MADE
    assert info == {"method_id": "builtin/b005"} and "def test_func(arg0):" in messages[-1]["content"]
    assert ENV_ID in registry
