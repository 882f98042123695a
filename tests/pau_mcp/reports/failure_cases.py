"""A small hand-labelled set of failed episodes over the builtin suite, for the failure classifier's agreement tests.

Each case is an episode as the harness records it (calls and results, the submitted description, code written
from it, the measured exploration coverage), and the label a person gave it after reading the episode with the
gold description. The scores and the self-contradiction check are made by the real scorer in the real sandbox.
Holds no tests itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import EpisodeResult, RunStore
from pau_mcp.scoring import check_observed, match_code


@dataclass(frozen=True)
class Labelled:
    """One failed episode and its hand label.

    Attributes:
        method_id: The builtin method.
        calls: ``(argument literal, value repr)`` the agent's calls returned.
        description: What the agent submitted.
        code: What a code writer would write from that description.
        coverage: ``(common lines, test lines, common branches, test branches)`` of the hidden function.
        label: The hand label.
        malformed: Actions that gave no input.
    """

    method_id: str
    calls: list[tuple[str, str]]
    description: str
    code: str
    coverage: tuple[int, int, int, int]
    label: str
    malformed: int = 0
    why: str = field(default="", compare=False)


CASES: list[Labelled] = [
    Labelled(
        "builtin/b001",
        [("(3,)", "3"), ("(5,)", "5"), ("(8,)", "8")],
        "Returns its argument unchanged.",
        "def test_func(arg0):\n    return arg0\n",
        (5, 9, 1, 4),
        "insufficient_exploration",
        why="only single digits: zeros, several digits and negatives never seen",
    ),
    Labelled(
        "builtin/b001",
        [("(105,)", "5"), ("(1000,)", "1"), ("(-23,)", "-6"), ("(0,)", "0")],
        "Returns the product of all of its decimal digits, keeping the sign of the number.",
        "def test_func(arg0):\n    r = 1\n    for c in str(abs(arg0)):\n        r *= int(c)\n    return -r if arg0 < 0 else r\n",
        (9, 9, 4, 4),
        "reasoning_error",
        why="it saw 105 give 5 and still multiplied the zero in",
    ),
    Labelled(
        "builtin/b003",
        [],
        "(no description)",
        "",
        (0, 6, 0, 4),
        "format_following",
        malformed=3,
        why="three actions without an input; nothing was run or described",
    ),
    Labelled(
        "builtin/b005",
        [("(9,)", "2"), ("(27,)", "3")],
        "Returns the base-3 logarithm of the number; raises ValueError for numbers that are not powers of 3.",
        "import math\ndef test_func(arg0):\n    r = round(math.log(arg0, 3))\n    if 3 ** r != arg0:\n"
        "        raise ValueError('not a power of 3')\n    return r\n",
        (8, 12, 4, 8),
        "hallucination",
        why="the ValueError for non-powers of 3 was never observed",
    ),
    Labelled(
        "builtin/b002",
        [("('aab',)", "[('a', 2), ('b', 1)]"), ("('',)", "[]"), ("('abc',)", "[('a', 1), ('b', 1), ('c', 1)]")],
        "Returns a list of (character, count) pairs giving how often each distinct character occurs, in order of first appearance.",
        "def test_func(arg0):\n    counts = {}\n    for c in arg0:\n        counts[c] = counts.get(c, 0) + 1\n"
        "    return list(counts.items())\n",
        (7, 7, 4, 4),
        "insufficient_exploration",
        why="no string with a letter repeated apart ('aba') was tried",
    ),
    Labelled(
        "builtin/b006",
        [("([1, 2],)", "1.5"), ("([4],)", "4.0")],
        "Returns the arithmetic mean of the list as a float.",
        "def test_func(arg0):\n    return sum(arg0) / len(arg0)\n",
        (6, 10, 2, 6),
        "insufficient_exploration",
        why="no list of three or more, where the extremes are dropped",
    ),
    Labelled(
        "builtin/b008",
        [
            ("({'a': 1, 'b': 1},)", "{1: ['a', 'b']}"),
            ("({'b': 1, 'a': 1},)", "{1: ['a', 'b']}"),
            ("({'x': 2},)", "{2: ['x']}"),
        ],
        "Inverts the dictionary: maps each value to the list of its keys, in the order the keys were inserted.",
        "def test_func(arg0):\n    out = {}\n    for k, v in arg0.items():\n        out.setdefault(v, []).append(k)\n    return out\n",
        (4, 4, 2, 2),
        "reasoning_error",
        why="it saw {'b': 1, 'a': 1} give ['a', 'b'] and still said insertion order",
    ),
    Labelled(
        "builtin/b007",
        [("('abc',)", "'ace'"), ("('aaa',)", "'abc'")],
        "Shifts each letter forward by its 0-based position, wrapping around; uppercase letters are turned into "
        "lowercase first and digits are removed.",
        "def test_func(arg0):\n    out = []\n    for i, c in enumerate(arg0.lower()):\n        if c.isdigit():\n"
        "            continue\n        out.append(chr((ord(c) - 97 + i) % 26 + 97) if c.isalpha() else c)\n    return ''.join(out)\n",
        (5, 8, 2, 6),
        "hallucination",
        why="case and digit handling were never observed, and are wrong",
    ),
]


def _coverage(common_lines: int, test_lines: int, common_branches: int, test_branches: int) -> dict[str, Any]:
    return {
        "status": "measured",
        "lines": {"common": common_lines, "tests": test_lines, "agent_of_tests": common_lines / test_lines},
        "branches": {
            "common": common_branches, "tests": test_branches,
            "agent_of_tests": common_branches / test_branches if test_branches else None,
        },
    }  # fmt: skip


def _trajectory(case: Labelled) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for literal, value in case.calls:
        steps.append({"kind": "model", "reply": f"INPUT: {literal}"})
        steps.append({"kind": "tool_call", "arguments": {"args": literal}})
        steps.append(
            {"kind": "tool_result", "text": f"returned {value}", "structured": {"status": "ok", "value": value}}
        )
    for _ in range(case.malformed):
        steps.append({"kind": "model", "reply": "I think I should try something interesting next."})
        steps.append(
            {"kind": "note", "event": "malformed_action", "reply": "I think I should try something interesting next."}
        )
    steps.append({"kind": "submit", "description": case.description})
    return steps


async def _scores(sandbox: Any, method: Any, case: Labelled) -> tuple[Any, Any]:
    matched = await match_code(sandbox, method, case.code)
    observed = await check_observed(sandbox, method, case.code, case.calls) if case.calls and case.code else None
    return matched, observed


def build_labelled_run(store: RunStore, sandbox: Any, name: str = "labelled") -> dict[str, str]:
    """Record each case as the one episode of a run of its own (a method can have several cases); returns each
    run's name with its case's hand label."""
    manifests = ManifestStore()
    labels: dict[str, str] = {}
    for index, case in enumerate(CASES):
        run = f"{name}-{index}"
        method = manifests.method(case.method_id)
        run_id = store.ensure_run(run, "eval", {"model": "openai/agent", "agent": "paper", "suite": "builtin"})
        store.plan_episodes(run_id, [case.method_id])
        store.start_episode(run_id, case.method_id)
        session = store.ensure_session(run_id, f"{run}/{case.method_id}/1", "internal")
        submission = store.record_submission(session, case.method_id, case.description, None)

        matched, observed = anyio.run(_scores, sandbox, method, case)
        store.record_score(submission, "judge", "scored", 2.0, "openai/judge", {"reply": "Rating: 2"})
        store.record_score(
            submission, "codematch", "scored", matched.fraction, "openai/coder",
            {"code": case.code or None, "matches": list(matched.matches),
             "observed": None if observed is None else {"checked": observed.checked, "disagree": observed.disagree}},
        )  # fmt: skip
        store.finish_episode(
            run_id, case.method_id,
            EpisodeResult(
                state="done", submission_id=submission, concluded=True, queries=len(case.calls),
                trajectory=_trajectory(case), examples=[list(c) for c in case.calls],
            ),
        )  # fmt: skip
        store.record_coverage(run_id, case.method_id, _coverage(*case.coverage))
        labels[run] = case.label
    return labels
