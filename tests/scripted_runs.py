"""Runs of the scripted model (tests/fakellm.py) for the results tests: the paper agent, a judge and a code writer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from fakellm import FakeLLM, Reply

from pau_mcp.cli import main

TWO = ("--methods", "builtin/b001", "--methods", "builtin/b002")
SCORED = ("--judge-model", "openai/judge", "--coder-model", "openai/judge")


def scripted(body: dict[str, Any]) -> Reply | str:
    """The paper agent's model explores three inputs and concludes; the judge reasons then rates; the code writer
    returns its argument. Replies carry token counts, so tokens and costs are recorded."""
    text = str(body["messages"][-1].get("content") or "")
    if "Rating:" in text and "<reference-" in text:
        return Reply(text="The description misses the zero case.\nRating: 3", input_tokens=40, output_tokens=9)
    if "Write the Python function described below" in text:
        header = re.search(r"Header: def test_func\((.*)\):", text)
        return f"```python\ndef test_func({header.group(1) if header else 'arg0'}):\n    return arg0\n```"
    if "Give the exact input" in text:
        tried = len(re.findall(r"^  test_func", text, re.M))
        return Reply(text=f"INPUT: ({tried + 2},)", input_tokens=30, output_tokens=5)
    if "Update your hypothesis" in text:
        done = "YES" if len(re.findall(r"^  test_func", text.split("Your latest experiments:")[1], re.M)) >= 2 else "NO"
        return Reply(text=f"HYPOTHESIS: returns its argument\nCONCLUDED: {done}", input_tokens=30, output_tokens=8)
    if "Write your final answer" in text:
        return Reply(text="DESCRIPTION: returns its argument", input_tokens=30, output_tokens=6, reasoning="It echoed.")
    return Reply(text="I will try a small number.", input_tokens=30, output_tokens=6)


def pau(fake: FakeLLM, tmp_path: Path, *args: str) -> Any:
    """``pau-mcp ARGS`` against the scripted model, with the test's data directory and run store."""
    env = {
        "PAU_MCP_TOOL_KEY": "", "PAU_JUDGE_MODEL": "", "PAU_CODER_MODEL": "", "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test",
    }  # fmt: skip
    return CliRunner().invoke(
        main, [*args, "--data-dir", str(tmp_path), "--db", str(tmp_path / "runs.db")], env=env, catch_exceptions=False
    )


def scripted_run(
    tmp_path: Path, run: str, *extra: str, model: str = "openai/agent", methods: tuple[str, ...] = TWO
) -> None:
    """A paper-agent run (of two builtin methods unless told) by the scripted model, scored by the judge and the code
    writer."""
    with FakeLLM(responder=scripted) as fake:
        result = pau(fake, tmp_path, "eval", "--model", model, "--run", run, "--budget", "3", *SCORED, *methods,
                     *extra)  # fmt: skip
    assert result.exit_code == 0, result.output
