"""Fixture suites as data: the conformance suite loads and every part of it is valid MCP; malformed data is refused
with a message naming what to fix; placeholders are filled in linear time, and what a client sent is quoted cut."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from conftest import text_of
from pydantic import ValidationError

from pau_mcp.server.fixtures import (
    FIXTURE_SUITES,
    FixtureError,
    FixtureSuite,
    FixtureTool,
    Scope,
    fixture_suites,
    load_fixture_suite,
    render,
)


def test_the_conformance_suite_loads_and_every_listing_is_valid_mcp() -> None:
    suite = load_fixture_suite("conformance")
    assert "conformance" in FIXTURE_SUITES
    names = [tool.name for tool in suite.tools]
    assert {"test_simple_text", "test_missing_capability", "slow_compute", "test_tool_with_task"} <= set(names)
    for tool in suite.tools:
        types.Tool.model_validate(tool.listing().model_dump(by_alias=True))
    for prompt in suite.prompts:
        types.Prompt.model_validate(prompt.listing().model_dump(by_alias=True))
    read = suite.read("test://template/42/data")
    assert read is not None and '"id":"42"' in text_of(read.contents[0])
    assert suite.read("test://template/42/other") is None


def test_fixture_suites_are_split_from_the_catalogs_suites() -> None:
    catalog, fixtures = fixture_suites(["builtin", "conformance"])
    assert catalog == ["builtin"] and fixtures is not None and fixtures.name == "conformance"
    assert fixture_suites(["builtin"]) == (["builtin"], None)
    with pytest.raises(FixtureError, match="no fixture suite 'nope'"):
        load_fixture_suite("nope")


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({"steps": [{"sleep_ms": 1, "log": {"level": "info", "data": "x"}}]}, "a step does exactly one thing"),
        ({"task": "optional"}, 'needs a {"task": true} step'),
        ({"steps": [{"task": True}]}, 'needs "task": "optional" or "required"'),
        ({"result": {"content": [{"type": "nonsense"}]}}, "content"),
        ({"result": None}, "a tool needs a result"),
    ],
)
def test_a_malformed_fixture_is_refused_saying_what_to_fix(tool: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FixtureTool.model_validate(
            {"name": "t", "description": "d", "result": {"content": [{"type": "text", "text": "x"}]}, **tool}
        )


def test_a_suite_naming_a_tool_twice_is_refused() -> None:
    tool = {"name": "t", "description": "d", "result": {"content": []}}
    with pytest.raises(ValidationError, match="tools named twice: t"):
        FixtureSuite.model_validate({"name": "s", "title": "s", "description": "s", "tools": [tool, tool]})


def test_placeholders_quote_values_and_fall_back_to_their_default() -> None:
    scope = Scope(args={"n": 3, "s": "text"}, answers={"k": {"content": {"a": [1, 2]}}}, blobs={"b": "B" * 40_000})
    assert render("${args.s}/${args.n}/${answers.k.content}/${missing|none}/${missing}", scope) == (
        'text/3/{"a":[1,2]}/none/'
    )
    assert render({"list": ["${args.s}", 5]}, scope) == {"list": ["text", 5]}
    assert render("${answered|nothing}", Scope()) == "nothing" and render("${answered}", scope) == "k"
    # What the client sent is quoted cut; the suite's own data whole.
    assert len(render("${args.s}", Scope(args={"s": "x" * 100_000}))) == 16 * 1024 + 3
    assert len(render("${blobs.b}", scope)) == 40_000
