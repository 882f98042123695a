"""Protocols: whose prompts and rules a run follows, this project's (the default) or the reference benchmark's.

A protocol is a template set (``pau_mcp.prompts``) and the rules below; every
difference between the two is listed in ``docs/protocol.md`` with the reason
this project's is the default. ``--protocol reference`` (``PAU_MCP_PROTOCOL``)
runs the paper agent, the judge, the code writer and the report the way the
reference benchmark's code does, with its wording imported from a checkout
(``pau-mcp prompts import-reference``). Every run and every score records the
protocol it used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .prompts import DEFAULT_PROTOCOL, PROTOCOLS, PromptSet, load_prompts

if TYPE_CHECKING:  # the manifests load the sandbox's value encoding, the LLM layer its SDKs: reports need neither
    from .llm import Completion
    from .manifests import Original

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "RULES",
    "Protocol",
    "ReferenceExample",
    "Rules",
    "cut_at_stop",
    "load_protocol",
    "protocol_of",
    "reference_example",
    "reference_reply",
    "reference_triples",
    "results_list",
]


@dataclass(frozen=True)
class Rules:
    """What a protocol does, apart from its wording.

    Attributes:
        name: ``pau-mcp`` or ``reference``.
        codematch: ``outcomes`` (typed outcomes: equal values with their types, or the same exception type) or
            ``reference`` (expected values through a JSON round trip, compared with ``==``; every error as None).
        codematch_timeout_s: Per-input wall-clock limit of scored code; None: the sandbox's limits.
        failed_as_worst: Count a row without a score as the worst score (judge 1, code match 0) instead of
            leaving it out.
        sample_std: Standard deviations with ``ddof=1`` (pandas' default) instead of ``ddof=0``.
        final_description_call: The paper agent asks once more for a final description after its loop.
        judge_rating: ``last_line`` (only a ``Rating: X`` last line counts) or ``anywhere`` (the first
            ``rating: X`` in the reply).
        temperature: The sampling temperature of the agent, the judge and the code writer unless the
            user sets one; None leaves the provider's default.
        judge_max_tokens: The judge's longest reply (None: the provider's default).
        coder_max_tokens: The code writer's longest reply (None: the provider's default).
        exploration_timeout_s: Per-call time limit of the agent's calls (None: the server's ``--timeout``).
        exploration_output_kb: Largest value an agent's call may return, in KiB (None: ``--max-output-kb``).
        runs_wrong_arity: A call with another number of arguments than the header runs (and counts), and
            Python's own ``TypeError`` is its result, instead of being refused uncounted.
        exact_bootstrap: The paired bootstrap compares each resample's two means exactly (a float-noise
            difference is a win), instead of counting a sum of differences within 1e-9 per draw as a tie.
        contradictions_of_unsolved: The self-contradiction share (Fig. 13) is over the checked episodes that
            failed (``failures.is_failure``), instead of over every checked episode.
        thinking_room: A model that thinks gets its thinking room on top of each token limit (the agent's 300,
            the judge's, the code writer's); False: each limit is the whole reply's, thinking included.
        reads_thinking: A reply is read as the reference's client returns it (``reference_reply``): the
            provider's ``reasoning`` field first, as ``Reasoning: ...`` and ``Response:``, and ``<think>`` text
            left in; False: the answer alone, the thinking kept apart and never read.
    """

    name: str
    codematch: str
    codematch_timeout_s: float | None
    failed_as_worst: bool
    sample_std: bool
    final_description_call: bool
    judge_rating: str
    temperature: float | None
    judge_max_tokens: int | None
    coder_max_tokens: int | None
    exploration_timeout_s: float | None = None
    exploration_output_kb: int | None = None
    runs_wrong_arity: bool = False
    exact_bootstrap: bool = False
    contradictions_of_unsolved: bool = False
    thinking_room: bool = True
    reads_thinking: bool = False


#: Each protocol's rules.
RULES: dict[str, Rules] = {
    "pau-mcp": Rules(
        name="pau-mcp", codematch="outcomes", codematch_timeout_s=None, failed_as_worst=False, sample_std=False,
        final_description_call=True, judge_rating="last_line", temperature=0.0, judge_max_tokens=None,
        coder_max_tokens=None,
    ),
    # The reference benchmark as published: RunTestFunc's 0.5 s per input, pandas' fillna(1) and std(), 300 new
    # tokens for the judge and 600 for the code writer, the provider's default temperature; its interactive runs
    # give each call 30 s and any size of result (bounded here at 1 MiB, 16 times this project's), and run a call
    # of the wrong arity (Python's TypeError is the result, and it counts); its statistics compare resampled means
    # with > and <; the paper counts self-contradiction among the functions it did not solve. Its client sends each
    # limit as the whole reply's (max_tokens, or max_completion_tokens for gpt-5.4-mini) and reads a reply as
    # "Reasoning: <the reasoning field>\nResponse: <the content>", <think> text and all (utils/lm_inference.py).
    "reference": Rules(
        name="reference", codematch="reference", codematch_timeout_s=0.5, failed_as_worst=True, sample_std=True,
        final_description_call=False, judge_rating="anywhere", temperature=None, judge_max_tokens=300,
        coder_max_tokens=600, exploration_timeout_s=30.0, exploration_output_kb=1024, runs_wrong_arity=True,
        exact_bootstrap=True, contradictions_of_unsolved=True, thinking_room=False, reads_thinking=True,
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Protocol:
    """A protocol's rules with its templates.

    Attributes:
        rules: What it does.
        prompts: What it says.
    """

    rules: Rules
    prompts: PromptSet

    @property
    def name(self) -> str:
        """``pau-mcp`` or ``reference``."""
        return self.rules.name

    @property
    def reference(self) -> bool:
        """True for the reference benchmark's protocol."""
        return self.rules.name == "reference"

    def record(self) -> dict[str, str]:
        """What runs and scores record: the protocol and the digest of its templates."""
        return {"protocol": self.name, "prompts": self.prompts.digest}

    def read(self, completion: Completion) -> str:
        """The text of a reply this protocol reads: the answer alone, or the reference's whole reply
        (``reference_reply``) when its rules read the thinking too."""
        return reference_reply(completion) if self.rules.reads_thinking else completion.text


def load_protocol(name: str = DEFAULT_PROTOCOL, data_dir: Path | None = None) -> Protocol:
    """A protocol by name, with its templates (the reference's are read from ``data_dir``).

    Raises:
        pau_mcp.prompts.PromptsMissing: the reference's templates were never imported (the message says how).
        pau_mcp.prompts.PromptsError: an unknown protocol, or broken template files.
    """
    prompts = load_prompts(name, data_dir)
    return Protocol(RULES[name], prompts)


def protocol_of(config: dict[str, Any] | None) -> str:
    """The protocol a run recorded (runs made before protocols were recorded followed this project's)."""
    name = (config or {}).get("protocol") or DEFAULT_PROTOCOL
    return name if name in RULES else DEFAULT_PROTOCOL


# -- the reference's texts ------------------------------------------------------------------------


def reference_reply(completion: Completion) -> str:
    """A reply as the reference's client returns it: ``Reasoning: <its reasoning field>`` when the provider sent
    one, then ``\nResponse: `` and the answer as written (``<think>`` text included), stripped.

    Only a ``reasoning`` field counts (OpenRouter's, recent vLLM's; the thinking of Claude, which the reference
    asks through OpenRouter): a ``reasoning_content`` field (DeepSeek's, older vLLM's) is not read there, so not
    here. An empty answer reads as none (the reference writes an empty ``Response:`` after the reasoning when a
    provider sends an empty string rather than null).
    """
    text = ""
    if completion.reasoning_field is not None:
        text = "Reasoning: " + completion.reasoning_field
    written = completion.written
    if written:
        if text:
            text += "\nResponse: "
        text = text + " " + written
    return text.strip()


def cut_at_stop(text: str) -> str:
    """A reply as the reference reads every reply: cut at its first ``[STOP]`` and stripped."""
    return (text or "").split("[STOP]")[0].strip()


def results_list(triples: Sequence[Sequence[Any]], window: int | None = None) -> str:
    """Results as the reference lists them in its prompts: one ``Input: ... => Output: ..., Error: ...`` line each.

    Args:
        triples: ``(input, output, error)`` as the reference holds them (each shown with ``str``).
        window: Only the last ``window`` results (None: all).
    """
    if not triples:
        return "[]"
    shown = list(triples)[-window:] if window is not None else list(triples)
    lines = "".join(f"  Input: {inp} => Output: {out}, Error: {err}\n" for inp, out, err in shown)
    return "[\n" + lines + "]"


_RAISES = re.compile(r"^raises ([A-Za-z_][\w.]*)(?::\s?(.*))?$", re.DOTALL)


def reference_triples(pairs: Sequence[Sequence[Any]]) -> list[tuple[str, str, str]]:
    """Observed examples in the reference's stored form, ``(repr(input), repr(output), repr(error))``.

    ``pairs`` are ``(input literal, shown outcome)`` as this project records them, or triples already
    in the reference's form (passed through). A shown ``raises Type: message`` becomes no output and
    the message as the error (``''`` for ``raises Type``, an empty message); a returned value, its ``repr`` text.
    """
    triples = []
    for item in pairs:
        if len(item) >= 3:
            triples.append((str(item[0]), str(item[1]), str(item[2])))
            continue
        literal, shown = str(item[0]), str(item[1])
        raised = _RAISES.match(shown)
        if raised:
            # Python's str of the exception: its message, empty for an empty one (never the type's name).
            triples.append((repr(literal), repr(None), repr(raised.group(2) or "")))
        else:
            triples.append((repr(literal), _output_repr(shown), repr(None)))
    return triples


def _output_repr(shown: str) -> str:
    """``repr(output)`` for an output shown as its repr text: the text itself (a value of a literal type)."""
    from wasm_runtime.literals import literal_value  # its lock (python/cpython#106905), loaded where outputs are read

    try:
        literal_value(shown)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return repr(shown)
    return shown


@dataclass(frozen=True)
class ReferenceExample:
    """One initial example in the three forms the reference holds it in.

    Attributes:
        shown: ``(input, output, error)`` as its loop's prompts show it (each part through ``str``).
        stored: As an interactive run stores it, ``repr`` of each part: what that run's code writer gets.
        listed: As the dataset lists it (its ``all_examples`` column), each part as ``str`` shows it: what
            an in-context run's and the gold description's code writer get.
    """

    shown: tuple[Any, Any, Any]
    stored: tuple[str, str, str]
    listed: tuple[str, str, str]


def reference_example(literal: str, output: str, original: Original | None = None) -> ReferenceExample:
    """An initial example in the reference's forms: from the dataset's own text when the suite kept it.

    Args:
        literal: This project's argument literal, ``(7,)``.
        output: The outcome as this project shows it: the value's ``repr``, or ``raises Type: message``.
        original: The dataset's text (``Original``): its input as written, ``7``, and its stored output,
            whose ``str`` the reference shows (``[8, -20]`` where the sandbox's value reads ``(8, -20)``).
            Without it (a suite of this project's), this project's literal and shown outcome stand in.
    """
    if original is not None:
        value = original.value()
        return ReferenceExample(
            shown=(original.input, value, None),
            stored=(repr(original.input), repr(value), repr(None)),
            listed=(original.input, str(value), "None"),
        )
    raised = output.startswith("raises ")
    shown_value, error = (None, output[len("raises ") :]) if raised else (output, None)
    return ReferenceExample(
        shown=(literal, shown_value, error),
        stored=(repr(literal), repr(shown_value), repr(error)),
        listed=(literal, str(shown_value), str(error)),
    )
