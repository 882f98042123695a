"""Exploration coverage is for the operator only: no tool result, resource or error an agent gets carries it.

The coverage of the session's own episode is measured into the very store the
server writes to, and the hidden function forges a trace into its outcome; a
whole session is then searched for any of it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from conftest import memory_session, tool_of

from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Suite, SuiteInfo, Tags
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.runstore import RunStore
from pau_mcp.scoring.coverage import measure_coverage
from wasm_runtime import Sandbox

FORGER = (
    "def test_func(arg0):\n"
    "    import sys\n"
    "    for module in list(sys.modules.values()):\n"
    "        if hasattr(module, '_TRACED'):\n"
    "            module._TRACED['current'] = ({4242}, {(4242, 4343)})\n"
    "    if arg0 > 10:\n"
    "        return arg0 - 10\n"
    "    return arg0\n"
)


@pytest.fixture(scope="module")
def forger(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forger")
    suite = Suite.create(root, SuiteInfo(name="cov"))
    method = Method(
        id="cov/forger", header="def test_func(arg0):", params=["arg0"], source=FORGER,
        description="Takes ten off numbers over ten.", examples=[Case(input="(3,)")], tests=[Case(input="(30,)")],
        provenance=Provenance(dataset="test"), tags=Tags(arity=1),
    )  # fmt: skip
    suite.save(freeze_method(method, sandbox))
    return root


def test_no_reply_of_a_session_carries_a_trace_or_the_measured_coverage(
    tmp_path: Path, forger: Path, sandbox: Sandbox
) -> None:
    db = tmp_path / "runs.db"
    method = ManifestStore([forger]).method("cov/forger")
    tool = tool_of(method.id)
    # The operator measured this method's coverage into the same store: its numbers and line lists.
    measured = anyio.run(lambda: measure_coverage(sandbox, method, ["(3,)", "(12,)"]))
    assert measured["status"] == "measured" and 4242 in measured["agent_lines"]  # the forged trace, traced runs only
    store = RunStore(db)
    run_id = store.ensure_run("op", "eval", {})
    store.plan_episodes(run_id, [method.id])
    store.record_coverage(run_id, method.id, measured)
    store.close()
    replies: list[str] = []

    async def main() -> None:
        async with memory_session("--db", str(db), "--manifests", str(forger), "--suite", "cov", "--budget", "3") as s:
            replies.append((await s.list_tools()).model_dump_json())
            replies.append((await s.list_resources()).model_dump_json())
            replies.append((await s.read_resource(f"pau://method/{tool}")).model_dump_json())
            for arguments in ({"arg0": 3}, {"arg0": 12}, {"arg0": "x"}, {"args": "(1, 2)"}, {"arg0": 1}, {"arg0": 2}):
                result = await s.call_tool(tool, arguments)
                replies.append(result.model_dump_json())
                if result.structured_content:
                    assert not {"trace", "coverage", "lines", "arcs"} & set(result.structured_content)
            replies.append((await s.call_tool("submit", {"method": tool, "description": "ten off"})).model_dump_json())

    anyio.run(main)
    text = "\n".join(replies)
    assert '"value":"2"' in text.replace(" ", "")  # 12 was served: the function ran with its forged trace
    for marker in ("4242", "4343", "agent_of_tests", "test_lines", "agent_lines", "trace", "coverage"):
        assert marker not in text, marker
