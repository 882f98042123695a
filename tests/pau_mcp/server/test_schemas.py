"""Tool schemas as clients read them: parameters typed from the visible examples, portable, strict-friendly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from conftest import memory_session, text_of, tool_of
from mcp_types import CallToolResult, Tool

from pau_mcp.contract import OUTPUT_SCHEMA
from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Tags
from pau_mcp.server import Exposed

# Keywords that constrain a value: a schema node with none of them accepts anything, which is what the MCP
# Inspector 2.x reports as an untyped, unportable schema (as it does every `type` array).
_CONSTRAINING = {
    "type", "enum", "const", "anyOf", "allOf", "oneOf", "not", "properties", "items", "additionalProperties",
    "required", "$ref", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
}  # fmt: skip


def _method(params: list[str], examples: list[str], tests: Sequence[str] = ()) -> Method:
    header = f"def test_func({', '.join(params)}):"
    return Method(
        id="t/m", header=header, params=params, source=f"{header}\n    return 0\n", description="returns zero",
        examples=[Case(input=e) for e in examples], tests=[Case(input=t) for t in tests],
        provenance=Provenance(dataset="test"), tags=Tags(arity=len(params)),
    )  # fmt: skip


def _schema(params: list[str], examples: list[str], tests: Sequence[str] = ()) -> dict[str, Any]:
    return Exposed(_method(params, examples, tests), "fn_0000000000").input_schema()


def _bare(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without its descriptions."""
    if isinstance(schema, dict):
        return {k: _bare(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema


def _unportable(schema: Any, path: str = "") -> list[str]:
    """Every node a client may not read: a `type` array, or a node that constrains nothing."""
    found = []
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            found.append(f"{path}: type array {schema['type']}")
        if not _CONSTRAINING & set(schema):
            found.append(f"{path}: untyped")
        for key in ("properties", "additionalProperties", "items"):
            value = schema.get(key)
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    found += _unportable(sub, f"{path}.properties.{name}")
            elif isinstance(value, dict):
                found += _unportable(value, f"{path}.{key}")
        for key in ("anyOf", "oneOf", "allOf"):
            for i, sub in enumerate(schema.get(key, [])):
                found += _unportable(sub, f"{path}.{key}[{i}]")
    return found


def test_each_parameter_takes_the_json_type_its_visible_examples_show() -> None:
    schema = _schema(
        ["n", "x", "s", "flag", "items", "table", "mixed", "maybe"],
        [
            "(1, 2, 'a', True, [1, 2], {'k': 1}, 1, None)",
            "(5, 2.5, 'b', False, [3], {'j': 2}, 'one', 4)",
        ],
    )
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    properties = _bare(schema["properties"])
    assert properties["n"] == {"type": "integer"}
    assert properties["x"] == {"type": "number"}
    assert properties["s"] == {"type": "string"}
    assert properties["flag"] == {"type": "boolean"}
    assert properties["items"] == {"type": "array", "items": {"type": "integer"}}
    assert properties["table"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert properties["mixed"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert properties["maybe"] == {"anyOf": [{"type": "null"}, {"type": "integer"}]}
    assert properties["args"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert "an integer" in schema["properties"]["n"]["description"]
    assert "`args`" in schema["properties"]["n"]["description"]


def test_parameter_types_never_come_from_the_hidden_tests() -> None:
    schema = _schema(["arg0"], ["(1,)", "(2,)"], tests=["('hidden-text',)", "([1, 2],)", "(None,)"])
    assert _bare(schema["properties"]["arg0"]) == {"type": "integer"}
    assert "hidden-text" not in str(schema)


def test_values_json_cannot_carry_keep_their_closest_type_and_point_to_args() -> None:
    schema = _schema(["pair", "raw"], ["((1, 2), b'ab')", "((3, 4), b'')"])
    pair, raw = schema["properties"]["pair"], schema["properties"]["raw"]
    assert _bare(pair) == {"type": "array", "items": {"type": "integer"}}
    assert "tuples" in pair["description"] and "list" in pair["description"] and "`args`" in pair["description"]
    assert raw["type"] == "string" and "bytes" in raw["description"] and "`args`" in raw["description"]


def test_every_schema_a_server_lists_is_portable_and_valid(tmp_path: Path) -> None:
    async def main() -> list[Tool]:
        async with memory_session("--db", str(tmp_path / "runs.db")) as session:
            return (await session.list_tools()).tools

    tools = anyio.run(main)
    assert len(tools) > 60
    problems = []
    for tool in tools:
        for kind, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            if schema is None:
                continue
            jsonschema.Draft202012Validator.check_schema(schema)
            problems += [f"{tool.name} {kind}{p}" for p in _unportable(schema)]
    assert problems == []
    assert _unportable(OUTPUT_SCHEMA) == []
    for method in ManifestStore().suite("builtin").methods.values():
        listed = next(t for t in tools if t.name == tool_of(method.id))
        for name in method.params:
            assert (
                "type" in listed.input_schema["properties"][name] or "anyOf" in listed.input_schema["properties"][name]
            )


def test_a_json_value_of_another_type_is_refused_and_args_still_takes_it(tmp_path: Path) -> None:
    tool = tool_of("builtin/b001")

    async def main() -> tuple[CallToolResult, CallToolResult]:
        async with memory_session("--db", str(tmp_path / "runs.db"), "--methods", "builtin/b001") as session:
            wrong = await session.call_tool(tool, {"arg0": "abc"})
            literal = await session.call_tool(tool, {"args": "('abc',)"})
            return wrong, literal

    wrong, literal = anyio.run(main)
    assert wrong.is_error
    text = text_of(wrong.content[0])
    assert "arg0" in text and "an integer" in text and "args" in text
    assert wrong.structured_content["status"] == "invalid_input"
    assert not literal.is_error and literal.structured_content["queries_used"] == 1


def test_args_is_the_call_when_it_is_a_string_and_null_leaves_it_to_the_parameters(tmp_path: Path) -> None:
    """What a strict-mode client sends: every property, the unused form as null or a placeholder."""
    tool = tool_of("builtin/b001")

    async def main() -> tuple[CallToolResult, CallToolResult]:
        async with memory_session("--db", str(tmp_path / "runs.db"), "--methods", "builtin/b001") as session:
            by_args = await session.call_tool(tool, {"arg0": 0, "args": "(234,)"})
            by_json = await session.call_tool(tool, {"arg0": 57, "args": None})
            return by_args, by_json

    by_args, by_json = anyio.run(main)
    assert not by_args.is_error and text_of(by_args.content[0]).startswith("test_func(234) returned 24")
    assert not by_json.is_error and text_of(by_json.content[0]).startswith("test_func(57) returned 35")
    for result in (by_args, by_json):
        jsonschema.validate(result.structured_content, OUTPUT_SCHEMA)
