"""CodeARC (a local checkout of its repository) as suite ``codearc``.

A checkout holds, per problem ``<i>``: ``dataset/annotated/<i>.py`` (the
function under its real name, with its docstring), ``dataset/anonymous/<i>.py``
(the same function renamed ``solution``), and recorded calls in
``prompt_invocations/<annotated|anonymous>/num_invocations=10/llm/invocations.json``::

    {"<i>": {"<k>": {"input": "print('Result 1: ' + str(solution(ARGS)))",
                     "output": "Result 1: ...", "errored": false}}}

The method is the anonymous source (renamed again by our anonymiser); the
gold description is the annotated docstring; the arguments are read from the
recorded calls with ``ast``; and the report says what fraction of the recorded
outputs the sandbox reproduces exactly (``str`` of our value against the text
after "Result N: ").
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from wasm_runtime import Limits, SandboxInterface, decode, parse_python

from ..model import FrozenOutcome, SuiteInfo
from ..store import ManifestStore
from .anonymise import docstring_of
from .common import (
    DatasetUnavailable,
    Draft,
    ImportReport,
    Probe,
    Progress,
    Recorded,
    Refusal,
    build_suite,
    description_from_docstring,
    method_name,
    prepare_target,
    split_probes,
)

__all__ = ["CODEARC_URL", "compare_printed", "import_codearc", "recorded_call"]

CODEARC_URL = "https://github.com/Anjiang-Wei/CodeARC"
ANONYMOUS_ENTRY = "solution"
_INVOCATIONS = "prompt_invocations/{variant}/num_invocations=10/llm/invocations.json"
_RESULT = re.compile(r"Result \d+:[ ]?", re.DOTALL)


def recorded_call(text: str, entry: str) -> str | None:
    """The argument-tuple literal of the first call of ``entry`` in a recorded invocation, or None.

    None when there is no such call or an argument is not a literal (or is
    passed by keyword or ``*``).
    """
    try:
        tree = parse_python(text.strip())
    except (SyntaxError, ValueError):
        return None
    calls = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == entry
    ]
    if not calls or calls[0].keywords:
        return None
    parts = []
    for argument in calls[0].args:
        try:
            if isinstance(argument, ast.Starred):
                return None
            ast.literal_eval(argument)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        parts.append(ast.get_source_segment(text.strip(), argument) or ast.unparse(argument))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _printed(output: str) -> str:
    """What a recorded call printed for its result: the text after the last "Result N: "."""
    matches = list(_RESULT.finditer(output))
    return output[matches[-1].end() :] if matches else output


def compare_printed(recorded: Recorded, outcome: FrozenOutcome) -> str | None:
    """Compare a recorded printed result with ``str`` of our value: None when equal, else the cause."""
    if recorded.raised or outcome.status != "ok":
        return None if recorded.raised and outcome.status == "error" else "error"
    # print() output was stored with trailing whitespace trimmed ("Result 1:" for an empty string).
    return None if str(decode(outcome.encoded)).rstrip() == str(recorded.value).rstrip() else "mismatch"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _functions(source: str) -> list[str]:
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _original_name(annotated: str, anonymous: str) -> str | None:
    """The entry's real name: the annotated file's one function the anonymous file does not have (else its last)."""
    names = _functions(annotated)
    missing = [name for name in names if name not in set(_functions(anonymous))]
    if len(missing) == 1:
        return missing[0]
    return names[-1] if names else None


def _load_invocations(root: Path) -> tuple[dict[str, Any], str]:
    for variant in ("anonymous", "annotated"):
        path = root / _INVOCATIONS.format(variant=variant)
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8")), variant
            except json.JSONDecodeError as exc:
                raise DatasetUnavailable(f"{path}: not JSON ({exc.msg})") from None
    raise DatasetUnavailable(f"{root}: no {_INVOCATIONS.format(variant='anonymous')}; is this a CodeARC checkout?")


def _problem_ids(root: Path) -> list[str]:
    folder = root / "dataset" / "anonymous"
    if not folder.is_dir():
        raise DatasetUnavailable(f"{root}: no dataset/anonymous/ folder; pass the root of a CodeARC checkout to --from")
    ids = [path.stem for path in folder.glob("*.py")]
    return sorted(ids, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i))


def _draft(root: Path, problem: str, calls: dict[str, Any], variant: str, count: int) -> tuple[Draft | Refusal, int]:
    key = f"codearc/{problem}"
    name = method_name("c", int(problem) if problem.isdigit() else 0, count, width=4)
    anonymous = _read(root / "dataset" / "anonymous" / f"{problem}.py")
    annotated = _read(root / "dataset" / "annotated" / f"{problem}.py") or ""
    if anonymous is None:
        return Refusal(key, "dataset/anonymous file unreadable"), 0
    original = _original_name(annotated, anonymous)
    called = ANONYMOUS_ENTRY if variant == "anonymous" else original or ANONYMOUS_ENTRY
    probes: list[Probe] = []
    skipped = 0
    records = calls.get(problem, {}) if isinstance(calls, dict) else {}
    for k in sorted(records, key=lambda k: int(k) if str(k).isdigit() else 0):
        record = records[k]
        literal = recorded_call(str(record.get("input", "")), called) if isinstance(record, dict) else None
        if literal is None:
            skipped += 1
            continue
        output = str(record.get("output", ""))
        probes.append(Probe(literal, Recorded(value=_printed(output), raised=bool(record.get("errored")))))
    examples, tests = split_probes(probes, hide=original)
    description = description_from_docstring(docstring_of(annotated, original), original) if original else ""
    return Draft(
        key=key,
        name=name,
        source=anonymous,
        entry=ANONYMOUS_ENTRY,
        description=description,
        examples=examples,
        tests=tests,
        provenance={"dataset": "CodeARC", "original_id": problem, "url": CODEARC_URL},
        hidden_name=original,
    ), skipped


def import_codearc(
    store: ManifestStore,
    sandbox: SandboxInterface,
    source: Path,
    *,
    suite: str = "codearc",
    replace: bool = False,
    limit: int | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a CodeARC checkout as a suite and measure how many recorded outputs the sandbox reproduces.

    Args:
        store: Where suites live; the new one goes under ``store.writable_root()``.
        sandbox: Freezes and validates every method.
        source: The root of a CodeARC checkout (holding ``dataset/`` and ``prompt_invocations/``).
        suite: The suite's name.
        replace: Overwrite an existing suite of that name.
        limit: Import only the first ``limit`` problems.
        limits: Sandbox limits.
        progress: Progress bars, as in ``build_suite``.

    Returns:
        The report; ``reproduced`` of ``compared`` is the share of recorded outputs reproduced exactly.

    Raises:
        DatasetUnavailable: The folder is not a CodeARC checkout.
        ImportTargetError: The suite exists (without ``replace``) or the name is invalid.
    """
    prepare_target(store, suite, replace)
    root = Path(source)
    problems = _problem_ids(root)[: limit if limit is not None else None]
    calls, variant = _load_invocations(root)
    report = ImportReport(dataset="CodeARC", suite=suite)
    items: list[Draft | Refusal] = []
    for problem in problems:
        item, skipped = _draft(root, problem, calls, variant, len(problems))
        items.append(item)
        report.skipped_inputs += skipped
    info = SuiteInfo(
        name=suite,
        description="CodeARC problems as hidden methods; inputs from its recorded invocations.",
        dataset="CodeARC",
        url=CODEARC_URL,
    )
    return build_suite(
        items, info, store, sandbox, report, replace=replace, limits=limits, comparer=compare_printed, progress=progress
    )
