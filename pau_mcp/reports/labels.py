"""The labels a failed episode can get: what the failure classifier writes and the report shows."""

from __future__ import annotations

__all__ = ["FAILURE_LABELS", "INFRASTRUCTURE", "REPORTED_LABELS", "UNCLASSIFIED"]

#: What the classifier may label a failure, in display order: the paper's categories.
FAILURE_LABELS: tuple[str, ...] = ("insufficient_exploration", "reasoning_error", "format_following", "hallucination")

#: The label of an episode that ended in an error (a provider's, the server's, the connection's): the failure is
#: the infrastructure's, not the agent's, and is labelled so without asking a model.
INFRASTRUCTURE = "infrastructure"

#: The label of a reply that names none of ``FAILURE_LABELS`` (or a request that failed).
UNCLASSIFIED = "unclassified"

#: Every label a report counts, in display order.
REPORTED_LABELS: tuple[str, ...] = (*FAILURE_LABELS, INFRASTRUCTURE, UNCLASSIFIED)
