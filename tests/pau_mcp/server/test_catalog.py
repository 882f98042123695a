"""What the catalog publishes about results: one list of statuses, a schema generated from the result model."""

from __future__ import annotations

import jsonschema
import pytest
from pydantic import ValidationError

from pau_mcp.manifests.model import FrozenOutcome
from pau_mcp.server.catalog import OUTPUT_SCHEMA, RAN, REFUSED, ToolResult
from wasm_runtime import Status


def test_the_statuses_of_results_and_of_frozen_outcomes_are_the_sandboxs_one_list():
    assert {*RAN, "invalid_input"} == {status.value for status in Status}
    assert set(REFUSED) - {status.value for status in Status} == {"over_budget", "unknown_tool"}
    for status in Status:
        assert FrozenOutcome(status=status.value).status == status
    with pytest.raises(ValidationError):
        FrozenOutcome(status="over_budget")  # a refusal is not an outcome of a run


def test_the_tool_output_schema_is_the_result_models_own():
    assert set(OUTPUT_SCHEMA["properties"]) == set(ToolResult.model_fields)
    assert OUTPUT_SCHEMA["properties"]["status"]["enum"] == [*RAN, *REFUSED]
    assert OUTPUT_SCHEMA["required"] == ["status", "queries_used", "queries_left"]
    # Nullables stay portable (two anyOf branches) and nothing pydantic-only leaks to clients.
    assert OUTPUT_SCHEMA["properties"]["value"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "title" not in str(OUTPUT_SCHEMA)
    result = ToolResult(status="ok", value="3", value_type="int", queries_used=1, queries_left=19)
    jsonschema.validate(result.model_dump(), OUTPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**result.model_dump(), "status": "maybe"}, OUTPUT_SCHEMA)
