"""Writing a submission's scores to the run store: one place, for the scorer command, the harness and the server."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..knowledge import knowledge_kind
from ..runstore import RunStore

__all__ = ["record_scores"]


def record_scores(
    store: RunStore, submission_id: int, result: Any, *, with_examples: bool = False
) -> dict[str, float | None]:
    """Store every score of a ``ScoreResult``; returns ``{kind: value}`` (None where unscored).

    Kinds: ``judge`` (1 to 5), ``codematch`` (or ``codematch_gold`` when the code writer had the gold
    description; ``codematch:<components>`` or ``codematch_gold:<components>`` when it was handed only some
    knowledge, ``pau_mcp.knowledge``), ``direct``. Each detail records the protocol the score followed; code match also whether
    the code writer got the agent's examples and, when it did, how its code fared on them (``observed``).
    """
    values: dict[str, float | None] = {}
    judge, codematch, direct = result.judge, result.codematch, result.direct
    protocol = getattr(result, "protocol", "pau-mcp")
    if judge is not None:
        value = float(judge.rating) if judge.status == "scored" and judge.rating is not None else None
        store.record_score(
            submission_id, "judge", judge.status, value, judge.model,
            {"reason": judge.reason, "reply": judge.reply, "usage": asdict(judge.usage), "cost_usd": judge.cost_usd, "cached": judge.cached, "protocol": protocol},
        )  # fmt: skip
        values["judge"] = value
    if codematch is not None:
        knowledge = getattr(result, "knowledge", None)
        kind = knowledge_kind(knowledge, result.gold) if knowledge else "codematch_gold" if result.gold else "codematch"
        store.record_score(
            submission_id, kind, codematch.status, codematch.fraction, codematch.model,
            {
                "reason": codematch.reason, "failures": codematch.failures, "code": codematch.code,
                "matches": list(codematch.matches),
                "usage": asdict(codematch.usage), "cost_usd": codematch.cost_usd, "cached": codematch.cached,
                "gold": result.gold, "with_examples": with_examples, "protocol": protocol,
                "knowledge": list(knowledge) if knowledge else None,
                "observed": asdict(codematch.observed) if codematch.observed is not None else None,
            },
        )  # fmt: skip
        values[kind] = codematch.fraction
    if direct is not None:
        example = direct.counterexample
        store.record_score(
            submission_id, "direct", direct.status, direct.fraction, None,
            {
                "reason": direct.reason, "failures": direct.failures, "matches": list(direct.matches), "code": direct.code,
                "counterexample": asdict(example) if example else None, "protocol": protocol,
            },
        )  # fmt: skip
        values["direct"] = direct.fraction
    return values
