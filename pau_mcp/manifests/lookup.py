"""Finding methods by the names people give them: a method id (``suite/name``), a tool name as a deployment serves
it (``fn_...``, which only the deployment's key tells), or a manifest file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .model import Method, tool_name
from .store import ManifestError, ManifestStore, load_method

__all__ = ["ToolChoice", "find_method", "tools_for"]


@dataclass(frozen=True)
class ToolChoice:
    """The tools some names stand for.

    Attributes:
        tools: Each name's tool name in the deployment, in the order given.
        unknown: The names that are neither a method id nor a tool name of any suite found.
    """

    tools: list[str]
    unknown: list[str]


def find_method(store: ManifestStore, target: str, key: str) -> Method:
    """A method by id (``suite/name``), by tool name as the deployment with ``key`` serves it, or from a manifest file.

    Raises:
        ManifestError: nothing by that name, or a bad file.
    """
    path = Path(target).expanduser()
    if target.endswith(".json") or path.is_file():
        if not path.is_file():
            raise ManifestError(f"{path}: no such manifest file")
        return load_method(path)
    if "/" in target:
        return store.method(target)
    for method in store.methods(store.names()):
        if tool_name(key, method.id) == target:
            return method
    raise ManifestError(
        f"no method or tool named {target!r} in the suites found (tool names depend on the deployment key: "
        "give the server's --tool-key or --data-dir); see `pau-mcp manifests list --suite SUITE`"
    )


def tools_for(store: ManifestStore, key: str, wanted: Iterable[str]) -> ToolChoice:
    """The tool names of ``wanted`` (method ids or tool names) in the deployment with ``key``.

    Raises:
        ManifestError: a suite's files are broken.
    """
    known = {m.id: tool_name(key, m.id) for m in store.methods(store.names())}
    names = set(known.values())
    wanted = list(wanted)
    unknown = [item for item in wanted if item not in known and item not in names]
    return ToolChoice([known.get(item, item) for item in wanted], unknown)
