"""What the catalog publishes: one list of statuses, a result schema generated from the result model, and each
method's facts as data that say what its description says and nothing hidden."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema
import pytest
from conftest import SECRETS, stdio_session, tool_of
from mcp_types import Tool
from pydantic import ValidationError

from pau_mcp.contract import FACTS_KEY, OUTPUT_SCHEMA, RAN, REFUSED, MethodFacts, ToolResult, ToolStatus
from pau_mcp.manifests import ManifestStore, call_text
from pau_mcp.manifests.model import FrozenOutcome
from pau_mcp.server.catalog import Exposed
from wasm_runtime import Status
from wasm_runtime.literals import parse_arguments


def test_the_statuses_of_results_and_of_frozen_outcomes_are_the_sandboxs_one_list() -> None:
    assert {*RAN, "invalid_input"} == {status.value for status in Status}
    assert set(REFUSED) - {status.value for status in Status} == {"over_budget", "unknown_tool"}
    for status in Status:
        assert FrozenOutcome.model_validate({"status": status.value}).status == status
    with pytest.raises(ValidationError):
        FrozenOutcome.model_validate({"status": "over_budget"})  # a refusal is not an outcome of a run


def test_the_tool_output_schema_is_the_result_models_own() -> None:
    assert set(OUTPUT_SCHEMA["properties"]) == set(ToolResult.model_fields)
    assert OUTPUT_SCHEMA["properties"]["status"]["enum"] == [*RAN, *REFUSED]
    assert OUTPUT_SCHEMA["required"] == ["status", "queries_used", "queries_left"]
    # Nullables stay portable (two anyOf branches) and nothing pydantic-only leaks to clients.
    assert OUTPUT_SCHEMA["properties"]["value"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "title" not in str(OUTPUT_SCHEMA)
    result = ToolResult(status=ToolStatus.OK, value="3", value_type="int", queries_used=1, queries_left=19)
    jsonschema.validate(result.model_dump(), OUTPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**result.model_dump(), "status": "maybe"}, OUTPUT_SCHEMA)


def test_each_method_tool_publishes_the_facts_its_description_states_as_data_and_nothing_hidden(
    tmp_path: Path, secret_manifests: Path
) -> None:
    async def main() -> list[Tool]:
        args = ("--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "runs.db"))
        async with stdio_session(*args, "--budget", "4") as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(main)}
    assert tools["submit"].meta is None and tools["open"].meta is None
    methods = ManifestStore([secret_manifests]).suite("secret").methods.values()
    for method in methods:
        tool = tools[tool_of(method.id)]
        assert tool.meta is not None, tool
        description = tool.description or ""
        facts = tool.meta[FACTS_KEY]
        assert set(facts) == set(MethodFacts.model_fields) == {"header", "entry", "params", "examples", "budget"}
        assert facts["header"] == method.header and f"`{method.header}`" in description
        assert facts["entry"] == "test_func"
        assert facts["params"] == [name for name in tool.input_schema["properties"] if name != "args"]
        assert facts["budget"] == 4 and "call it 4 times" in description
        assert len(facts["examples"]) == len(method.examples) > 0
        for example, case in zip(facts["examples"], method.examples, strict=True):
            assert set(example) == {"line", "input", "output"}
            assert f"  {example['line']}\n" in description
            assert example["line"] == f"{call_text(facts['entry'], example['input'])} -> {example['output']}"
            assert parse_arguments(example["input"]) == parse_arguments(case.input)
            assert example["output"] == case.frozen_outcome().shown()
        published = json.dumps(facts)
        hidden = {*SECRETS.values(), method.description, *(case.input for case in method.tests)}
        hidden.update(line.strip() for line in method.source.splitlines() if line.strip() != method.header)
        assert sorted(secret for secret in hidden if secret and secret in published) == []


def test_an_unlimited_budget_is_published_as_null() -> None:
    method = ManifestStore().method("builtin/b001")
    assert Exposed(method, "fn_0000000000").facts(0).budget is None
    assert Exposed(method, "fn_0000000000").facts(20).budget == 20
