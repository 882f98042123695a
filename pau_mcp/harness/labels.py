"""The labels a failed episode can get: what the failure classifier writes and the report shows."""

from __future__ import annotations

__all__ = ["FAILURE_LABELS", "UNCLASSIFIED"]

#: What a failure can be labelled, in display order: the paper's categories.
FAILURE_LABELS: tuple[str, ...] = ("insufficient_exploration", "reasoning_error", "format_following", "hallucination")

#: The label of a reply that names none of ``FAILURE_LABELS`` (or a request that failed).
UNCLASSIFIED = "unclassified"
