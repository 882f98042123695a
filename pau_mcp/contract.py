"""The tool contract: what every side of a hidden-method tool agrees on, written once.

The server writes it, the harness, the Inspect task and other clients read it, and the scorer and the reports name
its score kinds; none of them reaches into another's internals for it.
"""

from __future__ import annotations

__all__ = ["TASK_KIND"]

#: The score kind a task episode's answer is recorded as (``pau_mcp.scoring.tasks`` checks it).
TASK_KIND = "task"
