"""The one run driver: evaluation runs and rollouts resume, refuse and stop by the same rules, wherever they play."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from pau_mcp.contract import EpisodeEnd
from pau_mcp.harness import EvalConfig, EvalError
from pau_mcp.manifests import ManifestStore, Method
from pau_mcp.rl.rollout import RolloutConfig
from pau_mcp.runs import Ending, Play, Progress, RunError, RunSpec, drive
from pau_mcp.runstore import EpisodeResult, RunStore

METHODS = list(ManifestStore().suite("builtin").methods.values())[:4]


class Scripted:
    """An episode source playing each method as told: ``done``, ``failed``, ``fatal``, ``lost`` (the source can
    play no more) or ``crash`` (its play raises what no source foresees, as a reply nested too deep once did)."""

    workers = 0
    rerun = 0

    def __init__(self, endings: dict[str, str] | None = None) -> None:
        self.endings = endings or {}
        self.played: list[str] = []

    @contextlib.asynccontextmanager
    async def episodes(self, todo: Sequence[Method]) -> AsyncIterator[Play[Method, Ending]]:
        async def play(method: Method, attempt: int) -> Ending:
            how = self.endings.get(method.id, "done")
            if how == "lost":
                raise RunError("no worker is left")
            if how == "crash":
                raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")
            self.played.append(method.id)
            state: EpisodeEnd = "done" if how == "done" else "failed"
            result = EpisodeResult(state=state, error=None if state == "done" else "LLMError: refused", queries=1)
            return Ending(method.id, attempt, result, fatal=RuntimeError("bad key") if how == "fatal" else None)

        yield play


def _spec(name: str = "r", **identity: object) -> RunSpec:
    return RunSpec(name=name, kind="eval", identity={"model": "m", **identity}, keys=("model", "budget"))


def _drive(store: RunStore, spec: RunSpec, source: Scripted, concurrency: int = 1) -> Progress[Ending]:
    return anyio.run(drive, store, spec, METHODS, source, concurrency, Progress())


def test_a_resumed_run_plays_only_the_episodes_that_have_not_ended(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    first = Scripted({METHODS[2].id: "lost"})
    with pytest.raises(RunError, match="no worker is left"):
        _drive(store, _spec(), first)
    assert first.played == [m.id for m in METHODS[:2]]

    again = Scripted()
    progress = _drive(store, _spec(), again)
    assert again.played == [m.id for m in METHODS[2:]]
    assert (progress.total, progress.skipped, progress.done, progress.failed) == (4, 2, 2, 0)
    assert set(store.episode_states(store.run_id("r")).values()) == {"done"}


def test_failed_episodes_are_played_again_only_when_the_run_retries_them(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    _drive(store, _spec(), Scripted({METHODS[0].id: "failed"}))
    kept = Scripted()
    assert _drive(store, _spec(), kept).skipped == 4 and kept.played == []
    retried = Scripted()
    spec = RunSpec(name="r", kind="eval", identity={"model": "m"}, keys=("model", "budget"), retry_failed=True)
    assert _drive(store, spec, retried).done == 1 and retried.played == [METHODS[0].id]


def test_a_fatal_ending_is_recorded_and_then_ends_the_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    source = Scripted({METHODS[1].id: "fatal"})
    with pytest.raises(RuntimeError, match="bad key"):
        _drive(store, _spec(), source)
    states = store.episode_states(store.run_id("r"))
    assert states[METHODS[0].id] == "done" and states[METHODS[1].id] == "failed"
    assert states[METHODS[3].id] == "pending"


def test_an_episode_whose_play_raises_an_unforeseen_error_is_recorded_failed_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path / "runs.db")
    progress = _drive(store, _spec(), Scripted({METHODS[1].id: "crash"}))
    states = store.episode_states(store.run_id("r"))
    assert states[METHODS[1].id] == "failed" and list(states.values()).count("done") == 3  # never left running
    assert (progress.done, progress.failed) == (3, 1)
    (line,) = progress.errors
    assert line == f"{METHODS[1].id}: RecursionError: maximum recursion depth exceeded while decoding a JSON array"
    (episode,) = [e for e in store.episodes(store.run_id("r")) if e.method_id == METHODS[1].id]
    assert episode.error is not None and episode.error.startswith("internal error: RecursionError")
    again = Scripted()
    spec = RunSpec(name="r", kind="eval", identity={"model": "m"}, keys=("model", "budget"), retry_failed=True)
    assert _drive(store, spec, again).done == 1 and again.played == [METHODS[1].id]


def test_a_run_recorded_with_another_configuration_is_refused_with_the_difference_named(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    _drive(store, _spec(budget=5), Scripted())
    with pytest.raises(RunError, match=r"exists with another configuration \(budget: stored 5, asked 6\)"):
        _drive(store, _spec(budget=6), Scripted())
    # A key the identity no longer holds is a difference too; a key outside the identity's keys is not compared.
    with pytest.raises(RunError, match="budget: stored 5, asked None"):
        _drive(store, _spec(), Scripted())


def test_evaluation_and_rollout_runs_refuse_a_changed_configuration_by_the_same_rule(tmp_path: Path) -> None:
    eval_config = EvalConfig(run="e", model="openai/m", suite="builtin", budget=5)
    rollout = RolloutConfig(run="o", model="openai/m", suite="builtin", methods=(), critic={"model": "openai/c"})
    for before, after in ((eval_config.spec("digest"), EvalConfig(run="e", model="openai/m", suite="builtin", budget=6).spec("digest")),
                          (rollout.spec(), RolloutConfig(run="o", model="openai/m", suite="builtin", methods=(),
                                                         critic={"model": "openai/c"}, temperature=0.5).spec())):  # fmt: skip
        stored = {**before.identity, **before.recorded}
        assert before.conflict(stored) is None  # what a run records resumes it, whatever it records beside
        assert after.conflict(stored) is not None
        assert after.conflict({}) is None  # a run a server recorded with no configuration is taken over


def test_an_evaluation_recorded_before_protocols_were_recorded_resumes_under_ours(tmp_path: Path) -> None:
    config = EvalConfig(run="e", model="openai/m", suite="builtin")
    old = {k: v for k, v in config.identity().items() if k != "protocol"}
    assert config.spec().conflict(old) is None
    assert EvalConfig(run="e", model="openai/m", suite="builtin", protocol="reference").spec().conflict(old)


def test_evaluation_errors_are_run_errors_so_a_command_catches_one_kind() -> None:
    assert issubclass(EvalError, RunError)
