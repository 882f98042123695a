"""Which method is this tool? An agent holding the public suite attacks the lists a server gives, with no call.

The attacker has what anyone has: this repository's manifests (method ids, examples, gold descriptions, sources).
It identifies tools by their position in the list (method-id order), by the example texts the public manifests
publish, and by how near the served inputs are to the published ones. Against a server that lists by keyed name
and serves examples drawn for its deployment, none does better than chance among the tools whose parameter types
look alike (types the examples must show). What a public suite cannot hide is its behaviour: running the public
sources on the served examples still names the tools, as docs/server.md's threat model says.

The servers are `pau-mcp serve`'s own, built in the test's process (``memory_session``).
"""

from __future__ import annotations

import difflib
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import anyio
import mcp_types as types
from conftest import TEST_KEY, memory_session

from pau_mcp.contract import FACTS_KEY, MethodFacts
from pau_mcp.manifests import ManifestStore, Method, call_text, tool_name
from pau_mcp.server import Catalog
from wasm_runtime import Limits, Sandbox, parse_arguments

#: What a participant downloads: the public suite, hidden parts included.
PUBLIC: list[Method] = list(ManifestStore().methods(["builtin"]))
IDS = sorted(m.id for m in PUBLIC)
KEYS = [f"deployment-{n}-0123456789abcdef" for n in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]


def _canonical(text: str) -> str:
    return repr(parse_arguments(text))


PUBLISHED_INPUTS = {m.id: {_canonical(c.input) for c in m.examples} for m in PUBLIC}
PUBLISHED_LINES = {
    m.id: {f"{call_text(m.entry, c.input)} -> {c.frozen_outcome().shown()}" for c in m.examples} for m in PUBLIC
}


async def _listing(*args: str) -> tuple[list[types.Tool], list[str], list[str]]:
    """Every tool, resource name and prompt name a fresh session of ``pau-mcp serve ARGS`` lists, in order."""
    async with memory_session(*args) as session:
        tools = [t for t in (await session.list_tools()).tools if t.name.startswith("fn_")]
        resources = [r.name for r in (await session.list_resources()).resources]
        prompts = [p.name for p in (await session.list_prompts()).prompts]
    return tools, resources, prompts


def _serve(tmp_path: Path, key: str, examples: str) -> list[types.Tool]:
    args = (
        "--tool-key",
        key,
        "--examples",
        examples,
        "--data-dir",
        str(tmp_path / key),
        "--db",
        str(tmp_path / "r.db"),
    )
    tools, _, _ = anyio.run(_listing, *args)
    return tools


# -- the attacks ----------------------------------------------------------------------------------------------


def by_order(tools: list[types.Tool]) -> dict[str, str]:
    """Tool i is the i-th method id."""
    return {tool.name: method_id for tool, method_id in zip(tools, IDS, strict=False)}


def _facts(tool: types.Tool) -> MethodFacts:
    assert tool.meta is not None, tool.name
    return MethodFacts.model_validate(tool.meta[FACTS_KEY])


def by_examples(tools: list[types.Tool]) -> dict[str, str]:
    """The method whose published example lines and inputs the tool shows most of (lines count double)."""
    guesses = {}
    for tool in tools:
        examples = _facts(tool).examples
        lines = {e.line for e in examples}
        inputs = {_canonical(e.input) for e in examples}
        scores = {
            m.id: 2 * len(lines & PUBLISHED_LINES[m.id]) + len(inputs & PUBLISHED_INPUTS[m.id]) for m in PUBLIC
        }  # fmt: skip
        best = max(scores, key=lambda i: scores[i])
        if scores[best]:
            guesses[tool.name] = best
    return guesses


def by_nearness(tools: list[types.Tool]) -> dict[str, str]:
    """Among the methods of the tool's arity, the one whose published inputs are the most alike the served ones."""
    guesses = {}
    for tool in tools:
        facts = _facts(tool)
        served = [_canonical(e.input) for e in facts.examples]

        def likeness(method: Method, served: list[str] = served) -> float:
            return sum(
                max(difflib.SequenceMatcher(None, text, known).ratio() for known in PUBLISHED_INPUTS[method.id])
                for text in served
            )

        candidates = [m for m in PUBLIC if len(m.params) == len(facts.params)]
        guesses[tool.name] = max(candidates, key=likeness).id
    return guesses


def by_behaviour(tools: list[types.Tool], sandbox: Sandbox) -> dict[str, str]:
    """The only method of the tool's arity whose public source gives every served example's output."""
    by_arity: dict[int, list[types.Tool]] = defaultdict(list)
    for tool in tools:
        by_arity[len(_facts(tool).params)].append(tool)
    matching: dict[str, list[str]] = defaultdict(list)
    for method in PUBLIC:
        group = by_arity[len(method.params)]
        inputs = [e.input for tool in group for e in _facts(tool).examples]
        outcomes = iter(
            sandbox.run(method.source, inputs, limits=Limits(timeout_s=0.1))
        )  # another's inputs may be slow
        for tool in group:
            got = [next(outcomes) for _ in _facts(tool).examples]
            shown = [o.value if o.ok else f"raises {o.error_type}: {o.error_message}" for o in got]
            if shown == [e.output for e in _facts(tool).examples]:
                matching[tool.name].append(method.id)
    return {tool: found[0] for tool, found in matching.items() if len(found) == 1}


def correct(guesses: dict[str, str], key: str) -> int:
    return sum(1 for tool, method_id in guesses.items() if tool == tool_name(key, method_id))


def _types(value: object) -> set[str]:
    """Every Python type a value shows, items and keys by their place: ``{'list', 'item:int'}`` for ``[1, 2]``."""
    found = {type(value).__name__}
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            found |= {f"item:{kind}" for kind in _types(item)}
    elif isinstance(value, dict):
        for key, item in value.items():
            found |= {f"key:{kind}" for kind in _types(key)} | {f"value:{kind}" for kind in _types(item)}
    return found


def chance(tools: list[types.Tool]) -> float:
    """What guessing among the tools whose examples show the same argument types gets, on average: the types are
    what examples cannot help showing (a tuple is written as a tuple, a set as a set)."""

    def signature(tool: types.Tool) -> str:
        args = [parse_arguments(e.input) for e in _facts(tool).examples]
        return repr([sorted(set().union(*(_types(a[i]) for a in args))) for i in range(len(_facts(tool).params))])

    classes = Counter(signature(tool) for tool in tools)
    return sum(1 / classes[signature(tool)] for tool in tools)


# -- order ----------------------------------------------------------------------------------------------------


def _spearman(order: list[str]) -> float:
    ranks = [IDS.index(method_id) for method_id in order]
    n = len(ranks)
    return 1 - 6 * sum((r - i) ** 2 for i, r in enumerate(ranks)) / (n * (n * n - 1))


def test_tools_resources_and_prompts_are_listed_in_the_order_of_the_keyed_names(tmp_path: Path) -> None:
    tools, resources, prompts = anyio.run(_listing, "--db", str(tmp_path / "runs.db"))
    names = [tool.name for tool in tools]
    assert len(names) == len(PUBLIC) and names == sorted(names)
    assert resources == prompts == names
    assert [tool_name(TEST_KEY, method_id) for method_id in IDS] != names  # not the ids' order


def test_two_deployment_keys_order_the_tools_differently_and_no_key_orders_them_like_the_ids() -> None:
    store = ManifestStore()
    orders = [[e.method.id for e in Catalog(store, ["builtin"], key=key)] for key in KEYS]
    assert len({tuple(order) for order in orders}) == len(KEYS)
    correlations = [_spearman(order) for order in orders]
    # A random order of 65 has a rank correlation of 0 +- 0.125 with any fixed one; the ids' own order has 1.
    assert all(abs(rho) < 0.45 for rho in correlations), correlations
    assert abs(statistics.mean(correlations)) < 0.2, correlations
    catalog = Catalog(store, ["builtin"], key=KEYS[0])
    assert [e.method.id for e in catalog.in_suite_order()] == IDS  # the operator's own listing keeps the suite order


# -- identification -------------------------------------------------------------------------------------------


def test_the_published_examples_name_almost_every_tool_so_the_attack_is_a_real_one(tmp_path: Path) -> None:
    key = KEYS[0]
    tools = _serve(tmp_path, key, "published")
    assert correct(by_examples(tools), key) >= 60
    assert correct(by_order(tools), key) <= 5  # the order alone no longer says anything


def test_with_deployment_examples_no_attack_without_calls_beats_chance_among_look_alike_tools(tmp_path: Path) -> None:
    nearness: list[float] = []  # how far each key's nearness attack lands above chance
    for key in KEYS[:3]:
        tools = _serve(tmp_path, key, "deployment")
        level = chance(tools)
        assert correct(by_order(tools), key) <= 5
        assert correct(by_examples(tools), key) <= 2  # a drawn input may happen to be another method's example
        near = correct(by_nearness(tools), key)
        nearness.append(near - level)
        assert near <= level + 2 * level**0.5, (key, near, level)
        for tool in tools:
            method_id = next(i for i in IDS if tool_name(key, i) == tool.name)
            shown = {_canonical(e.input) for e in _facts(tool).examples}
            assert not shown & PUBLISHED_INPUTS[method_id], method_id
    assert statistics.mean(nearness) <= 6, nearness  # about chance: the shapes and formats the inputs need say a little


def test_a_public_suites_behaviour_is_public_running_its_sources_on_the_served_examples_names_the_tools(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """What docs/server.md says a public suite cannot hide: with the sources in hand, two examples are enough."""
    key = KEYS[1]
    tools = _serve(tmp_path, key, "deployment")
    assert correct(by_behaviour(tools, sandbox), key) >= 55
