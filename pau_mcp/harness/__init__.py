"""The evaluation harness: agents explore methods through the MCP server; runs are stored, scored and reported.

Names are imported on first use, so ``pau-mcp report`` does not pay for the MCP
client and the agents it never runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AGENTS": "runner",
    "AgentResult": "agents",
    "ObserverAgent": "observer",
    "PaperAgent": "agents",
    "ProbeAgent": "agents",
    "ToolsAgent": "agents",
    "memorising_code": "agents",
    "Environment": "environment",
    "Observation": "environment",
    "Step": "environment",
    "EvalConfig": "runner",
    "EvalError": "runner",
    "RunProgress": "runner",
    "run_eval": "runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
