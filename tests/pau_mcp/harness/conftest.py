"""Fixtures for the harness tests: a method whose function is not called ``test_func``, served over stdio."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags, tool_name
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox

_ROOT = Path(__file__).resolve().parents[3]
_KEY = "harness-test-key-0123456789abcdef"
VOWELS = "vowels/count"


@pytest.fixture(scope="session")
def vowels(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manifests directory with suite ``vowels``: one method, ``def count_vowels(s):``, frozen in the real sandbox."""
    root = tmp_path_factory.mktemp("manifests")
    method = Method(
        id=VOWELS, header="def count_vowels(s):", params=["s"], entry="count_vowels",
        source="def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
        description="Counts the vowels a, e, i, o and u, in either case.",
        # One input as a bare literal, not a tuple: still one argument.
        examples=[Case(input="('hello',)"), Case(input="'SKY'"), Case(input="(None,)")],
        tests=[Case(input="('queue',)"), Case(input="('Rhythm',)")], provenance=Provenance(dataset="test"),
        tags=Tags(arity=1),
    )  # fmt: skip
    Suite.create(root, SuiteInfo(name="vowels")).save(freeze_method(method, sandbox))
    return root


@pytest.fixture
def vowels_environment(vowels: Path, tmp_path: Path) -> Callable[[], Any]:
    """Opens an ``Environment`` on the vowels method over a `pau-mcp serve` stdio session (budget 3), as
    `pau-mcp demo` opens one."""
    from pau_mcp.harness import Environment

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[Environment]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "pau_mcp", "serve", "--manifests", str(vowels), "--suite", "vowels",
                  "--db", str(tmp_path / "runs.db"), "--budget", "3"],
            cwd=str(_ROOT), env={**os.environ, "PAU_MCP_TOOL_KEY": _KEY},
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                yield await Environment.open(session, tool_name(_KEY, VOWELS))

    return opened
