"""How an agent conducted its episodes, counted from their trajectories: the failures a score alone hides.

A run whose agent never produced a usable action still ends with every episode ``done``; these counts say so. Per
episode (``conduct_of``):

* **malformed actions**: replies the harness could not turn into an action: the paper loop's action step with no
  usable input after its one reminder (``malformed_action``), a tool call the tools agent wrote as text that could
  not be read (``unreadable_text_tool_call``);
* **invalid arguments**: calls whose arguments were unusable: a native tool call whose arguments are not a JSON
  object (answered with a correction, never sent), and calls the server refused as ``invalid_input``;
* **refusals**: calls the server refused without running them: ``over_budget`` (the budget was spent) and
  ``unknown_tool``;
* **queries**: calls that reached the function; a done episode of an interactive run with none is a
  **zero-query episode**.

Counting is one pass over the steps, each looked at once (a tool call's arguments parsed as JSON, which is linear).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pau_mcp.contract import ToolStatus
from pau_mcp.llm import read_json

__all__ = [
    "MALFORMED_EVENTS", "REFUSAL_STATUSES", "Conduct", "RunConduct", "conduct_counts", "conduct_line", "conduct_of",
    "run_conduct",
]  # fmt: skip

#: Trajectory notes that mark a reply the harness could not turn into an action.
MALFORMED_EVENTS = ("malformed_action", "unreadable_text_tool_call", "not_a_description")
#: Statuses of a call the server refused without running it for a reason other than its arguments.
REFUSAL_STATUSES = (ToolStatus.OVER_BUDGET.value, ToolStatus.UNKNOWN_TOOL.value)


@dataclass(frozen=True)
class Conduct:
    """One episode's conduct, counted from its trajectory.

    Attributes:
        malformed_actions: Replies that gave no usable action.
        invalid_arguments: Calls with unusable arguments (not a JSON object, or refused as ``invalid_input``).
        refusals: Calls the server refused (over budget, unknown tool).
    """

    malformed_actions: int = 0
    invalid_arguments: int = 0
    refusals: int = 0

    def __add__(self, other: Conduct) -> Conduct:
        return Conduct(
            self.malformed_actions + other.malformed_actions,
            self.invalid_arguments + other.invalid_arguments,
            self.refusals + other.refusals,
        )


@dataclass(frozen=True)
class RunConduct:
    """A run's conduct over its finished episodes (done and failed: both were played).

    Attributes:
        episodes: Finished episodes counted.
        malformed_actions: Their malformed actions.
        invalid_arguments: Their calls with invalid arguments.
        refusals: Their calls the server refused.
        zero_query: Done episodes that made no query at all.
        done: Done episodes (of which ``zero_query``).
        interactive: Whether the run's agent was meant to query (an in-context run makes no query by design).
    """

    episodes: int = 0
    malformed_actions: int = 0
    invalid_arguments: int = 0
    refusals: int = 0
    zero_query: int = 0
    done: int = 0
    interactive: bool = True

    @property
    def every_episode_without_query(self) -> bool:
        """True when the run was meant to query and not one of its done episodes did."""
        return self.interactive and self.done > 0 and self.zero_query == self.done

    def as_dict(self) -> dict[str, int]:
        """The counts, as ``results.json`` and the CSV carry them."""
        return {
            "malformed_actions": self.malformed_actions,
            "invalid_arguments": self.invalid_arguments,
            "refusals": self.refusals,
            "zero_query_episodes": self.zero_query,
        }


def conduct_of(trajectory: Iterable[Mapping[str, Any]]) -> Conduct:
    """Count one episode's malformed actions, invalid arguments and refusals from its recorded steps."""
    malformed = invalid = refused = 0
    for step in trajectory:
        kind = step.get("kind")
        if kind == "note" and step.get("event") in MALFORMED_EVENTS:
            malformed += 1
        elif kind == "model":
            invalid += sum(1 for arguments in _arguments(step.get("tool_calls")) if not _is_object(arguments))
        elif kind == "tool_result":
            status = (step.get("structured") or {}).get("status") if isinstance(step.get("structured"), dict) else None
            if status == ToolStatus.INVALID_INPUT.value:
                invalid += 1
            elif status in REFUSAL_STATUSES:
                refused += 1
    return Conduct(malformed, invalid, refused)


def run_conduct(episodes: Sequence[tuple[str, int | None, Conduct | None]], interactive: bool = True) -> RunConduct:
    """A run's conduct from its episodes' ``(state, queries, conduct)``; unfinished episodes are left out."""
    total = Conduct()
    finished = done = zero = 0
    for state, queries, conduct in episodes:
        if state not in ("done", "failed"):
            continue
        finished += 1
        total = total + (conduct or Conduct())
        if state == "done":
            done += 1
            zero += not queries
    return RunConduct(
        finished, total.malformed_actions, total.invalid_arguments, total.refusals, zero, done, interactive
    )


def _arguments(listed: Any) -> list[str]:
    """The arguments of the native tool calls a model step recorded (JSON text as the model wrote it)."""
    if not isinstance(listed, list):
        return []
    return [item["arguments"] for item in listed if isinstance(item, dict) and isinstance(item.get("arguments"), str)]


def _is_object(arguments: str) -> bool:
    """Whether a call's arguments are a JSON object, as the tools agent requires (nesting too deep to read is not:
    read depth-limited, as the agent reads them)."""
    return isinstance(read_json(arguments or "{}"), dict)


def conduct_line(run: str, conduct: RunConduct) -> str | None:
    """One sentence on what went wrong in a run's episodes beyond failures, or None when nothing did.

    A run meant to query whose every done episode made none says so first, in those words: its scores measure
    descriptions written without a single observation.
    """
    if not conduct.episodes:
        return None
    parts = [
        _count(conduct.malformed_actions, "malformed action"),
        _count(conduct.invalid_arguments, "call", " with invalid arguments"),
        _count(conduct.refusals, "call", " refused by the server"),
    ]
    found = [part for part, count in zip(parts, _counts(conduct), strict=True) if count]
    if conduct.every_episode_without_query:
        head = f"Run {run}: every one of its {conduct.done} done episodes made zero queries"
        return f"{head} ({', '.join(found)})." if found else f"{head}."
    if conduct.interactive and conduct.zero_query:
        found.append(_count(conduct.zero_query, "done episode") + " with zero queries")
    if not found:
        return None
    return f"Run {run}: {', '.join(found)}."


def conduct_counts(conduct: RunConduct) -> str:
    """The four counts in words, zeros included, as the end of a run prints them."""
    return (
        f"{_count(conduct.malformed_actions, 'malformed action')}, "
        f"{_count(conduct.invalid_arguments, 'call')} with invalid arguments, "
        f"{_count(conduct.refusals, 'refused call')}, "
        f"{conduct.zero_query} of {conduct.done} done episodes with zero queries"
    )


def _counts(conduct: RunConduct) -> tuple[int, int, int]:
    return conduct.malformed_actions, conduct.invalid_arguments, conduct.refusals


def _count(n: int, noun: str, tail: str = "") -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}{tail}"
