"""Reports: runs read from the run store (``data``), every number computed (``build``: statistics in ``stats``,
analyses in ``analyses`` and ``use_analyses``, notes in ``notes``), then formatted (``render``, ``plots``), and
failed episodes classified by a model (``failures``).

Names are imported on first use, so a report that draws no plot and classifies nothing loads neither matplotlib
nor an LLM client.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FRACTION_KINDS": "data",
    "KINDS": "data",
    "KIND_TITLES": "data",
    "MethodScores": "data",
    "ReportError": "data",
    "RunData": "data",
    "Score": "data",
    "is_failure": "data",
    "load_runs": "data",
    "load_trajectories": "data",
    "ModeComparison": "report",
    "PairTest": "report",
    "Report": "report",
    "RunSummary": "report",
    "build_report": "build",
    "notes": "notes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
