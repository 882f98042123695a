"""What every importer shares: drafts, building methods, freezing and validating them in the sandbox,
refusing failures with reasons, comparing with what a dataset recorded, writing the suite, and the report.

An importer reads its dataset on the host with ``ast`` and JSON only and turns
each item into a ``Draft`` (or a ``Refusal``). ``build_suite`` does the rest
the same way for all of them: anonymise, freeze every input in the sandbox,
validate with ``check_method``, refuse what fails (each with its reason), and
write the methods that pass as a new suite. Outcomes only ever come from the
sandbox; a dataset's recorded outputs are only compared with them.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wasm_runtime import Limits, SandboxInterface, engine_for, literal_value, numpy_engine_installed, outcomes_match
from wasm_runtime.engines import NUMPY_INSTALL_HINT

from ...userfiles import printable
from ..checks import Problem, check_methods, freeze_methods
from ..model import Case, FrozenOutcome, Method, Original, Provenance, SuiteInfo, Tags
from ..store import ManifestStore, Suite
from .anonymise import ENTRY, CannotAnonymise, anonymise

__all__ = [
    "Comparer",
    "DatasetUnavailable",
    "Disagreement",
    "Draft",
    "ImportReport",
    "ImportTargetError",
    "Probe",
    "Progress",
    "Recorded",
    "Refusal",
    "build_suite",
    "description_from_docstring",
    "method_name",
    "no_progress",
    "prepare_target",
    "split_probes",
    "suite_name_from",
]

#: ``progress(description, total)`` gives a context manager yielding ``advance()``; ``cli.common.bar`` is one.
Progress = Callable[[str, int], AbstractContextManager[Callable[..., None]]]

#: How many inputs an agent is shown before it starts calling (PAU gives two).
EXAMPLES_SHOWN = 2
#: Threads running sandbox batches during an import (see ``build_suite`` for why only one).
SANDBOX_WORKERS = 1


class DatasetUnavailable(RuntimeError):
    """The dataset cannot be read (missing file, wrong format, hub unreachable); the message says what to do."""


class ImportTargetError(ValueError):
    """The suite cannot be written where asked (bad name, or it exists without ``--replace``)."""


@dataclass(frozen=True)
class Recorded:
    """What a dataset recorded for one input: a value, printed text, or that the call raised."""

    value: Any = None
    raised: bool = False

    def shown(self) -> str:
        """How the record reads in a report."""
        return "raised" if self.raised else repr(self.value)


@dataclass(frozen=True)
class Probe:
    """One input of a draft (an argument-tuple literal) and what the dataset recorded for it, if anything.

    Attributes:
        input: The argument-tuple literal.
        recorded: What the dataset recorded for it.
        original: The example as the dataset writes it, kept with an initial example for the reference
            protocol (``Original``).
    """

    input: str
    recorded: Recorded | None = None
    original: Original | None = None


@dataclass
class Draft:
    """One dataset item on its way to becoming a method.

    Attributes:
        key: The dataset's own id for the item (``HumanEval/17``); reports use it.
        name: The method's opaque name inside the suite (``h017``).
        source: The original source, before anonymisation.
        entry: The function in ``source`` the method calls.
        description: The gold description (None or empty refuses the item).
        examples: Inputs shown to the agent.
        tests: Held-out inputs for scoring.
        provenance: ``Provenance`` fields other than ``original_name`` (the anonymiser fills that).
        hidden_name: The function's real name when ``entry`` is already a stand-in (CodeARC's
            ``solution``); it is recorded as the original name and kept out of every name.
    """

    key: str
    name: str
    source: str
    entry: str
    description: str | None
    examples: list[Probe]
    tests: list[Probe]
    provenance: dict[str, Any]
    hidden_name: str | None = None

    @property
    def probes(self) -> list[Probe]:
        """Examples then tests, the order of a method's cases."""
        return [*self.examples, *self.tests]


@dataclass(frozen=True)
class Refusal:
    """An item that was not imported, and why."""

    key: str
    reason: str
    method_id: str | None = None

    def __str__(self) -> str:
        where = f" ({self.method_id})" if self.method_id else ""
        return f"{self.key}{where}: {self.reason}"

    @property
    def kind(self) -> str:
        """The reason without its particulars, for counting: ``every input raises``, ``[determinism]``."""
        if self.reason.startswith("["):
            return self.reason.split("]", 1)[0] + "]"
        cut = min((at for at in (self.reason.find(mark) for mark in (" (", ": ", "; ")) if at > 0), default=None)
        return self.reason[:cut].strip()


@dataclass(frozen=True)
class Disagreement:
    """A recorded output the sandbox does not reproduce, with its cause.

    ``cause`` is ``json round-trip`` (equal once our value goes through JSON, as the
    dataset's did), ``error`` (one side raised or did not return), ``nondeterminism``
    (two sandbox runs differ) or ``mismatch``.
    """

    method_id: str
    input: str
    cause: str
    recorded: str
    ours: str

    def __str__(self) -> str:
        return f"{self.method_id} {self.input}: {self.cause}: dataset {self.recorded}, sandbox {self.ours}"


@dataclass
class ImportReport:
    """What an import did: the suite written, what was refused and why, and what was measured on the way."""

    dataset: str
    suite: str
    path: Path | None = None
    total: int = 0
    imported: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compared: int = 0
    reproduced: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    skipped_inputs: int = 0
    gold_total: int | None = None
    gold_passed: int | None = None
    gold_failures: list[Refusal] = field(default_factory=list)

    @property
    def wrote(self) -> bool:
        """True when a suite was written (at least one method imported)."""
        return self.path is not None

    def causes(self) -> Counter[str]:
        """Disagreements counted by cause."""
        return Counter(d.cause for d in self.disagreements)

    def refusal_kinds(self) -> Counter[str]:
        """Refusals counted by the kind of their reason."""
        return Counter(r.kind for r in self.refused)

    def lines(self, detail: int = 20) -> list[str]:
        """The report as text lines, listing every refusal and up to ``detail`` disagreements."""
        out = []
        if self.wrote:
            counts = f"{len(self.imported)} of {self.total} items from {self.dataset}"
            out.append(f"imported {counts} into suite {self.suite} ({self.path})")
        else:
            out.append(
                f"nothing imported from {self.total} items of {self.dataset}; suite {self.suite} was not written"
            )
        if self.refused:
            counts = ", ".join(f"{kind} {n}" for kind, n in self.refusal_kinds().most_common())
            out.append(f"refused {len(self.refused)} ({counts}):")
            out.extend(f"  {refusal}" for refusal in self.refused)
        if self.skipped_inputs:
            out.append(f"skipped {self.skipped_inputs} dataset inputs that are not literals")
        if self.compared:
            share = 100 * self.reproduced / self.compared
            out.append(
                f"recorded outputs: {self.compared} compared, {self.reproduced} reproduced exactly ({share:.1f}%)"
            )
            if self.disagreements:
                out.append("disagreements: " + ", ".join(f"{cause} {n}" for cause, n in self.causes().most_common()))
                out.extend(f"  {d}" for d in self.disagreements[:detail])
                if len(self.disagreements) > detail:
                    out.append(f"  ... and {len(self.disagreements) - detail} more (--json lists all)")
        if self.gold_total is not None:
            out.append(
                f"gold solutions passing their own tests in the sandbox: {self.gold_passed} of {self.gold_total}"
            )
            out.extend(f"  FAILED {failure}" for failure in self.gold_failures)
        out.extend(self.notes)
        return [printable(line) for line in out]  # keys carry file names, which may hold terminal escapes

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the whole report."""
        return {
            "dataset": self.dataset,
            "suite": self.suite,
            "path": str(self.path) if self.path else None,
            "total": self.total,
            "imported": self.imported,
            "refused": [{"key": r.key, "method_id": r.method_id, "reason": r.reason} for r in self.refused],
            "refused_by_reason": dict(self.refusal_kinds().most_common()),
            "skipped_inputs": self.skipped_inputs,
            "compared": self.compared,
            "reproduced": self.reproduced,
            "disagreements": [d.__dict__ for d in self.disagreements],
            "gold_total": self.gold_total,
            "gold_passed": self.gold_passed,
            "gold_failures": [{"key": r.key, "reason": r.reason} for r in self.gold_failures],
            "notes": self.notes,
        }


#: Compares a dataset's record with our frozen outcome: None when they agree, else the cause.
Comparer = Callable[[Recorded, FrozenOutcome], str | None]


@contextmanager
def no_progress(description: str, total: int) -> Iterator[Callable[..., None]]:
    """The default ``Progress``: shows nothing."""
    yield lambda *_args, **_kwargs: None


def suite_name_from(text: str) -> str:
    """A valid suite name made from a file or folder name (``My Funcs`` -> ``my-funcs``)."""
    name = re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-._")
    return name[:64] or "python"


def method_name(prefix: str, index: int, count: int, width: int = 3) -> str:
    """An opaque method name from the item's position: ``h017``; wide enough for ``count`` items."""
    return f"{prefix}{index:0{max(width, len(str(max(count - 1, 0))))}d}"


def prepare_target(store: ManifestStore, suite: str, replace: bool) -> Path:
    """Check, before any work, that suite ``suite`` may be written; return the directory it goes under.

    Raises:
        ImportTargetError: The name is invalid, the suite exists there and ``replace`` is off,
            or a suite of that name lives in another manifests directory.
    """
    try:
        SuiteInfo(name=suite)
    except ValidationError:
        raise ImportTargetError(
            f"--suite {suite!r}: suite names use lower-case letters, digits, '_', '.' or '-' (at most 64)"
        ) from None
    root = store.writable_root()
    target = root / suite
    if target.exists() and any(target.iterdir()) and not replace:
        raise ImportTargetError(f"suite {suite!r} already exists at {target}; pass --replace or choose another --suite")
    for other in store.dirs:
        found = other / suite
        if other.resolve() != root.resolve() and (found / "suite.json").is_file():
            raise ImportTargetError(f"a suite named {suite!r} already exists at {found}; choose another --suite")
    return root


# Possessive repeats: the runs of blanks around the number never trade characters (cubic on a long blank run).
_EXAMPLE_HEADING = re.compile(
    r"^(?:for\s++)?(?:an?\s++)?(?:exam[pb]les?|e\.g\.)\s*+\d*+\s*+(?:of\s++usage)?\s*+[:.]?$", re.IGNORECASE
)
_EXAMPLE_LINE = re.compile(r"^(input|output|explanation)\s*[:=]", re.IGNORECASE)
_SHOWS_RESULT = re.compile(r"==>|=>|->|➞|==|\b(output|result)\s+should\s+be\b", re.IGNORECASE)
_CALL_RESULT = re.compile(r"\)\s*(==>|=>|->|➞|==|should\s+(return|be)\b)", re.IGNORECASE)


def _depth(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


#: Characters of call arguments one line may have parsed as literals (a docstring line of nested calls
#: would otherwise parse each call's arguments again inside every call around it).
_MAX_PARSED_ARGUMENT_CHARS = 100_000


def _closing_brackets(text: str) -> dict[int, int]:
    """Where each ``(`` of ``text`` is closed, in one pass (unclosed ones are left out)."""
    closes: dict[int, int] = {}
    opened: list[int] = []
    for index, char in enumerate(text):
        if char == "(":
            opened.append(index)
        elif char == ")" and opened:
            closes[opened.pop()] = index
    return closes


def _literal_call_with_result(text: str, entry: str) -> bool:
    """True for ``entry(<literals>) ==> result``: an example, wherever it stands."""
    closes: dict[int, int] | None = None
    budget = _MAX_PARSED_ARGUMENT_CHARS
    for match in re.finditer(rf"\b{re.escape(entry)}\s*+\(", text):
        if closes is None:
            closes = _closing_brackets(text)
        start = match.end() - 1
        end = closes.get(start)
        if end is None or not _CALL_RESULT.match(text, end):
            continue
        budget -= end - start
        if budget < 0:
            return False
        try:
            literal_value(f"({text[start + 1 : end]},)" if text[start + 1 : end].strip() else "()")
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        return True
    return False


def description_from_docstring(docstring: str | None, entry: str) -> str:
    """A gold description from a docstring: its prose without doctest (``>>>``) blocks and example blocks.

    Drops ``>>>`` lines with the output lines under them; "Input:" /
    "Output:" / "Explanation:" lines; lines showing a call of ``entry`` on
    literals with its result (``add(2, 3) ==> 5``); and example blocks: a
    heading such as "For example:" or "Example 1:" with what follows it while
    that is indented under it, calls ``entry``, shows a result (``=>``, "the
    output should be"), is a comment, or has no words. Other calls of
    ``entry`` stay (``fib4(n) -> fib4(n-1) + ...`` defines the function).
    Lines of a paragraph are joined with spaces.
    """
    if not docstring:
        return ""
    kept: list[str] = []
    in_doctest = False
    block_indent: int | None = None  # indentation of the example heading whose block is being skipped
    open_brackets = 0  # a skipped call may go on over several lines
    calls_entry = re.compile(rf"\b{re.escape(entry)}\s*+\(")
    for line in inspect.cleandoc(docstring).splitlines():
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if text.startswith(">>>"):
            in_doctest = True
            continue
        if in_doctest:
            if not text:
                in_doctest = False
                kept.append("")
            continue
        if block_indent is not None:
            example = (
                open_brackets > 0 or not text or indent > block_indent or text.startswith("#")
                or calls_entry.search(text) or _SHOWS_RESULT.search(text) or _EXAMPLE_LINE.match(text)
                or not re.search(r"[A-Za-z]{2}", text)
            )  # fmt: skip
            if example:
                open_brackets = max(open_brackets + _depth(text), 0)
                continue
            block_indent = None
            kept.append("")
        if _EXAMPLE_HEADING.match(text):
            block_indent, open_brackets = indent, 0
            continue
        if _EXAMPLE_LINE.match(text) or _literal_call_with_result(text, entry):
            continue
        kept.append(text)
    paragraphs, current = [], []
    for text in [*kept, ""]:
        if text:
            current.append(text)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return "\n\n".join(paragraphs).strip()


def split_probes(
    probes: Sequence[Probe], hide: str | None = None, shown: int = EXAMPLES_SHOWN
) -> tuple[list[Probe], list[Probe]]:
    """Split inputs into examples and tests, keeping at least one test.

    The first ``shown`` inputs become examples, fewer when there are few
    inputs (one input: no example; two: one example, one test), so every
    method can be scored on an input the agent was not shown. Inputs whose
    text contains ``hide`` (the original name) are never chosen as examples.
    """
    count = min(shown, max(len(probes) - 1, 0))
    examples: list[Probe] = []
    tests: list[Probe] = []
    for probe in probes:
        reveals = hide is not None and len(hide) >= 3 and hide.lower() in probe.input.lower()
        (examples if len(examples) < count and not reveals else tests).append(probe)
    return examples, tests


def _value_types(inputs: Sequence[str]) -> list[str]:
    types: set[str] = set()
    for text in inputs:
        try:
            value = literal_value(text.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        for argument in value if type(value) is tuple else (value,):
            types.add(type(argument).__name__)
    return sorted(types)


def _explain(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "method"
    return f"{where}: {first['msg']}"


def _method(draft: Draft, suite: str) -> Method | Refusal:
    method_id = f"{suite}/{draft.name}"
    if not isinstance(draft.description, str) or not draft.description.strip():
        return Refusal(draft.key, "no gold description (no docstring, and none given)", method_id)
    if not draft.probes:
        return Refusal(draft.key, "no inputs to run it on", method_id)
    try:
        anonymous = anonymise(draft.source, draft.entry, hidden_name=draft.hidden_name)
    except CannotAnonymise as exc:
        return Refusal(draft.key, f"cannot anonymise: {exc}", method_id)
    named = draft.hidden_name or anonymous.original_name
    original = named if named != ENTRY else None
    try:
        return Method(
            id=method_id,
            header=anonymous.header,
            params=anonymous.params,
            source=anonymous.source,
            description=draft.description,
            examples=[Case(input=p.input, original=p.original) for p in draft.examples],
            tests=[Case(input=p.input) for p in draft.tests],
            provenance=Provenance(**{**draft.provenance, "original_name": original}),
            tags=Tags(arity=len(anonymous.params), value_types=_value_types([p.input for p in draft.probes])),
        )
    except ValidationError as exc:
        return Refusal(draft.key, f"invalid manifest: {_explain(exc)}", method_id)


def _cases(method: Method) -> list[Case]:
    return [*method.examples, *method.tests]


def _usable(method: Method) -> str | None:
    """Why a frozen method is useless as a hidden method even though it runs, or None."""
    outcomes = [case.outcome for case in _cases(method) if case.outcome is not None]
    if outcomes and all(o.status == "error" for o in outcomes):
        first = outcomes[0]
        hint = (
            "; the sandbox has the standard library, and numpy, pandas and scipy in its numpy engine"
            if first.error_type in ("ModuleNotFoundError", "ImportError")
            else ""
        )
        return f"every input raises ({first.shown()}){hint}"
    return None


def _problems_text(problems: list[Problem]) -> str:
    shown = "; ".join(f"[{p.check}] {p.message}" for p in problems[:3])
    return shown + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")


def _same(frozen: FrozenOutcome, again: Any) -> bool:
    recorded = frozen.outcome()
    return outcomes_match(recorded, again) and recorded.value == again.value


def _compare(
    methods: list[Method], drafts: dict[str, Draft], comparer: Comparer, sandbox: SandboxInterface, limits: Limits | None,
    report: ImportReport, progress: Progress,
) -> None:  # fmt: skip
    """Compare each recorded output with the frozen outcome; one a second run changes is nondeterminism."""
    with progress("comparing", len(methods)) as advance:
        for method in methods:
            for case, probe in zip(_cases(method), drafts[method.id].probes, strict=False):
                if probe.recorded is None or case.outcome is None:
                    continue
                report.compared += 1
                cause = comparer(probe.recorded, case.outcome)
                if cause is None:
                    report.reproduced += 1
                    continue
                again = sandbox.run(
                    method.source, [case.input], entry=method.entry, limits=limits, fresh=True, engine=method.engine
                )[0]
                if not _same(case.outcome, again):
                    cause = "nondeterminism"
                report.disagreements.append(
                    Disagreement(method.id, case.input, cause, probe.recorded.shown(), case.outcome.shown())
                )
            advance()


def build_suite(
    items: Sequence[Draft | Refusal],
    info: SuiteInfo,
    store: ManifestStore,
    sandbox: SandboxInterface,
    report: ImportReport,
    *,
    replace: bool = False,
    limits: Limits | None = None,
    comparer: Comparer | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Freeze, validate and write the drafts as suite ``info.name``; refuse (with reasons) what fails.

    Args:
        items: Drafts, and refusals the importer already made.
        info: The suite to write.
        store: Where suites live; the suite goes under ``store.writable_root()``.
        sandbox: Runs every input; the only source of outcomes.
        report: The importer's report so far; filled in and returned.
        replace: Overwrite an existing suite of that name.
        limits: Sandbox limits for freezing and validating.
        comparer: Compares the dataset's recorded outputs with ours, when it has any.
        progress: ``progress(description, total)`` context managers; silent by default.

    Returns:
        The report. ``report.path`` is None when no method passed (nothing is written then).
    """
    progress = progress or no_progress
    root = prepare_target(store, info.name, replace)
    report.total = len(items)
    drafts: dict[str, Draft] = {}
    methods: list[Method] = []
    numpy_ready = numpy_engine_installed()
    for item in items:
        if isinstance(item, Refusal):
            report.refused.append(item)
            continue
        built = _method(item, info.name)
        if isinstance(built, Method) and not numpy_ready and engine_for(built.source, built.engine) == "numpy":
            built = Refusal(item.key, f"needs the numpy engine, which is not installed: {NUMPY_INSTALL_HINT}", built.id)
        if isinstance(built, Refusal):
            report.refused.append(built)
        else:
            drafts[built.id] = item
            methods.append(built)

    # One worker: CPython 3.11 can raise "SystemError: AST constructor recursion depth mismatch"
    # when threads call ast.parse at once (python/cpython#106905), and every sandbox call and
    # every check parses. An import is a batch job; being right beats being twice as fast.
    with progress("freezing", len(methods)) as advance:
        frozen = freeze_methods(methods, sandbox, limits=limits, progress=advance, workers=SANDBOX_WORKERS)
    with progress("validating", len(frozen)) as advance:
        problems = check_methods(frozen, sandbox, limits=limits, progress=advance, workers=SANDBOX_WORKERS)
    if comparer is not None:
        _compare(frozen, drafts, comparer, sandbox, limits, report, progress)

    accepted: list[Method] = []
    for method in frozen:
        key = drafts[method.id].key
        reason = _problems_text(problems[method.id]) if problems[method.id] else _usable(method)
        if reason:
            report.refused.append(Refusal(key, reason, method.id))
        else:
            accepted.append(method)
    report.refused.sort(key=lambda r: (r.method_id or "", r.key))
    if accepted:
        suite = Suite.create(root, info, replace=replace)
        for method in accepted:
            suite.save(method)
        report.path = suite.path
        report.imported = [m.id for m in accepted]
    return report
