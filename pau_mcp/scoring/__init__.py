"""Scoring submissions: the LLM judge, code match through a code-writing model, and direct code.

``Scorer`` is the in-process API; ``feedback_for`` adapts it to the MCP
server's ``submit`` tool; ``scoring.http`` serves it as a JSON endpoint.
"""

from .codematch import (
    FAILURE_KINDS,
    CodeMatch,
    Counterexample,
    ObservedCheck,
    check_observed,
    coder_messages,
    extract_code,
    extract_code_reference,
    failing_tests,
    match_code,
    reference_match,
    write_code,
)
from .judge import (
    JudgeResult,
    RatingSummary,
    judge_description,
    judge_messages,
    parse_rating,
    parse_rating_anywhere,
    summarise_ratings,
)
from .records import record_scores
from .service import KINDS, NothingToScore, Scorer, ScoreResult, UnknownMethod, feedback_for
from .tasks import TaskCall, TaskCheck, check_answer

__all__ = [
    "FAILURE_KINDS",
    "KINDS",
    "CodeMatch",
    "Counterexample",
    "JudgeResult",
    "NothingToScore",
    "ObservedCheck",
    "RatingSummary",
    "ScoreResult",
    "Scorer",
    "TaskCall",
    "TaskCheck",
    "UnknownMethod",
    "check_answer",
    "check_observed",
    "coder_messages",
    "extract_code",
    "extract_code_reference",
    "failing_tests",
    "feedback_for",
    "judge_description",
    "judge_messages",
    "match_code",
    "parse_rating",
    "parse_rating_anywhere",
    "record_scores",
    "reference_match",
    "summarise_ratings",
    "write_code",
]
