"""What the agent observed, as the code writer and the memorising baseline get it, for arguments that are tuples."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import anyio
import pytest
from fakellm import FakeLLM

from pau_mcp.config import Settings
from pau_mcp.harness import EvalConfig, EvalError, RunProgress, check_config, run_eval
from pau_mcp.manifests import Case, ManifestStore, call_arguments, call_text
from pau_mcp.runstore import EpisodeRow, RunStore
from pau_mcp.scoring import Scorer
from pau_mcp.server.examples import deployment_examples
from wasm_runtime import Sandbox, outcomes_match

TUPLE_METHOD = "builtin/b013"  # def test_func(arg0): one argument, a tuple of numbers
MODEL = "openai/fake-coder"


def _probe_run(tmp_path: Path, kinds: tuple[str, ...], examples: str = "published") -> EpisodeRow:
    settings = Settings.from_options(
        data_dir=tmp_path, db=tmp_path / "runs.db", coder_model=MODEL, budget=4, examples=examples
    )
    config = EvalConfig(
        run="probe", model="", suite="builtin", agent="probe", methods=(TUPLE_METHOD,), kinds=kinds, budget=4,
        examples=examples,
    )  # fmt: skip

    async def go() -> RunProgress:
        scorer = Scorer.from_settings(settings)
        try:
            with anyio.fail_after(120):
                return await run_eval(settings, config, scorer, None)
        finally:
            await scorer.aclose()

    progress = anyio.run(go)
    assert progress.failed == 0, progress.errors
    store = RunStore(settings.db_path)
    (episode,) = store.episodes(store.run_id("probe"))
    return episode


@pytest.fixture
def coder(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=lambda body: "```python\ndef test_func(arg0):\n    return arg0\n```") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def test_a_one_tuple_argument_reaches_the_code_writer_as_one_argument(tmp_path: Path, coder: FakeLLM) -> None:
    _probe_run(tmp_path, ("codematch",))
    (prompt,) = coder.prompts()
    calls = prompt.split("Observed calls and their results:")[1]
    assert re.search(r"^test_func\(\(3, -1, 2\)\) -> \(-1, 2, 3\)$", calls, re.MULTILINE)
    assert "test_func(3, -1, 2)" not in prompt


def test_the_memorising_baseline_answers_a_one_tuple_argument_it_saw(tmp_path: Path, sandbox: Sandbox) -> None:
    episode = _probe_run(tmp_path, ("direct",))
    code = episode.scores["direct"].detail["code"]
    method = ManifestStore().method(TUPLE_METHOD)
    inputs = [case.input for case in method.examples]
    outcomes = sandbox.run(code, inputs)
    for case, got in zip(method.examples, outcomes, strict=True):
        assert outcomes_match(case.frozen_outcome().outcome(), got), (case.input, got)


def _pairs(cases: Iterable[Case]) -> list[list[str]]:
    """Examples as an episode records them: the argument tuple as the call shows it, and the outcome shown."""
    return [[call_arguments(call_text("test_func", c.input)) or c.input, c.frozen_outcome().shown()] for c in cases]


def test_with_deployment_examples_the_code_writer_gets_the_examples_the_agent_saw(
    tmp_path: Path, coder: FakeLLM, sandbox: Sandbox
) -> None:
    episode = _probe_run(tmp_path, ("codematch",), examples="deployment")
    method = ManifestStore().method(TUPLE_METHOD)
    key = Settings.from_options(data_dir=tmp_path).deployment_key()
    served = deployment_examples([method], sandbox, key)[method.id]
    assert served.origin == "deployment" and episode.examples is not None
    assert episode.examples[: len(served.cases)] == _pairs(served.cases)
    (prompt,) = coder.prompts()
    for case in served.cases:
        assert f"{call_text('test_func', case.input)} -> {case.frozen_outcome().shown()}" in prompt
    for case in method.examples:
        assert call_text("test_func", case.input) not in prompt


def test_a_runs_own_server_shows_the_runs_examples_whatever_the_environment_says(
    tmp_path: Path, coder: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAU_MCP_EXAMPLES", "deployment")  # reaches the server's process, where the flag beats it
    episode = _probe_run(tmp_path, ("codematch",))
    method = ManifestStore().method(TUPLE_METHOD)
    assert episode.examples is not None
    assert episode.examples[: len(method.examples)] == _pairs(method.examples)


def test_the_reference_protocol_refuses_a_run_with_deployment_examples(tmp_path: Path) -> None:
    config = EvalConfig(run="r", model="", suite="builtin", agent="probe", protocol="reference", examples="deployment")
    with pytest.raises(EvalError, match="published examples"):
        check_config(config)
