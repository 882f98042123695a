"""What the harness's Environment knows of a method before calling it: the facts its tool publishes, whatever the
method's function is called."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pau_mcp.harness import Environment
from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags, tool_name
from pau_mcp.manifests.checks import freeze_method

ROOT = Path(__file__).resolve().parents[3]
KEY = "environment-test-key-0123456789abcdef"
METHOD = "vowels/count"


@pytest.fixture(scope="module")
def vowels(sandbox, tmp_path_factory) -> Path:
    """A suite whose one method's function is ``count_vowels``, not ``test_func``, frozen in the real sandbox."""
    root = tmp_path_factory.mktemp("manifests")
    method = Method(
        id=METHOD, header="def count_vowels(s):", params=["s"], entry="count_vowels",
        source="def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
        description="Counts the vowels a, e, i, o and u, in either case.",
        # One input as a bare literal, not a tuple: still one argument.
        examples=[Case(input="('hello',)"), Case(input="'SKY'"), Case(input="(None,)")],
        tests=[Case(input="('queue',)")], provenance=Provenance(dataset="test"), tags=Tags(arity=1),
    )  # fmt: skip
    Suite.create(root, SuiteInfo(name="vowels")).save(freeze_method(method, sandbox))
    return root


@contextlib.asynccontextmanager
async def _environment(manifests: Path, db: Path) -> AsyncIterator[Environment]:
    """An Environment over a `pau-mcp serve` stdio session, as `pau-mcp demo` opens one."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pau_mcp", "serve", "--manifests", str(manifests), "--suite", "vowels", "--db", str(db),
              "--budget", "3"],
        cwd=str(ROOT), env={**os.environ, "PAU_MCP_TOOL_KEY": KEY},
    )  # fmt: skip
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
            yield await Environment.open(session, tool_name(KEY, METHOD))


def test_a_method_whose_function_is_not_test_func_gets_its_header_and_initial_examples(vowels, tmp_path):
    async def main() -> None:
        async with _environment(vowels, tmp_path / "runs.db") as env:
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


def test_a_tool_without_published_facts_gives_a_placeholder_header_no_examples_and_its_schemas_parameters():
    description = "A hidden Python function `def guess(a, b):`.\nKnown examples:\n  test_func(1, 2) -> 3\n"
    tool = types.Tool(
        name="other",
        description=description,
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "args": {}}},
    )
    env = Environment(session=None, tool=tool, submit_tool=tool)  # type: ignore[arg-type]
    assert env.facts is None
    assert env.header == "def test_func(...):"
    assert env.params == ["a", "b"]
    assert env.examples == [] and env.observed_examples() == []
