"""The creation pipeline: functions into a suite, the paper's way, and variants of a suite's methods.

Each function goes through the steps of ``outcomes.STEPS``; the first that fails refuses it with a reason of the
closed set ``outcomes.REASONS``. Code runs only in the sandbox; the model (through ``pau_mcp.llm``, so cached,
retried and priced) writes an input validator, proposes inputs and, when the source has no description of its own
or that one fails the check, writes the gold description. Gold is checked, not trusted: a code-writing model
rewrites the function from it (``scoring.write_code``, the scorer's own code match), and the gold is kept only
when that code matches at least ``gold_min_match`` of the hidden tests.

Every decision is written to the state file as it is made (``state``), so a killed run goes on where it stopped;
the suite is written once, at the end, from what was kept. Randomness (which inputs are shown, which changes are
tried first) comes from one generator per function seeded by ``seed`` and the function's key, so the same seed
and the same model replies make the same suite, whatever order the functions finish in.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wasm_runtime import (
    FUEL_PER_SECOND,
    Limits,
    Outcome,
    Sandbox,
    Status,
    engine_for,
    numpy_engine_installed,
    outcomes_match,
    parse_python,
)
from wasm_runtime.engines import NUMPY_INSTALL_HINT

from ..freshness import suite_day
from ..llm import LLMClient, LLMError
from ..manifests import Case, GoldCheck, ManifestStore, Method, Provenance, Suite, SuiteInfo, Tags, call_text
from ..manifests.checks import check_method, freeze_method, source_arity
from ..manifests.importers import ENTRY, Anonymised, CannotAnonymise, Progress, anonymise, slice_function
from ..manifests.importers.common import method_name, no_progress, prepare_target
from ..scoring import write_code
from ..scoring.coverage import source_shape, trace_limits, traced_parts
from .messages import (
    VALIDATOR,
    describe_messages,
    inputs_messages,
    read_calls,
    read_description,
    read_validator,
    validator_messages,
)
from .mutations import KINDS, candidates
from .outcomes import CreationReport, Record, StepCost
from .selection import Ran, Selection, select_cases
from .sources import Item, Source
from .state import StateFile

__all__ = ["GOLD_MODES", "CreateOptions", "create_suite", "create_variants", "side_effects"]

#: Where gold descriptions may come from: ``auto`` (the source's own, then the model's when that is missing or
#: fails the check), ``docs`` (the source's own only), ``model`` (the model's only, as the paper did for most).
GOLD_MODES = ("auto", "docs", "model")

#: Modules for files, processes, the network or the interpreter itself: a function importing one is refused (the
#: paper's list, and the others of the kind). The sandbox has no files or network anyway.
_SYSTEM_MODULES = frozenset(
    {"os", "sys", "subprocess", "shutil", "socket", "requests", "pathlib", "tempfile", "glob", "urllib", "http",
     "ftplib", "smtplib", "ctypes", "multiprocessing", "webbrowser", "signal"}
)  # fmt: skip
_PLACEHOLDER = "(the gold description is written after the tests are chosen)"
#: A change is first run with this many times the CPU of the original's slowest input, and at least this much: a
#: change that makes a loop endless (``n //= 3`` -> ``n *= 3``) cost the full time limit on every input of every try.
_BUDGET_FACTOR = 50
_BUDGET_FLOOR_S = 0.01
_OVER_BUDGET = frozenset({Status.TIMEOUT, Status.MEMORY, Status.OUTPUT_LIMIT})
_DATED_BY = {"git": "its file's first git commit", "mtime": "its file's modification time: git does not know it"}
_MAX_TOKENS = {"validator": 800, "inputs": 2000, "gold": 500}


@dataclass(frozen=True)
class CreateOptions:
    """How a creation run works; every field is part of what a resumed run must repeat.

    Attributes:
        model: The model that writes validators, inputs and descriptions (``provider/model``).
        coder_model: The model that rewrites functions from gold descriptions for the gold check.
        gold: ``auto``, ``docs`` or ``model`` (``GOLD_MODES``).
        gold_min_match: Share of hidden tests the gold's code must match.
        examples: Inputs shown to agents (the paper: 2).
        min_tests: Fewest hidden tests (the paper: 4).
        max_tests: Most hidden tests.
        inputs: Calls asked of the model.
        validator: Ask for an input validator (the paper did).
        seed: Seeds every random choice.
        changes: For variants: the kinds of change allowed (``mutations.KINDS``).
        per_method: For variants: variants wanted per original.
        tries: For variants: most changes tried per original.
        split: ``test`` or ``train``.
        after: Only functions first published after this day (ISO ``YYYY-MM-DD``; ``create --after``).
        limits: Sandbox limits.
        jobs: Functions worked on at once.
    """

    model: str
    coder_model: str
    gold: str = "auto"
    gold_min_match: float = 0.8
    examples: int = 2
    min_tests: int = 4
    max_tests: int = 20
    inputs: int = 20
    validator: bool = True
    seed: int = 0
    changes: tuple[str, ...] = KINDS
    per_method: int = 1
    tries: int = 10
    split: str = "test"
    after: str | None = None
    limits: Limits | None = None
    jobs: int = 4

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the first (JSON-ready; not the limits or the concurrency)."""
        fields = {k: v for k, v in self.__dict__.items() if k not in ("limits", "jobs") and (k != "after" or v)}
        same: dict[str, Any] = json.loads(json.dumps(fields))  # tuples as lists, as they come back from the file
        return same


@dataclass(frozen=True)
class _Refused:
    step: str
    reason: str
    detail: str


@dataclass
class _Work:
    """What the steps after the inputs need to make one method."""

    method_id: str
    source: str
    header: str
    params: list[str]
    pool: list[str]
    provenance: dict[str, Any]
    docs: str | None = None
    context: str | None = None
    hide: str | None = None
    bare: str | None = None  # the source without the validator the pipeline added, to tell what the validator refuses
    notes: list[str] = field(default_factory=list)


def side_effects(source: str) -> str | None:
    """Why a function may not be a hidden method because of what it touches, or None.

    It may not import a module for files, processes, the network or the interpreter (``_SYSTEM_MODULES``), nor
    call ``open``: the paper dropped such functions for the same reason. Read with ``ast``; nothing runs.
    """
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the anonymiser says why it does not parse
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in _SYSTEM_MODULES:
                return f"it imports {name}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("open", "__import__"):
            return f"it calls {node.func.id}()"
    return None


def _own_source(item: Item) -> tuple[str, str]:
    """The item's function and only the module-level code it reaches, and what the read step says of it.

    A source that cannot be sliced (it does not parse, or lacks the function) is left whole: the anonymiser then
    refuses it with its own reason.
    """
    try:
        cut = slice_function(item.source, item.entry)
    except CannotAnonymise:
        return item.source, ""
    said = ""
    if cut.whole:
        said = "; it reads globals(), vars(), eval() or exec(), so the whole module is kept"
    elif cut.kept or cut.left_out:
        said = f"; reaches {_names(cut.kept)}; leaves out {_names(cut.left_out)}"
    return cut.source, said


def _names(names: Sequence[str]) -> str:
    if not names:
        return "nothing else"
    shown = ", ".join(names[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _with_validator(source: str, validator: str, params: list[str]) -> str:
    """The source with the validator defined before ``test_func`` and called as its first statement."""
    tree = parse_python(source)
    checks = parse_python(validator).body
    position = next(i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef) and n.name == ENTRY)
    function = tree.body[position]
    assert isinstance(function, ast.FunctionDef)
    fixed = ", ".join(p for p in params if not p.startswith("*"))
    function.body.insert(0, parse_python(f"{VALIDATOR}({fixed})").body[0])
    tree.body[position:position] = checks
    return ast.unparse(tree) + "\n"


def _defines(source: str, name: str) -> bool:
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def _docs_with_names(docs: str, anonymous: Anonymised) -> str:
    """The dataset's description, with the parameters it names tied to ``arg0..``: the header shows only those."""
    named = [(old, new) for old, new in anonymous.renamed.items() if re.fullmatch(r"arg\d+", new) and old != new]
    if not named:
        return docs
    named.sort(key=lambda pair: int(pair[1][3:]))
    return f"{docs}\n\n(Parameters: " + ", ".join(f"{old} is {new}" for old, new in named) + ".)"


def _value_types(inputs: Sequence[str]) -> list[str]:
    types: set[str] = set()
    for text in inputs:
        try:
            value = ast.literal_eval(parse_python(text, mode="eval").body)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        types.update(type(a).__name__ for a in (value if isinstance(value, tuple) else (value,)))
    return sorted(types)


def _shown_error(outcome: Outcome) -> str:
    text = f"{outcome.error_type}: {outcome.error_message}" if outcome.error_type else outcome.status.value
    return text if len(text) <= 200 else text[:197] + "..."


class _Creator:
    """Runs the steps for many functions at once, sharing the model client, the sandbox and the state file."""

    def __init__(self, llm: LLMClient, sandbox: Sandbox, options: CreateOptions, state: StateFile) -> None:
        self.llm, self.sandbox, self.options, self.state = llm, sandbox, options, state
        self.limits = options.limits or sandbox.limits

    def rng(self, key: str) -> random.Random:
        return random.Random(f"{self.options.seed}/{key}")

    # -- the two outside resources --------------------------------------------------------------------------------

    async def ask(self, record: Record, step: str, messages: list[dict[str, str]]) -> str | _Refused:
        """One request to the creation model; a refusal that does not stop the run refuses this function."""
        try:
            reply = await self.llm.complete(self.options.model, messages, temperature=0.0, max_tokens=_MAX_TOKENS[step])
        except LLMError as exc:
            if exc.fatal:
                raise
            return _Refused(step, "llm-error", str(exc))
        cost = record.cost(step)
        cost.add(StepCost(1, int(reply.cached), reply.spent.input_tokens, reply.spent.output_tokens, reply.cost_usd))
        return reply.text

    async def run(
        self,
        source: str,
        inputs: Sequence[str],
        *,
        fresh: bool = False,
        trace: bool = False,
        limits: Limits | None = None,
    ) -> list[Outcome]:
        limits = limits or (trace_limits(self.limits) if trace else self.limits)
        call = partial(self.sandbox.run, source, list(inputs), entry=ENTRY, limits=limits, fresh=fresh, trace=trace)
        return await anyio.to_thread.run_sync(call)

    # -- steps shared by new functions and variants ---------------------------------------------------------------

    async def inputs_run(self, record: Record, work: _Work) -> list[Ran] | _Refused:
        outcomes = await self.run(work.source, work.pool)
        working = [(text, o) for text, o in zip(work.pool, outcomes, strict=True) if o.status is Status.OK]
        refused_by_validator = 0
        if work.bare is not None:
            bare = await self.run(work.bare, work.pool)
            handled = [b.status is Status.OK for b in bare]
            refused_by_validator = sum(
                1 for h, o in zip(handled, outcomes, strict=True) if h and o.status is not Status.OK
            )
            if any(handled) and not working:
                return _Refused(
                    "run", "validator-unusable", f"it refuses all {sum(handled)} inputs the function handles"
                )
        if not working:
            first = next((o for o in outcomes if o.status is not Status.OK), None)
            why = f" (first: {_shown_error(first)})" if first is not None else ""
            return _Refused("run", "no-working-inputs", f"none of {len(work.pool)} inputs returned{why}")
        said = f"{len(working)} of {len(work.pool)} inputs return"
        record.ok(
            "run",
            said
            + (
                f"; the validator refuses {refused_by_validator} the function would take"
                if refused_by_validator
                else ""
            ),
        )
        shape = source_shape(work.source)
        units: list[frozenset[Any]] = [frozenset()] * len(working)
        if engine_for(work.source) == "python":  # the numpy engine cannot trace: outputs alone guide the choice
            traced = await self.run(work.source, [t for t, _ in working], trace=True)
            for position, outcome in enumerate(traced):
                parts = traced_parts(outcome, shape)
                if parts is not None:
                    units[position] = frozenset(
                        {("line", n) for n in parts[0]} | {("branch", a, b) for a, b in parts[1]}
                    )
        return [Ran(text, o, u) for (text, o), u in zip(working, units, strict=True)]

    def select(self, record: Record, work: _Work, ran: list[Ran]) -> Selection | _Refused:
        o = self.options
        chosen = select_cases(
            ran, examples=o.examples, min_tests=o.min_tests, max_tests=o.max_tests, rng=self.rng(f"{record.key}/{work.method_id.split('/', 1)[1]}"),
            hide=work.hide,
        )  # fmt: skip
        if isinstance(chosen, str):
            return _Refused("select", "too-few-inputs", chosen)
        record.ok("select", chosen.detail)
        return chosen

    async def validate(self, record: Record, work: _Work, chosen: Selection) -> Method | _Refused:
        method = Method(
            id=work.method_id,
            header=work.header,
            params=work.params,
            source=work.source,
            description=_PLACEHOLDER,
            examples=[Case(input=i) for i in chosen.examples],
            tests=[Case(input=i) for i in chosen.tests],
            provenance=Provenance(**work.provenance),
            tags=Tags(arity=len(work.params), value_types=_value_types([*chosen.examples, *chosen.tests])),
        )
        frozen = await anyio.to_thread.run_sync(partial(freeze_method, method, self.sandbox, self.limits))
        problems = await anyio.to_thread.run_sync(partial(check_method, frozen, self.sandbox, self.limits))
        if problems:
            shown = "; ".join(f"[{p.check}] {p.message}" for p in problems[:3])
            return _Refused("validate", "invalid", shown if len(shown) <= 600 else shown[:597] + "...")
        record.ok("validate", "frozen; reproduces in fresh instances; the original name stays hidden")
        return frozen

    async def gold(self, record: Record, work: _Work, method: Method, modes: Sequence[str]) -> Method | _Refused:
        """Try each source of gold in turn; keep the first whose code matches enough hidden tests."""
        tried: list[str] = []
        for source in modes:
            if source == "docs":
                if not work.docs:
                    continue
                description = work.docs
            else:
                reply = await self.ask(record, "gold", describe_messages(method.source, method.params, work.context))
                if isinstance(reply, _Refused):
                    return reply
                description = read_description(reply)
                if not description:
                    record.fail("gold", "the model's reply holds no description")
                    continue
            record.ok("gold", f"from the {'source' if source == 'docs' else 'model'} ({len(description)} characters)")
            candidate = method.model_copy(update={"description": description})
            matched = await write_code(
                self.llm, self.options.coder_model, self.sandbox, candidate, description, limits=self.limits
            )
            record.cost("gold-check").add(
                StepCost(
                    1, int(matched.cached), matched.usage.input_tokens, matched.usage.output_tokens, matched.cost_usd
                )
            )
            if matched.status != "scored" or matched.fraction is None:
                return _Refused("gold-check", "llm-error", matched.reason or "the code writer failed")
            share = matched.fraction
            said = f"{share:.0%} of {len(method.tests)} tests matched by {self.options.coder_model}'s code from the {source} gold"
            if share >= self.options.gold_min_match:
                record.ok("gold-check", said)
                check = GoldCheck(
                    coder_model=self.options.coder_model, match=share, min_match=self.options.gold_min_match,
                    source="docs" if source == "docs" else "model",
                )  # fmt: skip
                provenance = candidate.provenance.model_copy(update={"gold_check": check})
                return candidate.model_copy(update={"provenance": provenance})
            record.fail("gold-check", said + f"; needs {self.options.gold_min_match:.0%}")
            tried.append(f"{source} {share:.0%}")
        if not tried:
            return _Refused(
                "gold",
                "no-gold",
                "the source has none" + (" and the model wrote none" if "model" in modes else " (--gold docs)"),
            )
        return _Refused(
            "gold-check", "gold-check-failed",
            f"code from the gold matched {', '.join(tried)} of the hidden tests; --gold-min-match is {self.options.gold_min_match:.0%}",
        )  # fmt: skip

    async def finish(self, record: Record, work: _Work, modes: Sequence[str]) -> Method | _Refused:
        """From the inputs to a checked method: run, select, validate, gold, gold check."""
        ran = await self.inputs_run(record, work)
        if isinstance(ran, _Refused):
            return ran
        chosen = self.select(record, work, ran)
        if isinstance(chosen, _Refused):
            return chosen
        method = await self.validate(record, work, chosen)
        if isinstance(method, _Refused):
            return method
        return await self.gold(record, work, method, modes)

    # -- one new function -----------------------------------------------------------------------------------------

    async def function(self, item: Item, source: Source, suite: str, count: int) -> Record:
        record = Record(item.key)
        done = await self._function(record, item, source, suite, count)
        if isinstance(done, _Refused):
            record.refuse(done.step, done.reason, done.detail)
        else:
            record.methods.append(done.model_dump(mode="json", exclude_none=True))
        return record

    async def _function(self, record: Record, item: Item, source: Source, suite: str, count: int) -> Method | _Refused:
        o = self.options
        if item.problem:
            return _Refused("read", "unreadable", item.problem)
        own, reaches = _own_source(item)
        record.ok(
            "read",
            f"{item.entry}; {len(item.inputs)} inputs and {'a' if item.docs else 'no'} description from the source"
            + reaches
            + (f"; first published {item.published} ({_DATED_BY[item.dated_by]})" if item.dated_by else ""),
        )
        touches = side_effects(own)
        if touches:
            return _Refused("side-effects", "side-effects", touches)
        record.ok("side-effects", "none found in what it reaches")
        try:
            anonymous = anonymise(own, item.entry)
        except CannotAnonymise as exc:
            return _Refused("anonymise", "cannot-anonymise", str(exc))
        record.ok("anonymise", f"{item.entry} -> test_func, {len(anonymous.params)} parameters, docstrings dropped")
        engine = engine_for(anonymous.source)
        if engine == "numpy" and not numpy_engine_installed():
            return _Refused("engine", "needs-numpy-engine", NUMPY_INSTALL_HINT)
        record.ok("engine", engine)
        work = _Work(
            method_id=f"{suite}/{method_name(source.prefix, item.index, count)}",
            source=anonymous.source,
            header=anonymous.header,
            params=anonymous.params,
            pool=[],
            provenance={
                "dataset": source.name if source.name != "python" else f"python:{item.key.split('::')[0]}",
                "original_id": item.key,
                "original_name": anonymous.original_name if anonymous.original_name != ENTRY else None,
                "url": source.url,
                "published": item.published,
                "dated_by": item.dated_by,
            },
            docs=_docs_with_names(item.docs, anonymous) if item.docs else None,
            context=item.context,
            hide=anonymous.original_name,
        )
        if not o.validator:
            record.ok("validator", "not asked for (--no-validator)")
        elif _defines(anonymous.source, VALIDATOR):
            record.ok("validator", f"the source has its own {VALIDATOR}")
        else:
            reply = await self.ask(
                record, "validator", validator_messages(anonymous.source, anonymous.params, item.context)
            )
            if isinstance(reply, _Refused):
                return reply
            code, why = read_validator(reply, anonymous.params)
            if code is None:
                return _Refused("validator", "validator-unusable", why)
            work.bare, work.source = anonymous.source, _with_validator(anonymous.source, code, anonymous.params)
            record.ok("validator", f"{len(code.splitlines())} lines")
        reply = await self.ask(record, "inputs", inputs_messages(work.source, o.inputs, item.context))
        if isinstance(reply, _Refused):
            return reply
        arity = source_arity(work.source, ENTRY) or (len(work.params), len(work.params))
        proposed = read_calls(reply, arity)
        given = read_calls("\n".join(call_text(ENTRY, i) for i in item.inputs), arity)
        work.pool = list(dict.fromkeys([*proposed, *given]))
        if not work.pool:
            return _Refused(
                "inputs",
                "no-inputs",
                f"the model's reply holds no call of test_func with {arity[0]}..{arity[1]} literal arguments, and the source gave none",
            )
        record.ok("inputs", f"{len(proposed)} from the model, {len(given)} from the source, {len(work.pool)} distinct")
        modes = {"auto": ("docs", "model"), "docs": ("docs",), "model": ("model",)}[o.gold]
        return await self.finish(record, work, modes)

    # -- variants of one method -----------------------------------------------------------------------------------

    async def variants(self, method: Method, position: int, suite: Sequence[Method], target: str, count: int) -> Record:
        o = self.options
        record = Record(method.id)
        if not method.frozen or not method.tests:
            record.refuse(
                "read", "unreadable", "the method is not frozen or has no tests: run `pau-mcp manifests freeze`"
            )
            return record
        record.ok("read", f"{len(method.examples)} examples, {len(method.tests)} tests")
        rng = self.rng(method.id)
        tried, available = candidates(method, suite, o.changes, rng, o.tries)
        if not tried:
            record.refuse("variant", "no-change", f"no place for a change of kind {', '.join(o.changes)}")
            return record
        cases = [*method.examples, *method.tests]
        inputs = [c.input for c in cases]
        budget = _behaviour_limits(self.limits, await self.run(method.source, inputs))
        same = slow = 0
        last: _Refused | None = None
        for candidate in tried:
            record.ok("variant", f"{candidate.kind}: {candidate.change}")
            pool = await self.behaviour(record, candidate.source, cases, budget)
            if pool is None:
                same += 1
                continue
            if not pool:
                slow += 1
                continue
            name = method_name("v", position, count) + (f"-{len(record.methods) + 1}" if o.per_method > 1 else "")
            original = method.provenance
            work = _Work(
                method_id=f"{target}/{name}",
                source=candidate.source,
                header=method.header,
                params=method.params,
                pool=pool,
                provenance={
                    "dataset": f"variants of {method.suite}", "original_id": original.original_id,
                    "original_name": original.original_name, "license": original.license, "url": original.url,
                    "variant_of": method.id, "variant_change": f"{candidate.kind}: {candidate.change}",
                },
                hide=original.original_name,
            )  # fmt: skip
            made = await self.finish(record, work, ("model",))
            if isinstance(made, _Refused):
                record.fail(made.step, f"[{made.reason}] {made.detail}")
                last = made
                if made.reason == "llm-error":
                    break
                continue
            record.methods.append(made.model_dump(mode="json", exclude_none=True))
            if len(record.methods) >= o.per_method:
                break
        if not record.methods:
            if last is None:
                overran = f"; {slow} more ran out of time on every input" if slow else ""
                record.refuse(
                    "behaviour", "same-behaviour",
                    f"all {same} changes tried ({available} possible, --tries {o.tries}) behave like the original on its {len(inputs)} inputs{overran}",
                )  # fmt: skip
            else:
                record.refuse(last.step, last.reason, last.detail)
        return record

    async def behaviour(self, record: Record, source: str, cases: Sequence[Case], budget: Limits) -> list[str] | None:
        """Run a change on the original's inputs within ``budget``: the inputs it answers in time, or None when it
        behaves like the original on all of them ([] when it answers none in time).

        An input that runs out of the budget (a loop the change no longer ends, work it makes explode) is left out
        of the variant rather than run to the full limit again and again.
        """
        inputs = [c.input for c in cases]
        outcomes = await self.run(source, inputs, limits=budget)
        late = {i for i, got in enumerate(outcomes) if got.status in _OVER_BUDGET}
        differ = sum(
            i not in late and not outcomes_match(c.frozen_outcome().outcome(), got)
            for i, (c, got) in enumerate(zip(cases, outcomes, strict=True))
        )
        overran = f"; {len(late)} ran out of its time budget and are left out" if late else ""
        if len(late) == len(inputs):
            record.fail("behaviour", f"ran out of its time budget on all {len(inputs)} of the original's inputs")
            return []
        if not differ:
            record.fail("behaviour", f"the same on all {len(inputs) - len(late)} of the original's inputs{overran}")
            return None
        record.ok("behaviour", f"differs on {differ} of the original's {len(inputs)} inputs{overran}")
        return [text for i, text in enumerate(inputs) if i not in late]


def _behaviour_limits(limits: Limits, original: Sequence[Outcome]) -> Limits:
    """The limits a change is first run under: ``_BUDGET_FACTOR`` times the fuel of the original's slowest input
    that ended by itself (returned or raised), at least ``_BUDGET_FLOOR_S`` of CPU, at most the run's own limits."""
    spent = [o.fuel for o in original if o.status in (Status.OK, Status.ERROR)]
    if not spent:
        return limits
    budget = max(int(_BUDGET_FLOOR_S * FUEL_PER_SECOND), _BUDGET_FACTOR * max(spent))
    return limits if budget >= limits.fuel_budget else replace(limits, fuel=budget)


async def _drive(
    keys: Sequence[str], work: Callable[[int], Any], state: StateFile, report: CreationReport, progress: Progress,
    label: str, jobs: int,
) -> None:  # fmt: skip
    """Run ``work(i)`` for every key not already decided, ``jobs`` at once, recording each as it is decided."""
    records: dict[str, Record] = {}
    with progress(label, len(keys)) as advance:
        todo = []
        for position, key in enumerate(keys):
            if key in state.done:
                records[key] = state.done[key]
                report.resumed += 1
                advance()
            else:
                todo.append(position)
        limiter = anyio.Semaphore(max(1, jobs))
        stopped: list[Exception] = []  # what ends the run (a fatal model error): raised as itself, once the rest stop

        async def one(position: int, group: anyio.abc.TaskGroup) -> None:
            try:
                async with limiter:  # written before the slot frees: with one job, functions are decided in order
                    record = await work(position)
                    state.record(record)
            except Exception as exc:
                stopped.append(exc)
                group.cancel_scope.cancel()
                return
            records[record.key] = record
            advance()

        async with anyio.create_task_group() as group:
            for position in todo:
                group.start_soon(one, position, group)
        if stopped:
            raise stopped[0]
    report.records = [records[key] for key in keys]


def _write(report: CreationReport, store: ManifestStore, root: Path, info: SuiteInfo, replace: bool) -> None:
    methods = [Method.model_validate(m) for r in report.records for m in r.methods]
    if not methods:
        return
    suite = Suite.create(root, info, replace=replace)
    for method in methods:
        suite.save(method)
    report.path = suite.path


def _account(report: CreationReport, llm: LLMClient) -> None:
    spend = llm.spend
    report.spend = StepCost(
        spend.calls, spend.cached_calls, spend.usage.input_tokens, spend.usage.output_tokens, spend.cost_usd
    )
    report.unpriced = sorted(spend.unpriced)


async def create_suite(
    source: Source,
    *,
    llm: LLMClient,
    sandbox: Sandbox,
    store: ManifestStore,
    suite: str,
    options: CreateOptions,
    state_path: Path,
    replace: bool = False,
    restart: bool = False,
    progress: Progress | None = None,
) -> CreationReport:
    """Turn a source's functions into suite ``suite``, the paper's way, with checked gold.

    Args:
        source: The functions (``sources.load_source``).
        llm: The model client (its cache answers repeated requests; its spend is reported).
        sandbox: An in-process sandbox (tracing is one of its options).
        store: Where suites live; the suite goes under its first ``--manifests`` directory.
        suite: The new suite's name.
        options: How to work (``CreateOptions``).
        state_path: The state file; a run with the same options goes on from it.
        replace: Overwrite an existing suite of that name at the end.
        restart: Forget the state file and begin again.
        progress: A progress bar factory (``cli.common.bar``).

    Raises:
        ImportTargetError: The suite name is invalid, or the suite exists without ``replace``.
        StateError: The state file belongs to a run with other options.
        LLMError: A model request failed in a way every later one would (bad key, unknown model, no server);
            what was decided is in the state file, and the same command goes on from there.
    """
    root = prepare_target(store, suite, replace)
    state = StateFile(
        state_path, {"kind": "create", "source": source.label, "suite": suite, **options.identity()}, restart
    )
    report = CreationReport(source.label, suite, skipped=source.skipped, state_path=state_path)
    creator = _Creator(llm, sandbox, options, state)
    count = max((item.index for item in source.items), default=0) + 1
    keys = [item.key for item in source.items]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{source.label}: two items share a key; every item needs its own")

    async def work(position: int) -> Record:
        return await creator.function(source.items[position], source, suite, count)

    if source.after is not None:
        report.notes.append(_dated_note(source))
    await _drive(keys, work, state, report, progress or no_progress, f"creating {suite}", options.jobs)
    _account(report, llm)
    kept = {r.key for r in report.records if r.kept}
    days = [item.published for item in source.items if item.key in kept and item.published is not None]
    info = SuiteInfo(
        name=suite,
        description=(
            f"Made by `pau-mcp create` from {source.label} with {options.model} ({options.split} split); gold "
            f"descriptions checked by {options.coder_model} at {options.gold_min_match:.0%} of the hidden tests."
        ),
        dataset=source.name,
        url=source.url,
        created=datetime.now(UTC),
        models=list(dict.fromkeys([options.model, options.coder_model])),
        after=source.after,
        first_published=min(days) if days else None,
        public_source=source.url is not None,
    )
    _write(report, store, root, info, replace)
    return report


def _dated_note(source: Source) -> str:
    """What ``--after`` took and left out, and how the days were known."""
    how = ", ".join(
        f"{n} dated by {_DATED_BY[by].split(':')[0]}" + (" (not in git)" if by == "mtime" else "")
        for by, n in sorted(source.dated.items())
    )
    return (
        f"--after {source.after}: {len(source.items)} functions first published after it"
        + (f" ({how})" if how else "")
        + f"; {source.older} left out as first published on or before it"
    )


async def create_variants(
    original: str,
    *,
    llm: LLMClient,
    sandbox: Sandbox,
    store: ManifestStore,
    suite: str,
    options: CreateOptions,
    state_path: Path,
    replace: bool = False,
    restart: bool = False,
    limit: int | None = None,
    progress: Progress | None = None,
) -> CreationReport:
    """Make variants of suite ``original``'s methods: changed behaviour, new checked gold, origin recorded.

    A variant is kept only when it behaves differently from its original on the original's inputs, runs on enough
    of them for examples and tests, validates, and its new gold passes the check. Its provenance names the
    original (``variant_of``) and the change; agents never see either.

    Args:
        original: The suite whose methods are changed.
        limit: Only the first ``limit`` methods.
        (the others as for ``create_suite``)

    Raises:
        ManifestError: There is no suite ``original``.
        (and as ``create_suite``)
    """
    methods = list(store.suite(original).methods.values())
    if original == suite:
        raise ValueError("--suite must name a new suite, not the one the variants come from")
    root = prepare_target(store, suite, replace)
    chosen = methods[:limit] if limit is not None else methods
    label = f"variants of {original}"
    state = StateFile(
        state_path,
        {"kind": "variants", "source": original, "suite": suite, "limit": limit, **options.identity()},
        restart,
    )
    report = CreationReport(label, suite, state_path=state_path)
    creator = _Creator(llm, sandbox, options, state)

    async def work(position: int) -> Record:
        return await creator.variants(chosen[position], position, methods, suite, len(methods))

    await _drive(
        [m.id for m in chosen], work, state, report, progress or no_progress, f"varying {original}", options.jobs
    )
    _account(report, llm)
    origin = store.suite(original).info
    day, _ = suite_day(origin)  # a variant is no newer than the function it was made from
    info = SuiteInfo(
        name=suite,
        description=(
            f"Variants of {original} made by `pau-mcp create --variants-of` ({', '.join(options.changes)}); gold by "
            f"{options.model}, checked by {options.coder_model} at {options.gold_min_match:.0%}."
        ),
        dataset=label,
        created=datetime.now(UTC),
        models=list(dict.fromkeys([options.model, options.coder_model])),
        after=origin.after,
        first_published=day,
        public_source=day is None,
    )
    _write(report, store, root, info, replace)
    return report
