"""The PAU task for Inspect AI (`pau_mcp/inspect_task.py`): `inspect eval pau_mcp/pau` explores through `pau-mcp serve`
as Inspect MCP tools, the log holds the trajectory, and the scorer gives pau-mcp's judge, code-match and direct-code
scores. Offline: Inspect's mock model, or an OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM
from interop_support import KEY, TOOL, clients, need, submissions

from pau_mcp.config import Settings
from pau_mcp.manifests import ManifestStore, call_text
from pau_mcp.server import Catalog, serve_examples
from pau_mcp.server.examples import deployment_examples
from wasm_runtime import Sandbox

pytestmark = pytest.mark.interop

CODE = (
    "def test_func(arg0):\n    result = 1\n    for ch in str(abs(arg0)):\n        if ch != '0':\n"
    "            result *= int(ch)\n    return 0 if arg0 == 0 else (-result if arg0 < 0 else result)\n"
)
DESCRIPTION = "The product of the non-zero digits, negative for negative numbers."
#: The agent's moves: two calls, one over the budget of 2, then the server's submit with code.
MOVES = [
    (TOOL, {"arg0": 234}),
    (TOOL, {"args": "(105,)"}),
    (TOOL, {"arg0": -7}),
    ("submit", {"method": TOOL, "description": DESCRIPTION, "code": CODE}),
]


@pytest.fixture
def inspect_env(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No scorer model unless a test sets one; the servers' run store in the test's data directory."""
    for name in ("PAU_JUDGE_MODEL", "PAU_CODER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAU_MCP_DATA_DIR", str(data_dir))
    return dict(os.environ)


def _scorer_reply(body: dict[str, Any]) -> str:
    """The judge's and the code writer's replies (they run at once, so by what they are asked)."""
    return "Rating: 4" if "rating" in json.dumps(body).lower() else f"```python\n{CODE}```"


def _tool_texts(sample: Any) -> list[str]:  # an inspect_ai EvalSample: the optional library is read as Any
    return [m.text for m in sample.messages if m.role == "tool"]


def _check_trajectory(texts: list[str]) -> None:
    assert texts[0].startswith("test_func(234) returned 24")
    assert texts[1].startswith("test_func(105) returned 5")
    assert "spent" in texts[2] and "not run" in texts[2]
    assert "Recorded your description" in texts[3]


def test_inspect_eval_runs_the_task_from_the_command_line_and_logs_the_trajectory(
    tmp_path: Path, inspect_env: dict[str, str], data_dir: Path
) -> None:
    need("inspect_ai", "inspect")
    from inspect_ai.log import list_eval_logs, read_eval_log

    log_dir = tmp_path / "logs"
    with FakeLLM(responder=_scorer_reply) as fake:
        for name, arguments in MOVES:
            fake.call_tool(name, arguments)
        environment = {
            **inspect_env, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test-key",
            "PAU_JUDGE_MODEL": "openai/judge", "PAU_CODER_MODEL": "openai/coder",
        }  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "inspect_ai", "eval", "pau_mcp/pau", "--model", "openai/gpt-4o-mini",
             "-T", "methods=builtin/b001", "-T", "budget=2", "--log-dir", str(log_dir), "--display", "plain"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path, env=environment,
        )  # fmt: skip
        coder = [json.dumps(r) for r in fake.requests if "rating" not in json.dumps(r).lower() and "tools" not in r]
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    logs = list_eval_logs(str(log_dir))
    assert len(logs) == 1
    log = read_eval_log(logs[0])
    assert log.status == "success", log.error
    sample = log.samples[0]
    assert sample.id == "builtin/b001" and TOOL in sample.input and "builtin/b001" not in sample.input
    model_event = next(e for e in sample.events if e.event == "model")
    assert sorted(t.name for t in model_event.tools) == sorted([TOOL, "submit"])
    assert [e.function for e in sample.events if e.event == "tool"] == [TOOL, TOOL, TOOL, "submit"]
    _check_trajectory(_tool_texts(sample))
    assert sample.scores["pau_scorer"].value == {"judge": 4, "codematch": 1.0, "direct": 1.0}
    # The code writer is shown what the agent observed, as in `pau-mcp eval`: here the call of 105.
    assert len(coder) == 1 and "test_func(105)" in coder[0]
    assert submissions(data_dir) == [("builtin/b001", DESCRIPTION)]
    assert [client.split("; ")[-1] for client in clients(data_dir)] == ["MCP 2026-07-28"]  # the default era


def test_the_mock_model_explores_through_mcp_tools_offline_in_the_handshake_era(
    tmp_path: Path, inspect_env: dict[str, str], data_dir: Path
) -> None:
    """Inspect's own offline model (outputs given with their token counts: counting them would fetch a tokenizer),
    with the task's MCP client in the handshake era (``mcp_era="legacy"``)."""
    need("inspect_ai", "inspect")
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from pau_mcp.inspect_task import pau

    outputs = []
    for name, arguments in MOVES:
        output = ModelOutput.for_tool_call("mockllm/model", name, arguments)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        outputs.append(output)
    logs = inspect_eval(
        pau(methods="builtin/b001", budget=2, run="inspect-mock", mcp_era="legacy"),
        model=get_model("mockllm/model", custom_outputs=outputs), log_dir=str(tmp_path / "logs"), display="none",
    )  # fmt: skip
    log = logs[0]
    assert log.status == "success", log.error
    sample = log.samples[0]
    _check_trajectory(_tool_texts(sample))
    value = sample.scores["pau_scorer"].value
    assert math.isnan(value["judge"]) and math.isnan(value["codematch"]) and value["direct"] == 1.0
    metrics = {s.name: s.metrics["scored_mean"].value for s in log.results.scores}
    assert metrics["direct"] == 1.0 and math.isnan(metrics["judge"]) and math.isnan(metrics["codematch"])
    assert submissions(Path(os.environ["PAU_MCP_DATA_DIR"])) == [("builtin/b001", DESCRIPTION)]
    assert [client.split("; ")[-1] for client in clients(data_dir)] == ["MCP 2025-11-25"]


@pytest.mark.parametrize("credential", ["main-token", "session-token"])
def test_inspects_own_mcp_client_over_http_runs_into_the_budget_and_submits(
    tmp_path: Path, inspect_env: dict[str, str], data_dir: Path, credential: str
) -> None:
    """Inspect's own MCP client (``mcp_server_http``, the handshake era) as an agent's tool source against a running
    server: with the main token and a label header, and with a session token."""
    need("inspect_ai", "inspect")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.agent import AgentSubmit, react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.tool import mcp_server_http
    from interop_support import counted_calls, http_server, issue_token

    main = "main-token-0123456789"
    if credential == "main-token":
        label, headers = "inspect-main", {"Authorization": f"Bearer {main}", "X-PAU-Session": "inspect-main"}
    else:
        label = "inspect-agent"
        headers = {"Authorization": f"Bearer {issue_token(data_dir, label)}"}
    outputs = []
    for name, arguments in [*MOVES[:4], ("finish", {"answer": "done"})]:
        output = ModelOutput.for_tool_call("mockllm/model", name, arguments)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        outputs.append(output)
    with http_server(data_dir, "--token", main, "--budget", "2") as url:
        server = mcp_server_http(name="pau-mcp", url=url, headers=headers, timeout=60)
        task = Task(
            dataset=[Sample(input="Explore the fn_ tool and submit your description.")],
            solver=react(tools=[server], submit=AgentSubmit(name="finish")),
        )
        logs = inspect_eval(
            task, model=get_model("mockllm/model", custom_outputs=outputs), log_dir=str(tmp_path / "logs"),
            display="none",
        )  # fmt: skip
    log = logs[0]
    assert log.status == "success", log.error
    _check_trajectory(_tool_texts(log.samples[0]))
    assert counted_calls(data_dir) == [(label, 2, 3)]
    assert submissions(data_dir) == [("builtin/b001", DESCRIPTION)]
    assert {c.split("; ")[-1] for c in clients(data_dir)} == {"MCP 2025-11-25"}


def test_with_deployment_examples_the_samples_and_the_scorer_quote_the_examples_the_servers_serve(
    inspect_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    need("inspect_ai", "inspect")
    from inspect_ai.solver import TaskState

    from pau_mcp.inspect_task import observed_examples, pau

    monkeypatch.setenv("PAU_MCP_EXAMPLES", "deployment")
    method = ManifestStore().method("builtin/b001")
    served = deployment_examples([method], sandbox, KEY)[method.id].cases
    lines = [f"{call_text(method.entry, case.input)} -> {case.frozen_outcome().shown()}" for case in served]
    (sample,) = pau(methods="builtin/b001").dataset
    assert all(line in sample.input for line in lines)
    assert not any(call_text(method.entry, case.input) in sample.input for case in method.examples)
    settings = Settings.from_env()
    exposed = serve_examples(Catalog(ManifestStore(), ["builtin"], [method.id], key=KEY), settings).find(method.id)
    assert exposed is not None
    state = TaskState(model="mockllm/model", sample_id=method.id, epoch=1, input=sample.input, messages=[])
    assert observed_examples(state, exposed) == [(e.input, e.output) for e in exposed.examples]
    assert [e.output for e in exposed.examples] == [case.frozen_outcome().shown() for case in served]
