"""The evaluation harness: agents explore methods through the MCP server; runs are stored, scored and reported.

Names are imported on first use, so ``pau-mcp report`` does not pay for the MCP
client and the agents it never runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AGENTS": "configuration",
    "AgentResult": "agents",
    "ObserverAgent": "observer",
    "PaperAgent": "agents",
    "ProbeAgent": "agents",
    "ToolsAgent": "agents",
    "memorising_code": "agents",
    "Environment": "environment",
    "Observation": "environment",
    "Step": "environment",
    "EvalConfig": "configuration",
    "EvalError": "configuration",
    "check_config": "configuration",
    "stored_identity": "configuration",
    "Connect": "client",
    "ConnectTools": "client",
    "mcp_session": "client",
    "EpisodeHost": "hosting",
    "EpisodeRecord": "hosting",
    "LocalEpisodes": "hosting",
    "Play": "hosting",
    "play_episode": "hosting",
    "agent_llm": "hosting",
    "server_settings": "hosting",
    "session_key": "hosting",
    "RunProgress": "runner",
    "RunTotals": "runner",
    "drive_run": "runner",
    "planned_methods": "runner",
    "EvalRun": "evalrun",
    "play_run": "evalrun",
    "resolve_run": "evalrun",
    "run_eval": "evalrun",
    "epoch_lines": "outcome",
    "freshness_note": "outcome",
    "score_errors": "outcome",
    "summary": "outcome",
    "unpriced_note": "outcome",
    "run_name": "runner",
    "run_totals": "runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
