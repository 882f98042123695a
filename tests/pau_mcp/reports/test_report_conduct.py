"""Conduct counted from trajectories: malformed actions, invalid arguments, refusals and zero-query episodes."""

from __future__ import annotations

import json
from typing import Any

from pau_mcp.reports.conduct import Conduct, conduct_line, conduct_of, run_conduct


def _result(status: str) -> dict[str, Any]:
    return {"kind": "tool_result", "text": status, "structured": {"status": status}, "is_error": status != "ok"}


def test_each_kind_of_misstep_in_a_trajectory_is_counted_once() -> None:
    trajectory: list[dict[str, Any]] = [
        {"kind": "model", "reply": "", "tool_calls": [{"id": "1", "name": "fn", "arguments": '{"args": "(1,'}]},
        {"kind": "model", "reply": "", "tool_calls": [{"id": "2", "name": "fn", "arguments": "[1]"}]},
        {"kind": "model", "reply": "", "tool_calls": [{"id": "3", "name": "fn", "arguments": '{"args": "(1,)"}'}]},
        {"kind": "note", "event": "malformed_action", "reply": "no input"},
        {"kind": "note", "event": "unreadable_text_tool_call", "reply": "<tool_call>{"},
        {"kind": "note", "event": "text_tool_call", "calls": []},
        _result("ok"),
        _result("invalid_input"),
        _result("over_budget"),
        _result("unknown_tool"),
        _result("error"),
    ]
    assert conduct_of(trajectory) == Conduct(malformed_actions=2, invalid_arguments=3, refusals=2)


def test_a_run_meant_to_query_whose_episodes_never_did_says_so_in_one_line() -> None:
    quiet = run_conduct([("done", 0, Conduct(3, 0, 0)), ("done", 0, Conduct(2, 0, 0)), ("pending", None, None)])
    assert (quiet.episodes, quiet.zero_query, quiet.done) == (2, 2, 2)
    assert (
        conduct_line("r", quiet) == "Run r: every one of its 2 done episodes made zero queries (5 malformed actions)."
    )
    # An in-context run makes no query by design: nothing to say.
    assert conduct_line("c", run_conduct([("done", 0, Conduct())], interactive=False)) is None
    mixed = run_conduct([("done", 4, Conduct(0, 1, 0)), ("done", 0, Conduct()), ("failed", None, Conduct(0, 0, 1))])
    assert conduct_line("m", mixed) == (
        "Run m: 1 call with invalid arguments, 1 call refused by the server, 1 done episode with zero queries."
    )


def test_a_megabyte_of_nested_tool_call_arguments_counts_as_invalid_instead_of_crashing_the_count() -> None:
    arguments = "[" * (1 << 20)  # the worst case for a JSON reader: nesting deeper than it can follow
    trajectory = [{"kind": "model", "reply": "", "tool_calls": [{"id": "1", "name": "fn", "arguments": arguments}]}]
    assert conduct_of(json.loads(json.dumps(trajectory * 4))).invalid_arguments == 4
