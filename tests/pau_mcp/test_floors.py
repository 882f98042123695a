"""The house's floors (docs/architecture.md): every import of pau_mcp runs down or sideways, never up, and no two
rooms or modules import each other, directly or round a circle.

The import graph is read from the source with ``ast``, every import counted: at the top of a module, inside a
function (a lazy import is still a dependency), and under ``TYPE_CHECKING`` (a type is one too).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pau_mcp"

#: The rooms (pau_mcp's packages and top-level modules) on each floor, lowest first. A room imports rooms on its own
#: floor or below; a new room must be given a floor here (and in docs/architecture.md).
FLOORS: dict[int, tuple[str, ...]] = {
    # Values, storage, settings and the tool contract: no MCP, no scoring, no models.
    1: ("_databases", "runstore", "config", "eventloop", "userfiles", "listening", "guard", "eras", "fairness",
        "sandboxing", "grammar", "rules", "contract", "tracing", "limits", "tls"),
    # Suites on disk, the one LLM client layer, prompts and the protocols built on them; sign-in (OAuth), which the
    # server and the scorer share; what counts as a description.
    2: ("manifests", "llm", "prompts", "protocol", "knowledge", "oauth", "descriptions"),
    # The server and the scorer (siblings: neither imports the other), suite creation, served documentation, and
    # whether a model's score on a suite is fresh.
    3: ("server", "scoring", "creation", "documentation", "freshness"),
    # The one run driver.
    4: ("runs",),
    # What runs and reads runs: the harness, the RL environment, the reports.
    5: ("harness", "rl", "reports"),
    # The composition roots: a run's parts, and the served server, built from settings.
    6: ("assembly", "server_assembly"),
    # Ray's episode sources (they import the driver, never the other way round) and the Inspect task.
    7: ("distributed", "inspect_task"),
    # The commands.
    8: ("cli", "__main__"),
}  # fmt: skip
FLOOR = {room: floor for floor, rooms in FLOORS.items() for room in rooms}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> set[str]:
    """The pau_mcp modules ``module`` imports, anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # ``from package import module`` depends on the module, not on the package
                submodule = f"{target}.{alias.name}"
                names.add(submodule if submodule in MODULES else target)
    found = set()
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name.startswith("pau_mcp.") and name != module:
            found.add(name)
    return found


GRAPH = {module: _imported(module, path) for module, path in MODULES.items()}


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _rooms() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, imported in GRAPH.items():
        rooms[_room(module)]  # noqa: B018 - every room is a node, importing or not
        for target in imported:
            if _room(target) not in (_room(module), "__init__"):
                rooms[_room(module)].add(_room(target))
    return dict(rooms)


def test_the_graph_sees_the_imports_it_must() -> None:
    # A check that found nothing would pass for the wrong reason: these imports exist.
    assert "pau_mcp.runs.driver" in GRAPH["pau_mcp.harness.runner"] or "pau_mcp.runs" in GRAPH["pau_mcp.harness.runner"]
    assert (
        "pau_mcp.runs" in GRAPH["pau_mcp.distributed.evaluation"]
        or "pau_mcp.harness.hosting" in GRAPH["pau_mcp.distributed.evaluation"]
    )
    assert "pau_mcp.config" in GRAPH["pau_mcp.server.launch"]  # a module-level import
    assert "pau_mcp.scoring" in GRAPH["pau_mcp.assembly"]  # an import inside a function


def test_every_room_of_the_package_has_a_floor() -> None:
    unplaced = sorted(set(_rooms()) - set(FLOOR) - {"__init__"})
    assert not unplaced, f"give these a floor in FLOORS and docs/architecture.md: {unplaced}"


def test_no_import_runs_up_a_floor() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, imported in GRAPH.items()
        for target in imported
        if _room(module) in FLOOR and _room(target) in FLOOR and FLOOR[_room(target)] > FLOOR[_room(module)]
    )
    assert not upward, upward


def test_no_two_rooms_import_each_other_even_round_a_circle() -> None:
    assert _circles(_rooms()) == []


def test_no_two_modules_import_each_other_even_round_a_circle() -> None:
    assert _circles(GRAPH) == []


def test_the_run_driver_the_harness_and_the_rollouts_never_import_ray_or_its_sources() -> None:
    for module in GRAPH:
        if _room(module) in ("runs", "harness") or module == "pau_mcp.rl.rollout":
            assert not any(_room(target) == "distributed" for target in GRAPH[module]), module
            assert "ray" not in {n.split(".")[0] for n in _top_level_names(MODULES[module])}, module


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names
