"""Initial examples drawn for a deployment: what a server serves with ``--examples deployment``, and where from.

The draws run in the real sandbox; the servers are `pau-mcp serve`'s own (``memory_session``), and the operator's
command runs in this process (``run_pau``).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ROOT, SECRETS, TEST_KEY, memory_session, text_of, tool_of
from mcp_types import Tool
from pau_command import run_pau
from stand_ins import RefusingSandbox

from pau_mcp.config import Settings, SettingsError
from pau_mcp.contract import FACTS_KEY
from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Suite, SuiteInfo, Tags, call_text
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.server.examples import (
    ServedExamples,
    cache_path,
    deployment_examples,
    draw_examples,
    exposure_warning,
    serving,
)
from pau_mcp.server.schemas import parameter_schemas
from wasm_runtime import Sandbox, outcomes_match, parse_arguments

BUILTIN: list[Method] = list(ManifestStore().methods(["builtin"]))
#: What a restart with a full cache draws in: it must not run anything.
_NOTHING_RUNS = RefusingSandbox(AssertionError("the cache should have answered"))
OTHER_KEY = "another-deployment-key-0123456789"


def _canonical(text: str) -> str:
    return repr(parse_arguments(text))


def _json_types(schema: dict[str, Any]) -> set[str]:
    return {branch["type"] for branch in schema.get("anyOf", [schema])}


@pytest.fixture(scope="module")
def drawn(sandbox: Sandbox) -> dict[str, ServedExamples]:
    """Every builtin method's examples for the test key, drawn once for the module (no cache)."""
    return deployment_examples(BUILTIN, sandbox, TEST_KEY)


def test_every_builtin_method_gets_drawn_examples_none_of_them_published_or_a_hidden_test(
    drawn: dict[str, ServedExamples], sandbox: Sandbox
) -> None:
    for method in BUILTIN:
        served = drawn[method.id]
        assert served.origin == "deployment", (method.id, served.detail)
        assert len(served.cases) == len(method.examples)
        hidden = {_canonical(case.input) for case in (*method.examples, *method.tests)}
        assert not {_canonical(case.input) for case in served.cases} & hidden, method.id
        assert len({case.input for case in served.cases}) == len(served.cases)
        # The outcome shown is the hidden function's own, as a call of the tool would give it.
        outcomes = sandbox.run(method.source, [case.input for case in served.cases], engine=method.engine)
        for case, outcome in zip(served.cases, outcomes, strict=True):
            assert outcome.ok and outcomes_match(case.frozen_outcome().outcome(), outcome), (method.id, case.input)


def test_the_examples_keep_the_published_types_and_where_the_published_outputs_differ_so_do_theirs(
    drawn: dict[str, ServedExamples],
) -> None:
    for method in BUILTIN:
        served = drawn[method.id].cases
        published = parameter_schemas(method.params, [case.input for case in method.examples])
        shown = parameter_schemas(method.params, [case.input for case in served])
        for name in method.params:  # the input schema gives each parameter the same JSON types
            assert _json_types(published[name]) == _json_types(shown[name]), (method.id, name)
        if len({case.frozen_outcome().shown() for case in method.examples}) == len(method.examples):
            assert len({case.frozen_outcome().shown() for case in served}) == len(served), method.id


def test_the_same_key_draws_the_same_examples_and_another_key_draws_others(
    drawn: dict[str, ServedExamples], sandbox: Sandbox
) -> None:
    chosen = BUILTIN[:12]
    again = deployment_examples(chosen, sandbox, TEST_KEY)
    assert [m.id for m in chosen if again[m.id] != drawn[m.id]] == []
    other = deployment_examples(chosen, sandbox, OTHER_KEY)
    assert sum(other[m.id].cases != drawn[m.id].cases for m in chosen) >= 10


@contextmanager
def _stalls(every_s: float, stall_s: float) -> Iterator[None]:
    """This process stalls for ``stall_s`` every ``every_s``, as a long garbage collection stalls it: one thread holds
    the interpreter, so the sandbox's clock catches up on the stall all at once afterwards."""
    done = threading.Event()

    def stall() -> None:
        while not done.wait(every_s):
            end = time.monotonic() + stall_s
            while time.monotonic() < end:
                pass

    interval = sys.getswitchinterval()
    sys.setswitchinterval(stall_s * 2)  # the stalling thread keeps the interpreter for the whole stall
    thread = threading.Thread(target=stall, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=30)
        sys.setswitchinterval(interval)


def test_a_process_that_stalls_while_drawing_draws_the_same_examples(tmp_path: Path, sandbox: Sandbox) -> None:
    # Each input asks the host for the time at every step, so a stall holds it mid-run; its fuel, the same
    # everywhere, decides whether it finishes. The clock used to stop any input held through a stall of half a
    # second, and the deployment then served other examples than its replicas on steadier machines.
    source = (
        "def test_func(arg0):\n"
        "    import time\n"
        "    steps = sum(1 for _ in range(2000) if time.monotonic() >= 0)\n"
        "    return arg0 * 3 + steps % 7\n"
    )
    method = Method(
        id="clocked/m1", header="def test_func(arg0):", params=["arg0"], source=source,
        description="Returns three times its argument plus six.",
        examples=[Case(input="(4,)"), Case(input="(9,)")], tests=[Case(input="(12,)")],
        provenance=Provenance(dataset="test"), tags=Tags(arity=1),
    )  # fmt: skip
    Suite.create(tmp_path, SuiteInfo(name="clocked")).save(freeze_method(method, sandbox))
    frozen = ManifestStore([tmp_path]).method("clocked/m1")
    steady = draw_examples(frozen, sandbox, TEST_KEY)
    assert steady.origin == "deployment", steady.detail
    with _stalls(every_s=0.15, stall_s=0.6):
        stalled = draw_examples(frozen, sandbox, TEST_KEY)
    assert (stalled.cases, stalled.detail) == (steady.cases, steady.detail)


def test_drawn_examples_are_kept_in_a_private_file_named_without_the_key_and_read_back_on_restart(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    chosen = BUILTIN[:5]
    cache = cache_path(tmp_path, TEST_KEY)
    first = deployment_examples(chosen, sandbox, TEST_KEY, cache=cache)
    assert TEST_KEY not in str(cache) and TEST_KEY not in cache.read_text()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert cache_path(tmp_path, OTHER_KEY) != cache
    assert deployment_examples(chosen, _NOTHING_RUNS, TEST_KEY, cache=cache) == first
    # A method whose code changed is drawn again; the others still come from the file.
    changed = chosen[0].model_copy(update={"source": chosen[0].source.replace("result = 1", "result = 2")})
    with pytest.raises(AssertionError, match="cache should have answered"):
        deployment_examples([changed], _NOTHING_RUNS, TEST_KEY, cache=cache)
    assert deployment_examples(chosen[1:], _NOTHING_RUNS, TEST_KEY, cache=cache) == {
        m.id: first[m.id] for m in chosen[1:]
    }


def test_a_damaged_cache_is_drawn_again_with_a_warning(
    tmp_path: Path, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    cache = cache_path(tmp_path, TEST_KEY)
    cache.parent.mkdir(parents=True)
    cache.write_text('{"version": 1, "methods": {"builtin/b001": {"digest": "x"')
    with caplog.at_level(logging.WARNING, logger="pau_mcp.server"):
        served = deployment_examples(BUILTIN[:1], sandbox, TEST_KEY, cache=cache)
    assert served[BUILTIN[0].id].origin == "deployment"
    assert "cannot be read" in caplog.text
    assert json.loads(cache.read_text())["methods"][BUILTIN[0].id]["origin"] == "deployment"


def _picky_suite(root: Path, sandbox: Sandbox) -> Path:
    """A suite whose one method takes only its published inputs: nothing drawn can replace them."""
    source = (
        "def test_func(arg0):\n"
        "    if arg0 not in ('exact-token-17', 'exact-token-18', 'exact-token-19'):\n"
        "        raise ValueError('unknown token')\n"
        "    return arg0[-2:]\n"
    )
    method = Method(
        id="picky/m1", header="def test_func(arg0):", params=["arg0"], source=source,
        description="Returns the last two characters of one of three known tokens.",
        examples=[Case(input="('exact-token-17',)"), Case(input="('exact-token-18',)")],
        tests=[Case(input="('exact-token-19',)"), Case(input="('other',)")],
        provenance=Provenance(dataset="test"), tags=Tags(arity=1),
    )  # fmt: skip
    Suite.create(root, SuiteInfo(name="picky")).save(freeze_method(method, sandbox))
    return root


def test_a_method_no_drawn_input_works_for_keeps_its_published_examples_and_the_operator_is_told(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    manifests = _picky_suite(tmp_path / "manifests", sandbox)
    method = ManifestStore([manifests]).method("picky/m1")
    served = draw_examples(method, sandbox, TEST_KEY)
    assert served.origin == "published" and served.cases == tuple(method.examples)
    assert "kept the published examples" in served.detail
    listed = run_pau(
        "methods", "--manifests", str(manifests), "--suite", "picky", "--examples", "deployment", "--json",
        "--data-dir", str(tmp_path / "data"), env=dict(os.environ), cwd=ROOT,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["examples_from"] == "published"
    said = " ".join(listed.stderr.split())
    assert "1 keep their published ones, which identify them: picky/m1" in said


def test_every_text_an_agent_sees_quotes_the_served_examples_and_none_the_published_ones(
    tmp_path: Path, secret_manifests: Path, sandbox: Sandbox
) -> None:
    store = ManifestStore([secret_manifests])
    methods = [*BUILTIN[::6], *store.methods(["secret"])]
    args = (
        "--manifests", str(secret_manifests), "--suite", "builtin", "--suite", "secret", "--examples", "deployment",
        "--methods", ",".join(m.id for m in methods), "--data-dir", str(tmp_path / "data"),
        "--db", str(tmp_path / "runs.db"), "--budget", "3",
    )  # fmt: skip
    expected = deployment_examples(methods, sandbox, TEST_KEY)
    # A function that loops on nearly every input (secret/m2) keeps its published examples: nothing else returns.
    assert [m.id for m in methods if expected[m.id].origin == "published"] == ["secret/m2"]

    async def main() -> tuple[list[Tool], dict[str, str], dict[str, str]]:
        async with memory_session(*args) as session:
            tools = [t for t in (await session.list_tools()).tools if t.name.startswith("fn_")]
            resources: dict[str, str] = {}
            prompts: dict[str, str] = {}
            for tool in tools:
                read = await session.read_resource(f"pau://method/{tool.name}")
                resources[tool.name] = text_of(read.contents[0])
                got = await session.get_prompt(tool.name)
                prompts[tool.name] = text_of(got.messages[0].content)
            return tools, resources, prompts

    tools, resources, prompts = anyio.run(main)
    by_tool = {tool.name: tool for tool in tools}
    assert set(by_tool) == {tool_of(m.id) for m in methods}
    for method in methods:
        tool = by_tool[tool_of(method.id)]
        assert tool.meta is not None and tool.description is not None, tool
        cases = expected[method.id].cases
        lines = [f"{call_text(method.entry, case.input)} -> {case.frozen_outcome().shown()}" for case in cases]
        facts = tool.meta[FACTS_KEY]
        assert [e["line"] for e in facts["examples"]] == lines
        assert [e["output"] for e in facts["examples"]] == [case.frozen_outcome().shown() for case in cases]
        for line in lines:
            assert f"  {line}\n" in tool.description and line in resources[tool.name] and line in prompts[tool.name]
        schemas = parameter_schemas(method.params, [case.input for case in cases])
        assert {name: tool.input_schema["properties"][name] for name in method.params} == schemas
        seen = "\n".join(
            [tool.description or "", json.dumps(tool.input_schema), resources[tool.name], prompts[tool.name]]
        )
        assert not any(secret in seen for secret in SECRETS.values())
        if expected[method.id].origin == "deployment":  # the published examples appear nowhere an agent looks
            for case in method.examples:
                assert f"{call_text(method.entry, case.input)} -> {case.frozen_outcome().shown()}" not in seen, (
                    method.id
                )


def test_the_served_methods_carry_the_served_examples_for_code_that_reads_them(
    drawn: dict[str, ServedExamples],
) -> None:
    methods = serving(BUILTIN[:3], {BUILTIN[0].id: drawn[BUILTIN[0].id]})
    assert methods[0].examples == list(drawn[BUILTIN[0].id].cases)
    assert methods[0].tests == BUILTIN[0].tests and methods[0].source == BUILTIN[0].source
    assert methods[1:] == BUILTIN[1:3]


def test_the_reference_protocol_takes_only_the_published_examples() -> None:
    with pytest.raises(SettingsError, match="--examples deployment") as refused:
        Settings.from_options(protocol="reference", examples="deployment")
    assert "--protocol pau-mcp" in str(refused.value)
    assert Settings.from_options(protocol="reference").examples == "published"
    assert Settings.from_options(examples="deployment").examples == "deployment"


def test_examples_default_to_the_published_ones_and_the_variable_matches_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().examples == "published"
    monkeypatch.setenv("PAU_MCP_EXAMPLES", "deployment")
    assert Settings.from_env().examples == "deployment"
    monkeypatch.setenv("PAU_MCP_EXAMPLES", "mine")
    with pytest.raises(SettingsError, match="--examples / PAU_MCP_EXAMPLES"):
        Settings.from_env()


def test_an_operator_serving_a_public_suites_published_examples_beyond_loopback_is_warned() -> None:
    warning = exposure_warning("published", "0.0.0.0", ["builtin"])
    assert warning is not None and "--examples deployment" in warning and "pau-mcp create" in warning
    assert exposure_warning("deployment", "0.0.0.0", ["builtin"]) is None
    assert exposure_warning("published", "127.0.0.1", ["builtin"]) is None
    assert exposure_warning("published", "0.0.0.0", []) is None  # private suites' examples are not public
