"""What the harness's Environment knows of a method before calling it: the facts its tool publishes, whatever the
method's function is called, and nothing read from the description's prose."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import mcp_types as types

from pau_mcp.contract import FACTS_KEY
from pau_mcp.harness import Environment

if TYPE_CHECKING:
    from conftest import OpenEnvironment


def test_a_method_whose_function_is_not_test_func_gets_its_header_and_initial_examples(
    vowels_environment: OpenEnvironment,
) -> None:
    async def main() -> None:
        async with vowels_environment() as env:
            assert env.header == "def count_vowels(s):"
            assert env.params == ["s"]
            assert env.examples == [
                "count_vowels('hello') -> 2",
                "count_vowels('SKY') -> 0",
                "count_vowels(None) -> raises AttributeError: 'NoneType' object has no attribute 'lower'",
            ]
            for line in env.examples:
                assert f"  {line}\n" in (env.tool.description or "")
            assert env.observed_examples() == [
                ("('hello',)", "2"),
                ("('SKY',)", "0"),
                ("(None,)", "raises AttributeError: 'NoneType' object has no attribute 'lower'"),
            ]
            await env.call({"args": "('aeiou',)"})
            assert env.observed_examples()[-1] == ("('aeiou',)", "5")

    anyio.run(main)


def test_a_tool_without_published_facts_gives_a_placeholder_header_no_examples_and_its_schemas_parameters() -> None:
    description = "A hidden Python function `def guess(a, b):`.\nKnown examples:\n  test_func(1, 2) -> 3\n"
    tool = types.Tool(
        name="other",
        description=description,
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "args": {}}},
    )
    env = Environment(session=None, tool=tool, submit_tool=tool)
    assert env.facts is None
    assert (env.header, env.entry) == ("def test_func(...):", "test_func")
    assert env.params == ["a", "b"]
    assert env.examples == [] and env.observed_examples() == []


def test_published_facts_that_do_not_validate_are_no_facts() -> None:
    facts = {"header": "def f(x):", "entry": "f(); import os #", "params": ["x"], "examples": [], "budget": None}
    tool = types.Tool(name="other", input_schema={"type": "object", "properties": {"x": {}}}, _meta={FACTS_KEY: facts})
    env = Environment(session=None, tool=tool, submit_tool=tool)
    assert env.facts is None and env.entry == "test_func"
