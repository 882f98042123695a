"""Every regular expression and reply parser that reads agent, model or guest text reads it in linear time.

``CASES`` holds, for each reader, the worst inputs known for it, built at any size. Each case runs at 16 KB,
128 KB and 1 MB and must stay within a CPU budget (a fixed part and a part per megabyte) at every size: a
linear reader spends a fraction of it, a quadratic one blows it by orders of magnitude, and is caught at a
small size within seconds rather than after hours at a megabyte. CPU time of this thread is measured, so other
processes on the machine do not count.

``PATTERNS`` lists every regular expression in the packages' source with the cases that feed it, or why no
untrusted text reaches it: a new pattern fails ``test_every_regular_expression_in_the_source_is_audited``
until it is listed here.
"""

from __future__ import annotations

import ast
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pau_mcp.contract import label_problem
from pau_mcp.creation.dating import _first_commits
from pau_mcp.creation.messages import read_calls, read_description
from pau_mcp.creation.sources import _python_blocks
from pau_mcp.creation.tasks import unstated_input
from pau_mcp.descriptions import description_problem
from pau_mcp.documentation import near_gold
from pau_mcp.grammar import read_input, read_inputs, read_reflection, visible_text
from pau_mcp.harness.agents import written_tool_calls
from pau_mcp.llm.replies import read_json, split_thinking
from pau_mcp.manifests import TaskStep, placeholders
from pau_mcp.manifests.commitment import Commitment
from pau_mcp.manifests.importers.codearc import _printed
from pau_mcp.manifests.importers.common import description_from_docstring
from pau_mcp.protocol import cut_at_stop, reference_triples
from pau_mcp.reports.failures import parse_label
from pau_mcp.reports.plots import _wrap
from pau_mcp.reports.render import _NUMBER
from pau_mcp.rl.critic import parse_critic_rating
from pau_mcp.scoring import judge
from pau_mcp.scoring.codematch import extract_code, extract_code_reference
from pau_mcp.server.fixtures import Scope, render
from pau_mcp.server.wire import oversized
from wasm_runtime._guest_outcome import _nests_deeper_than

ROOT = Path(__file__).resolve().parents[2]
MEGABYTE = 1 << 20
#: CPU seconds a reader may spend: a fixed part (a reader may parse up to a capped amount, e.g. 100,000 characters
#: of code: 0.2 s on an idle machine, 1.0 s measured in CI on 2 cores at load 8) and a part per megabyte.
FIXED_S = 1.25
BUDGET_PER_MEGABYTE = 3.0
SIZES = (16 * 1024, 128 * 1024, MEGABYTE)


@dataclass(frozen=True)
class Case:
    """One reader and one input that is worst for it.

    Attributes:
        name: ``reader: what the input is``; ``PATTERNS`` names readers by the part before the colon.
        read: Reads the text.
        make: Builds the input of about ``size`` characters.
    """

    name: str
    read: Callable[[str], object]
    make: Callable[[int], str]


def _times(unit: str, size: int, prefix: str = "", suffix: str = "") -> str:
    return prefix + unit * max(1, -(-(size - len(prefix) - len(suffix)) // len(unit))) + suffix


def _commitment(text: str) -> object:
    """A commitment file anyone may hand to `manifests verify`: read, or refused (ValueError), never slow."""
    try:
        return Commitment.model_validate_json(text)
    except ValueError as exc:
        return exc


_STEPS = [
    TaskStep(method="m/a", input="(57, 'Banana split', [1, -2, 3.5], {'k': None})"),
    TaskStep(method="m/b", input="($1, True, '')"),
]


def _nested_calls(size: int) -> str:
    block = "f(" * 100 + "1" + ") ==> 1" * 100
    return _times(block, size)


def _quoted_back(text: str) -> object:
    """A fixture's result quoting an answer and an argument the client sent (``text``)."""
    return render(
        "${answers.k.content.text} and ${args.x}", Scope(args={"x": text}, answers={"k": {"content": {"text": text}}})
    )


_LONG_GOLD = "counts the steps to reach one, dividing by three when it can; " * 3

CASES = [
    # Learned documentation compared with its method's gold description (serve --docs).
    Case("near_gold: shingles that never match", lambda text: near_gold(text, _LONG_GOLD), lambda n: _times("a ", n)),
    Case(
        "near_gold: a short gold searched everywhere",
        lambda text: near_gold(text, "counts steps to 1."),
        lambda n: _times("ab", n),
    ),
    Case(
        "near_gold: invisible and combining characters",
        lambda text: near_gold(text, _LONG_GOLD),
        lambda n: _times("\u200b\u0301", n),
    ),
    # A client's arguments and answers, quoted back by a fixture (pau_mcp/server/fixtures.py).
    Case("fixtures.render: a megabyte answer and argument quoted back", _quoted_back, lambda n: _times("${x}", n)),
    Case("fixtures.render: placeholders that never close", lambda t: render(t, Scope()), lambda n: _times("${", n)),
    # Code in a submission or in the code writer's reply.
    Case("extract_code: an unclosed fence with no newline", extract_code, lambda n: _times("a", n, "```")),
    Case("extract_code: a run of backticks", extract_code, lambda n: _times("`", n)),
    Case("extract_code: a fence followed by blanks", extract_code, lambda n: _times(" ", n, "```", "x")),
    Case("extract_code: an unclosed fence over many lines", extract_code, lambda n: _times("x\n", n, "```\n")),
    Case("extract_code: every line opens a fence", extract_code, lambda n: _times("```a\n", n)),
    Case("extract_code: a closing line that never matches", extract_code, lambda n: _times("``\n", n, "```\n")),
    Case(
        "extract_code: many blocks of valid code", extract_code, lambda n: _times("```\n" + "x\n" * 5000 + "```\n", n)
    ),
    Case("extract_code: blank lines before a syntax error", extract_code, lambda n: _times("\n", n, "", "(")),
    Case(
        "extract_code: indented lines before a syntax error",
        extract_code,
        lambda n: _times(" " * 200 + "\n", n, "", "("),
    ),
    Case("extract_code: def lines that never open", extract_code, lambda n: _times("def test_func   \n", n, "", "(")),
    Case("extract_code_reference: many python fences", extract_code_reference, lambda n: _times("```python", n)),
    Case("extract_code_reference: many stop markers", extract_code_reference, lambda n: _times("[STOP]", n)),
    # Judge, critic and failure-classifier replies.
    Case("parse_rating: blanks after the colon", judge.parse_rating, lambda n: _times(" ", n, "Rating:", "x")),
    Case("parse_rating: blanks after the rating", judge.parse_rating, lambda n: _times(" ", n, "Rating: 4", "x")),
    Case("parse_rating: blanks after a slash", judge.parse_rating, lambda n: _times(" ", n, "Rating: 4 /", "x")),
    Case("parse_rating: emphasis that never ends", judge.parse_rating, lambda n: _times("*", n, "", "x")),
    Case("parse_rating: final and blanks", judge.parse_rating, lambda n: _times(" ", n, "final", "x")),
    Case("parse_rating: many short lines", judge.parse_rating, lambda n: _times("Rating: x\n", n)),
    Case(
        "rating_anywhere: blanks after the word", judge._RATING_ANYWHERE.search, lambda n: _times(" ", n, "rating", "x")
    ),
    Case("rating_anywhere: the word repeated", judge._RATING_ANYWHERE.search, lambda n: _times("rating : ", n)),
    Case(
        "parse_rating_anywhere: blanks after the colon",
        judge.parse_rating_anywhere,
        lambda n: _times(" ", n, "rating:"),
    ),
    Case("parse_rating_anywhere: the marker repeated", judge.parse_rating_anywhere, lambda n: _times("rating:", n)),
    Case(
        "parse_critic_rating: blanks after the rating", parse_critic_rating, lambda n: _times(" ", n, "Rating: 4", "x")
    ),
    Case("parse_critic_rating: blanks after the colon", parse_critic_rating, lambda n: _times(" ", n, "Rating:", "x")),
    Case("parse_critic_rating: emphasis that never ends", parse_critic_rating, lambda n: _times("_", n, "", "x")),
    Case("parse_label: a label that ends wrongly", parse_label, lambda n: _times("a", n, "label:", " x")),
    Case("parse_label: blanks after the colon", parse_label, lambda n: _times("\t", n, "label:", "!")),
    # Any model's reply (open reasoning models' thinking blocks).
    Case("split_thinking: opening tags, never closed", split_thinking, lambda n: _times("<think>", n)),
    Case("split_thinking: closing tags only", split_thinking, lambda n: _times("</think>", n)),
    Case("split_thinking: empty blocks", split_thinking, lambda n: _times("<thinking></think>", n)),
    Case("split_thinking: one block that never closes", split_thinking, lambda n: _times("x", n, "<think>")),
    # JSON a model wrote: tool-call arguments, a call written as text, a cached reply.
    Case("read_json: brackets nested a megabyte deep", read_json, lambda n: _times("[", n)),
    Case("read_json: objects nested a megabyte deep", read_json, lambda n: _times('{"a":', n)),
    Case("read_json: escaped quotes after deep brackets", read_json, lambda n: _times('\\"', n, '["' + "[" * 200)),
    Case("read_json: an unclosed string after deep brackets", read_json, lambda n: _times("a", n, "[" * 300 + '"')),
    # A model's text where a description belongs (the harness, export docs, the scorer ask whether it is prose).
    Case("description_problem: fences never closed", description_problem, lambda n: _times("```json\n{", n)),
    Case("description_problem: fenced objects", description_problem, lambda n: _times('```\n{"a": [[1]]}\n```\n', n)),
    Case("description_problem: an object a megabyte deep", description_problem, lambda n: _times('{"a":', n)),
    Case("description_problem: tool-call tags", description_problem, lambda n: _times("<tool_call", n)),
    # Tool calls a model wrote as text (the tools and task agents read them as calls).
    Case("written_tool_calls: tags never closed", written_tool_calls, lambda n: _times("<tool_call>{", n)),
    Case("written_tool_calls: fenced calls", written_tool_calls, lambda n: _times('```\n{"name": "f"}\n```', n)),
    # What the agent observed, as the reference's code writer is shown it.
    Case(
        "reference_triples: a raised name that ends wrongly",
        lambda text: reference_triples([("(1,)", text)]),
        lambda n: _times("a.", n, "raises A", "!"),
    ),
    Case(
        "reference_triples: blanks after the colon",
        lambda text: reference_triples([("(1,)", text)]),
        lambda n: _times(" ", n, "raises A:"),
    ),
    Case(
        "reference_triples: an output of brackets",
        lambda text: reference_triples([("(1,)", text)]),
        lambda n: _times("[", n),
    ),
    Case("cut_at_stop: many markers", cut_at_stop, lambda n: _times("[STOP]", n)),
    # Docstrings of imported functions (files given to `manifests import`, downloaded datasets).
    Case(
        "description_from_docstring: an example heading that ends wrongly",
        lambda text: description_from_docstring(text, "f"),
        lambda n: _times(" ", n, "Example", "x"),
    ),
    Case(
        "description_from_docstring: calls never closed",
        lambda text: description_from_docstring(text, "f"),
        lambda n: _times("f(", n),
    ),
    Case(
        "description_from_docstring: nested calls with results",
        lambda text: description_from_docstring(text, "f"),
        _nested_calls,
    ),
    Case(
        "description_from_docstring: an example block of open calls",
        lambda text: description_from_docstring(text, "f"),
        lambda n: _times("f(\n", n, "Example 1:\n"),
    ),
    Case(
        "description_from_docstring: the name and blanks",
        lambda text: description_from_docstring(text, "f"),
        lambda n: _times(" ", n, "f"),
    ),
    Case("codearc_printed: result markers", _printed, lambda n: _times("Result 1: ", n)),
    # Requests and labels an agent sends to the server.
    Case("label_problem: a long label", label_problem, lambda n: _times("a", n)),
    Case(
        "oversized: an id key and blanks",
        lambda text: oversized(text, len(text), 1024),
        lambda n: _times(" ", n, '"id"'),
    ),
    Case(
        "oversized: an id string that never closes",
        lambda text: oversized(text, len(text), 1024),
        lambda n: _times("\\a", n, '"id": "'),
    ),
    # A guest's outcome text.
    Case(
        "nests_deeper_than: escaped quotes",
        lambda text: _nests_deeper_than(text, 100),
        lambda n: _times('\\"', n, '["' + "[" * 200),
    ),
    Case(
        "nests_deeper_than: an unclosed string",
        lambda text: _nests_deeper_than(text, 100),
        lambda n: _times("[", 300) + _times("a", n, '"'),
    ),
    # The paper agent's and the RL policy's replies (one grammar).
    Case("visible_text: opening tags, never closed", visible_text, lambda n: _times("<think>", n)),
    Case("visible_text: closing tags only", visible_text, lambda n: _times("</thinking>", n)),
    Case(
        "read_input: decoration that never reaches a marker", read_input, lambda n: _times("> * _ ` # - ", n, "", "x")
    ),
    Case("read_input: a marker and blanks", read_input, lambda n: _times(" \t", n, "INPUT:", "x")),
    Case("read_input: an empty marker before many fences", read_input, lambda n: _times("```\n", n, "INPUT:\n")),
    Case("read_input: marker lines only", read_input, lambda n: _times("INPUT:\n", n)),
    Case("read_input: an unclosed call", lambda text: read_input(text, 2), lambda n: _times("(", n, "INPUT: ")),
    Case(
        "read_inputs: one line listing inputs",
        lambda t: read_inputs(t, 1, 64),
        lambda n: _times("(1,), ", n, "INPUT: "),
    ),
    Case(
        "read_inputs: groups that never close", lambda t: read_inputs(t, 1, 64), lambda n: _times("(1, ", n, "INPUT: ")
    ),
    Case("read_inputs: quotes that never close", lambda t: read_inputs(t, 2, 64), lambda n: _times("('", n, "INPUT: ")),
    Case("read_reflection: marker lines only", read_reflection, lambda n: _times("HYPOTHESIS: x\n", n)),
    Case("read_reflection: a decision and blanks", read_reflection, lambda n: _times(" ", n, "CONCLUDED:", "x")),
    Case("read_reflection: blank lines", read_reflection, lambda n: _times("\n", n, "HYPOTHESIS:")),
    # The creation pipeline's model replies and dataset solutions.
    Case("read_calls: calls never closed", lambda text: read_calls(text, (1, 2)), lambda n: _times("test_func(", n)),
    Case("read_calls: one line of calls", lambda text: read_calls(text, (1, 2)), lambda n: _times("test_func(1)", n)),
    Case("read_description: fences never closed", read_description, lambda n: _times("```", n)),
    Case("read_description: a label and blanks", read_description, lambda n: _times(" ", n, "**Description**:", "x")),
    Case("python_blocks: opening fences, never closed", _python_blocks, lambda n: _times("```python\n", n)),
    Case("python_blocks: opening fences without a line end", _python_blocks, lambda n: _times("```python", n)),
    # A question a model wrote for `create --tasks-for`, checked for the inputs its chain needs.
    Case("unstated_input: one long number", lambda text: unstated_input(text, _STEPS), lambda n: _times("1", n)),
    Case("unstated_input: signs and digits", lambda text: unstated_input(text, _STEPS), lambda n: _times("-1", n)),
    Case("unstated_input: decimal points", lambda text: unstated_input(text, _STEPS), lambda n: _times("1.", n)),
    Case("unstated_input: exponents", lambda text: unstated_input(text, _STEPS), lambda n: _times("1e-", n)),
    Case("unstated_input: near misses", lambda text: unstated_input(text, _STEPS), lambda n: _times("Banana spli", n)),
    # A commitment file handed to `manifests verify`, and `git log`'s output about a user's folder (`create --after`).
    Case("commitment: a digest that never ends", _commitment, lambda n: _times("a", n, '{"suite_digest": "', '"}')),
    Case(
        "commitment: many method ids",
        _commitment,
        lambda n: "{" + _times('"methods": {"s/m": "x", ', n, "", '"s/n": "y"}') + "}",
    ),  # fmt: skip
    Case("commitment: nesting", _commitment, lambda n: _times("[", n)),
    Case("first_commits: NULs only", _first_commits, lambda n: _times("\0", n)),
    Case("first_commits: headers without names", _first_commits, lambda n: _times("\0\02026-01-01T00:00:00Z", n)),
    Case("first_commits: one long name", _first_commits, lambda n: _times("a", n, "\0\02026-01-01T00:00:00Z\0\n")),
    # A task's step inputs (a suite's tasks, possibly written by a model through `create --tasks-for`).
    Case("placeholders: dollar signs", placeholders, lambda n: _times("$", n)),
    Case("placeholders: placeholders only", placeholders, lambda n: _times("$1", n)),
    # Report labels (run and model names).
    Case("wrap: one long word", _wrap, lambda n: _times("a", n)),
    Case("wrap: separators only", _wrap, lambda n: _times("-", n)),
    # A report's cells (run names a client chose, model names) read as numbers or not, for the HTML page's alignment.
    Case("html_number: digits that end in a letter", _NUMBER.fullmatch, lambda n: _times("1", n, "", "x")),
    Case("html_number: digit groups that never end", _NUMBER.fullmatch, lambda n: _times("1,", n, "", ".x")),
    Case("html_number: a fraction that ends in a letter", _NUMBER.fullmatch, lambda n: _times("1", n, "0.", "%x")),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_reader_of_untrusted_text_stays_linear_up_to_a_megabyte(case: Case) -> None:
    for size in SIZES:
        text = case.make(size)
        assert len(text) >= size * 0.9
        # The collector's full passes walk every object a long test session left alive (in CI, 1.0 s for a parse
        # of 0.2 s): frozen (no collection first, which costs seconds on such a heap), they count only what the
        # reader itself allocates.
        gc.freeze()
        try:
            started = time.thread_time()
            case.read(text)
            spent = time.thread_time() - started
        finally:
            gc.unfreeze()
        allowed = FIXED_S + BUDGET_PER_MEGABYTE * len(text) / MEGABYTE
        assert spent <= allowed, (
            f"{case.name}: {spent:.2f} s of CPU on {len(text):,} characters (allowed {allowed:.2f} s)"
        )


_BOUNDED = "bounded: only its first few kilobytes are read"
_OPERATOR = "operator's text only (command-line names, this program's own output)"
_DATASET = "the operator's dataset files, anchored or a literal name before one bounded class"

GRAMMAR_MARKER = "f'{_DECORATION}(?P<word>input|hypothesis|concluded)[ \\\\t*_`]*:[ \\\\t*_`]*(?P<rest>.*)'"
SOURCES_CALLED = "f'\\\\b{re.escape(n)}\\\\s*\\\\('"

#: Every regular expression in the source: readers that feed it (``CASES`` names before the colon), or why
#: no untrusted text reaches it.
PATTERNS: dict[tuple[str, str], tuple[str, ...] | str] = {
    ("pau_mcp/scoring/codematch.py", r"[\w+#.-]*+"): ("extract_code",),
    ("pau_mcp/scoring/codematch.py", r"f'^[ \\t]*+(?:async[ \\t]++)?def[ \\t]++{re.escape(entry)}[ \\t]*+\\('"): (
        "extract_code",
    ),
    (
        "pau_mcp/scoring/judge.py",
        r"[*_\s]*+(?:final\s++)?rating[*_\s]*+[:=][*_\s]*+\[?\s*+([1-5])\s*+\]?(?:\s*+/\s*+5)?[*_\s]*+\.?[*_\s]*+",
    ): ("parse_rating",),
    ("pau_mcp/scoring/judge.py", r"rating\s*+\**+\s*+[:=]\s*+\**+\s*+\[?\s*+[1-5](?![\d.,]\d)(?!\d)"): (
        "rating_anywhere",
    ),
    ("pau_mcp/scoring/judge.py", r"rating:\s*([1-5])"): ("parse_rating_anywhere",),
    ("pau_mcp/scoring/judge.py", r"rating"): ("rating_anywhere",),
    (
        "pau_mcp/rl/critic.py",
        r"[*_\s]*+(?:final\s++)?rating[*_\s]*+[:=][*_\s]*+\[?\s*+([0-9])\s*+\]?(?:\s*+/\s*+9)?[*_\s]*+\.?[*_\s]*+",
    ): ("parse_critic_rating",),
    ("pau_mcp/reports/failures.py", r"^label:[ \t]*([a-z_]+)[ \t]*$"): ("parse_label",),
    ("pau_mcp/llm/replies.py", r"<(/?)think(?:ing)?>"): ("split_thinking",),
    ("pau_mcp/llm/replies.py", r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[\[\]{}]'): ("read_json",),
    ("pau_mcp/grammar.py", r"<(/?)think(?:ing)?>"): ("visible_text",),
    ("pau_mcp/grammar.py", GRAMMAR_MARKER): ("read_input", "read_reflection"),
    ("pau_mcp/grammar.py", r"(yes|no)\b"): ("read_reflection",),
    ("pau_mcp/grammar.py", r"[ \t]*(```|~~~)"): ("read_input",),
    ("pau_mcp/manifests/model.py", r"\$([1-9])"): ("placeholders",),
    ("pau_mcp/harness/agents.py", "re.escape(marker)"): "a literal (the protocol's own marker word), searched once",
    ("pau_mcp/creation/messages.py", r"\btest_func\s*\("): ("read_calls",),
    ("pau_mcp/creation/messages.py", r"^\s*(\*\*)?(description|answer|summary)(\*\*)?\s*:\s*"): ("read_description",),
    ("pau_mcp/creation/messages.py", r"```.*?(```|\Z)"): ("read_description",),
    ("pau_mcp/creation/pipeline.py", r"arg\d+"): "this program's own anonymised names (fullmatch of a short name)",
    ("pau_mcp/creation/sources.py", r"^\s*(write\s+)?(a\s+)?(python\s+)?(function|program)\s+(to|that)\s+"): _DATASET,
    ("pau_mcp/creation/sources.py", r"^[ \t]*class\s"): _DATASET + "; indentation cannot cross lines",
    ("pau_mcp/creation/sources.py", SOURCES_CALLED): _DATASET,
    ("pau_mcp/server/inputs.py", r"[0-9]+|[A-Za-z]+|[^0-9A-Za-z]+"): (
        "the suite's published example inputs (operator's data); alternatives of disjoint classes: one pass"
    ),
    ("pau_mcp/server/inputs.py", r"[0-9A-Za-z]+"): "the suite's published example inputs (operator's data); one class",
    ("pau_mcp/protocol.py", r"^raises ([A-Za-z_][\w.]*)(?::\s?(.*))?$"): ("reference_triples",),
    (
        "pau_mcp/manifests/importers/common.py",
        r"^(?:for\s++)?(?:an?\s++)?(?:exam[pb]les?|e\.g\.)\s*+\d*+\s*+(?:of\s++usage)?\s*+[:.]?$",
    ): ("description_from_docstring",),
    ("pau_mcp/manifests/importers/common.py", r"^(input|output|explanation)\s*[:=]"): ("description_from_docstring",),
    ("pau_mcp/manifests/importers/common.py", r"==>|=>|->|➞|==|\b(output|result)\s+should\s+be\b"): (
        "description_from_docstring",
    ),
    ("pau_mcp/manifests/importers/common.py", r"\)\s*(==>|=>|->|➞|==|should\s+(return|be)\b)"): (
        "description_from_docstring",
    ),
    ("pau_mcp/manifests/importers/common.py", r"f'\\b{re.escape(entry)}\\s*+\\('"): ("description_from_docstring",),
    ("pau_mcp/manifests/importers/common.py", r"[A-Za-z]{2}"): ("description_from_docstring",),
    ("pau_mcp/manifests/importers/common.py", r"[^a-z0-9_.-]+"): _OPERATOR + ": a suite name from a file name",
    ("pau_mcp/manifests/importers/codearc.py", r"Result \d+:[ ]?"): ("codearc_printed",),
    ("pau_mcp/manifests/importers/anonymise.py", "re.escape(entry)"): (
        "a literal (the entry's name) searched in the names one imported program binds"
    ),
    ("pau_mcp/manifests/model.py", r"^[a-z0-9][a-z0-9_.-]{0,63}$"): "anchored, bounded repeats: at most 64 characters",
    ("pau_mcp/manifests/model.py", r"^[a-z0-9][a-z0-9_.-]{0,63}/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"): (
        "anchored, bounded repeats: at most 193 characters"
    ),
    ("pau_mcp/manifests/model.py", r"^def (?P<entry>[A-Za-z_]\w*)\((?P<params>[^)]*)\):$"): (
        "anchored at both ends, one pass over the parameters: a manifest's header line"
    ),
    ("pau_mcp/manifests/model.py", "b'\\\\r\\\\n|\\\\r|\\\\n'"): "three literals, no repeat",
    ("pau_mcp/prompts/reference.py", "f'\\\\[({names})\\\\]'"): (
        "literal alternatives between brackets (the prompt's own field names): no repeat"
    ),
    ("pau_mcp/contract.py", r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}"): ("label_problem",),
    ("pau_mcp/server/wire.py", r'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")'): ("oversized",),
    ("wasm_runtime/_guest_outcome.py", r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)|[\[\]{}]'): ("nests_deeper_than",),
    ("pau_mcp/reports/plots.py", r"[^-_./ ]*[-_./ ]*"): ("wrap",),
    ("pau_mcp/reports/render.py", r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:%|/\d+)?(?: \*)?|n/a|"): ("html_number",),
    ("pau_mcp/harness/runner.py", r"[^A-Za-z0-9_.-]+"): _OPERATOR + ": a run's default name",
    ("pau_mcp/cli/rl.py", r"[^A-Za-z0-9_.-]+"): _OPERATOR + ": a run's default name",
    ("pau_mcp/inspect_task.py", r"\s+"): "one repeat of one class: linear by construction",
    ("pau_mcp/llm/pricing.py", r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$"): _OPERATOR + ": a model name",
    ("pau_mcp/server/schemas.py", r", | or "): _OPERATOR + ": this program's own type words",
}

_RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


def _patterns_in_source() -> set[tuple[str, str]]:
    """Each ``re.<function>(pattern, ...)`` in the packages: (file, the pattern's text, or its source when built)."""
    found = set()
    for package in ("pau_mcp", "wasm_runtime"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in _RE_FUNCTIONS
                    and node.args
                ):
                    first = node.args[0]
                    text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
                    found.add((path.relative_to(ROOT).as_posix(), text if text is not None else ast.unparse(first)))
    return found


def test_every_regular_expression_in_the_source_is_audited() -> None:
    found = _patterns_in_source()
    missing = sorted(found - set(PATTERNS))
    assert not missing, (
        "regular expressions nobody has audited: add each to PATTERNS with a case feeding it its worst input "
        f"(or why no untrusted text reaches it): {missing}"
    )
    stale = sorted(set(PATTERNS) - found)
    assert not stale, f"PATTERNS lists expressions no longer in the source; remove them: {stale}"


def test_every_audited_reader_has_a_linear_time_case() -> None:
    readers = {case.name.split(":", 1)[0] for case in CASES}
    named = {reader for how in PATTERNS.values() if isinstance(how, tuple) for reader in how}
    assert named <= readers, f"PATTERNS names readers without a case: {sorted(named - readers)}"
