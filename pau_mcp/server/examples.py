"""The initial examples a deployment serves: the published ones, or ones drawn for this deployment.

Every text an agent sees about a method quotes its initial examples. A public suite's examples are public, so
with them an agent (or a model that read this repository) tells which method a tool is without a single call.
With ``--examples deployment`` a server serves examples of its own instead, drawn for each method with the
deployment key as seed:

1. inputs are drawn to look like the published ones (``inputs``: the same types and shapes, other values; the
   farthest ways first), never taken from the hidden tests, never equal to a published input or a test input;
2. they run in the sandbox (with a short time limit); only inputs that return a value (``ok``) within a quarter
   of that limit count, so a machine's load cannot change which ones count (a method's own input validator
   refuses the rest, as it raises); a method stops drawing after a few inputs hit a limit;
3. as many are kept as the method publishes: showing the argument types the published ones show (so the input
   schema types the same), with distinct outputs where the published ones are distinct, preferring inputs not
   returned unchanged, and otherwise in the order drawn.

The same key and suite give the same examples on every server and after every restart. A method no drawn input
works for keeps its published examples (the operator is told which). The draws are kept in a private cache file
in the data directory (``cache_path``), so only the first start with a key pays for them; that file maps method
ids to examples an agent sees beside tool names, so it is as secret as the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from wasm_runtime import (
    FUEL_PER_SECOND,
    WALL_CLOCK_FACTOR,
    EngineUnavailable,
    InvalidInput,
    Limits,
    Outcome,
    SandboxInterface,
    Status,
    decode,
    parse_arguments,
    values_equal,
)

from ..manifests import Case, FrozenOutcome, Method
from .inputs import WAYS, draw_inputs, literal

__all__ = [
    "DRAW_VERSION",
    "EXAMPLE_SOURCES",
    "ServedExamples",
    "cache_path",
    "deployment_examples",
    "draw_examples",
    "exposure_warning",
    "serving",
]

log = logging.getLogger("pau_mcp.server")

#: Where a server's initial examples come from (``--examples`` / ``PAU_MCP_EXAMPLES``).
EXAMPLE_SOURCES: tuple[str, ...] = ("published", "deployment")

#: The version of the drawing rules: a change here or in ``inputs`` that draws other examples for the same key
#: must raise it, so that cached draws of the old rules are drawn again.
DRAW_VERSION = 1

#: Draws tried per way, farthest first; a method takes the next way only when the earlier ones found too few.
_DRAWS = {"fresh": 48, "shaped": 24, "nearby": 24}
#: Examples are quoted in every description: a drawn input or output longer than this is not used.
_MAX_INPUT_CHARS = 120
_MAX_OUTPUT_CHARS = 160
#: A drawn input runs with at most this much CPU time, as fuel (a good example returns at once), and counts only when
#: it used at most a quarter of that fuel: far from the limit, its outcome is the same on every machine.
_DRAW_TIMEOUT_S = 0.1
#: The clock only backs the fuel up, and far behind it: the clock stops a drawn input after this long whatever its
#: fuel (the sandbox's own factor would give 0.5 s for 0.1 s of fuel). So a stalled process (a long garbage
#: collection, a busy or slow machine) stops no input its fuel would let finish, and every machine draws the same
#: examples for a key. A function that loops still ends on its fuel (about 0.1-0.5 s); only a stall waits longer.
_DRAW_DEADLINE_S = 2.0
_DRAW_OUTPUT_BYTES = 4096
#: Drawn inputs run this many at a time, and a method stops drawing once this many have run out of time or memory (a
#: function that loops on most inputs would otherwise hold the start for every draw's time limit).
_CHUNK = 8
_MAX_STOPPED = 6
_LIMITS = frozenset({Status.TIMEOUT, Status.MEMORY})  # the limits that cost time to hit


@dataclass(frozen=True)
class ServedExamples:
    """The initial examples one method is served with.

    Attributes:
        cases: The examples, each with its outcome as the agent sees it.
        origin: ``published`` (the manifest's own) or ``deployment`` (drawn for this deployment).
        detail: How they were found, for the operator (never shown to an agent).
    """

    cases: tuple[Case, ...]
    origin: Literal["published", "deployment"]
    detail: str = ""

    @classmethod
    def published(cls, method: Method, detail: str = "") -> ServedExamples:
        """The method's own examples."""
        return cls(tuple(method.examples), "published", detail)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready, as the cache keeps it."""
        return {
            "origin": self.origin,
            "detail": self.detail,
            "examples": [case.model_dump(mode="json") for case in self.cases],
        }

    @classmethod
    def from_json(cls, data: Any) -> ServedExamples:
        """The inverse of ``to_json``.

        Raises:
            ValueError: not what ``to_json`` writes.
        """
        if not isinstance(data, dict) or data.get("origin") not in EXAMPLE_SOURCES:
            raise ValueError("not a cached set of examples")
        try:
            cases = tuple(Case.model_validate(case) for case in data.get("examples", []))
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        if any(case.outcome is None for case in cases):
            raise ValueError("a cached example has no outcome")
        return cls(cases, data["origin"], str(data.get("detail", "")))


def _seed(key: str, method_id: str) -> int:
    message = f"pau-mcp deployment examples v{DRAW_VERSION}\0{method_id}".encode()
    return int.from_bytes(hmac.new(key.encode(), message, hashlib.sha256).digest(), "big")


def _canonical(text: str) -> str | None:
    """An input literal written one way (``literal``), to tell equal inputs apart from equal texts; None if it is
    not a literal argument tuple."""
    try:
        return literal(parse_arguments(text))
    except (InvalidInput, ValueError, RecursionError, MemoryError):
        return None


def _returned_unchanged(args: tuple[Any, ...], outcome: Outcome) -> bool:
    if len(args) != 1:
        return False
    try:
        return bool(values_equal(args[0], decode(outcome.encoded)))
    except Exception:  # noqa: BLE001 - a value that cannot be rebuilt is simply not its argument
        return False


def _draw_limits(sandbox: SandboxInterface) -> Limits:
    own = sandbox.limits
    return Limits(
        timeout_s=_DRAW_DEADLINE_S / WALL_CLOCK_FACTOR,
        fuel=min(own.fuel_budget, int(_DRAW_TIMEOUT_S * FUEL_PER_SECOND)),
        memory_bytes=own.memory_bytes,
        max_output_bytes=min(own.max_output_bytes, _DRAW_OUTPUT_BYTES),
    )


#: Outputs that show little of what a function does: an example showing one is used only when no other will do
#: (or when a published example shows one too).
_BLANK = frozenset({"0", "0.0", "''", "[]", "{}", "()", "set()", "None", "False", "b''"})


@dataclass(frozen=True)
class _Found:
    text: str
    outcome: FrozenOutcome
    unchanged: bool
    kinds: frozenset[tuple[int, str]]  # (position, type name) of each argument

    @property
    def blank(self) -> bool:
        return self.outcome.shown() in _BLANK


@dataclass(frozen=True)
class _Wanted:
    """What the published examples show, for the drawn ones to show too."""

    count: int
    distinct: bool  # their outputs differ
    blanks: bool  # one of them shows a blank output
    kinds: frozenset[tuple[int, str]]  # the types each argument takes among them (the input schema's)


def _kinds(args: tuple[Any, ...]) -> frozenset[tuple[int, str]]:
    return frozenset((position, type(value).__name__) for position, value in enumerate(args))


def _choose(found: Sequence[_Found], wanted: _Wanted, distinct: bool) -> list[_Found] | None:
    """``wanted.count`` examples: first those that show an argument type the published ones show and the picked
    ones do not yet (so the input schema types the same), then in the order drawn; outputs distinct when asked;
    inputs returned unchanged, and blank outputs unless the published show one, only when no other will do."""
    ranked = sorted(found, key=lambda f: (f.unchanged, f.blank and not wanted.blanks))  # stable: else as drawn
    picked: list[_Found] = []
    outputs: set[str] = set()
    covered: set[tuple[int, str]] = set()
    while len(picked) < wanted.count:
        best, gain = None, -1
        for item in ranked:
            if item in picked or (distinct and item.outcome.shown() in outputs):
                continue
            adds = len((item.kinds & wanted.kinds) - covered)
            if adds > gain:
                best, gain = item, adds
        if best is None:
            return None
        picked.append(best)
        outputs.add(best.outcome.shown())
        covered |= best.kinds
    return picked


def draw_examples(method: Method, sandbox: SandboxInterface, key: str) -> ServedExamples:
    """Initial examples for ``method`` in the deployment of ``key``, drawn and run in ``sandbox``.

    As many as the method publishes, none of them a published input or a hidden test input; the published ones
    (with the reason in ``detail``) when no drawn input will do or the method has nothing to draw from.
    """
    count = len(method.examples)
    if count == 0:
        return ServedExamples.published(method, "it publishes no examples")
    templates: list[tuple[Any, ...]] = []
    for case in method.examples:
        with contextlib.suppress(InvalidInput, ValueError, RecursionError, MemoryError):
            templates.append(parse_arguments(case.input))
    if not any(templates):  # no arguments at all, or none that reads as a literal
        return ServedExamples.published(method, "its examples give no arguments to draw others like")
    avoid = {text for case in (*method.examples, *method.tests) if (text := _canonical(case.input)) is not None}
    rng = random.Random(_seed(key, method.id))
    limits = _draw_limits(sandbox)
    shown = [case.outcome.shown() for case in method.examples if case.outcome is not None]
    wanted = _Wanted(
        count, len(set(shown)) == count, any(text in _BLANK for text in shown),
        frozenset().union(*(_kinds(args) for args in templates)),
    )  # fmt: skip
    found: list[_Found] = []
    tried = stopped = 0
    for way in WAYS:
        draws: dict[str, tuple[Any, ...]] = {}
        for args in draw_inputs(templates, way, _DRAWS[way], rng):
            try:
                text = literal(args)
                parse_arguments(text)  # what the sandbox and an agent's `args` accept
            except (InvalidInput, ValueError):
                continue
            if len(text) <= _MAX_INPUT_CHARS and text not in avoid:
                avoid.add(text)
                draws[text] = args
        if not draws:
            continue
        pending, first = list(draws.items()), True
        while pending and stopped < _MAX_STOPPED:
            # A few first: a method that runs out of time on them goes on a few at a time, any other all at once.
            size = _CHUNK if first or stopped else len(pending)
            chunk, pending, first = pending[:size], pending[size:], False
            tried += len(chunk)
            try:
                outcomes = sandbox.run(
                    method.source, [text for text, _ in chunk], entry=method.entry, limits=limits, engine=method.engine
                )
            except EngineUnavailable:
                return ServedExamples.published(method, "its sandbox engine is not installed here")
            for (text, args), outcome in zip(chunk, outcomes, strict=True):
                stopped += outcome.status in _LIMITS
                if outcome.status is not Status.OK or outcome.fuel > limits.fuel_budget // 4:
                    continue
                frozen = FrozenOutcome.of(outcome)
                if len(frozen.shown()) <= _MAX_OUTPUT_CHARS:
                    found.append(_Found(text, frozen, _returned_unchanged(args, outcome), _kinds(args)))
        if stopped >= _MAX_STOPPED:
            break
        chosen = _choose(found, wanted, wanted.distinct)
        if chosen is not None:
            return _drawn(chosen, f"drawn {way}: {len(found)} of {tried} drawn inputs returned a value")
    chosen = _choose(found, wanted, wanted.distinct)  # drawing stopped early: what was found may still do
    if chosen is not None:
        return _drawn(chosen, f"drawn: {len(found)} of {tried} drawn inputs returned a value")
    # No way gave distinct outputs: examples whose outputs repeat show less, but published ones give the method away.
    chosen = _choose(found, wanted, False) if wanted.distinct else None
    if chosen is not None:
        return _drawn(chosen, f"drawn, outputs alike: {len(found)} of {tried} drawn inputs returned a value")
    why = f"; drawing stopped after {stopped} hit a limit" if stopped >= _MAX_STOPPED else ""
    return ServedExamples.published(
        method,
        f"kept the published examples: {len(found)} of {tried} drawn inputs returned a value, {count} needed{why}",
    )


def _drawn(chosen: Sequence[_Found], detail: str) -> ServedExamples:
    return ServedExamples(tuple(Case(input=item.text, outcome=item.outcome) for item in chosen), "deployment", detail)


def cache_path(data_dir: Path, key: str) -> Path:
    """The file that keeps a deployment's drawn examples: named by a digest of the key, never the key itself."""
    name = hmac.new(key.encode(), b"pau-mcp deployment examples cache", hashlib.sha256).hexdigest()[:16]
    return data_dir / "examples" / f"{name}.json"


def _digest(method: Method, limits: Limits) -> str:
    """What the draw of a method depends on besides the key: its code, its published and hidden inputs, the rules."""
    facts = [
        DRAW_VERSION, method.id, method.source, method.entry, method.engine, list(method.params),
        [case.input for case in method.examples], [case.input for case in method.tests],
        [limits.timeout_s, limits.memory_bytes, limits.max_output_bytes],
    ]  # fmt: skip
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("the deployment examples cache %s cannot be read (%s); drawing them again", path, exc)
        return {}
    methods = data.get("methods") if isinstance(data, dict) and data.get("version") == DRAW_VERSION else None
    return methods if isinstance(methods, dict) else {}


def _write_cache(path: Path, entries: dict[str, Any]) -> None:
    """Write the cache in one step (a temporary file renamed into place), readable by its owner only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump({"version": DRAW_VERSION, "methods": entries}, handle, sort_keys=True)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def deployment_examples(
    methods: Iterable[Method], sandbox: SandboxInterface, key: str, cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, ServedExamples]:  # fmt: skip
    """The examples a deployment serves for each method, by method id: drawn (``draw_examples``), or cached.

    Args:
        methods: The methods served.
        sandbox: Runs the drawn inputs.
        key: The deployment's secret (``Settings.deployment_key()``).
        cache: The cache file (``cache_path``); None draws every time. A cache that cannot be read is drawn
            again; one that cannot be written is reported and the examples are served all the same.
        progress: Receives a line before drawing and one on what was drawn.
    """
    methods = list(methods)
    stored = _read_cache(cache) if cache is not None else {}
    served: dict[str, ServedExamples] = {}
    todo: list[Method] = []
    digests = {method.id: _digest(method, _draw_limits(sandbox)) for method in methods}
    for method in methods:
        entry = stored.get(method.id)
        if isinstance(entry, dict) and entry.get("digest") == digests[method.id]:
            with contextlib.suppress(ValueError):
                served[method.id] = ServedExamples.from_json(entry)
                continue
        todo.append(method)
    if todo:
        if progress is not None:
            progress(f"drawing the initial examples of {len(todo)} methods for this deployment (--examples deployment)")
        with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
            for method, drawn in zip(todo, pool.map(lambda m: draw_examples(m, sandbox, key), todo), strict=True):
                served[method.id] = drawn
        if cache is not None:
            for method in todo:
                stored[method.id] = {"digest": digests[method.id], **served[method.id].to_json()}
            try:
                _write_cache(cache, stored)
            except OSError as exc:
                log.warning(
                    "the deployment examples cannot be kept in %s (%s); they are drawn again next start", cache, exc
                )
    kept = sorted(m.id for m in methods if served[m.id].origin == "published" and m.examples)
    if kept:
        log.warning(
            "%d methods keep their published examples, which identify them: %s", len(kept),
            "; ".join(f"{i} ({served[i].detail})" for i in kept[:10]) + ("; ..." if len(kept) > 10 else ""),
        )  # fmt: skip
    if progress is not None and todo:
        progress(
            f"{len(methods) - len(kept)} of {len(methods)} methods serve examples drawn for this deployment"
            + (
                f"; {len(kept)} keep their published ones, which identify them: {', '.join(kept[:5])}"
                + (" and more (pau-mcp methods --examples deployment --json lists them)" if len(kept) > 5 else "")
                if kept
                else ""
            )
        )
    return served


def serving(methods: Iterable[Method], served: Mapping[str, ServedExamples]) -> list[Method]:
    """The methods as an agent of the deployment meets them: each one's examples replaced by its served ones, for
    code that reads ``method.examples`` (the RL environment, its critic and code writer)."""
    return [m.model_copy(update={"examples": list(served[m.id].cases)}) if m.id in served else m for m in methods]


def exposure_warning(examples: str, host: str, public_suites: Sequence[str]) -> str | None:
    """What to tell an operator who serves a public suite's published examples beyond this machine; None if nothing.

    Args:
        examples: ``published`` or ``deployment`` (``--examples``).
        host: The address served (a loopback address reaches only this machine's own clients).
        public_suites: The served suites that are public (they ship with pau-mcp, gold descriptions included).
    """
    from ..listening import is_loopback

    if examples != "published" or not public_suites or is_loopback(host):
        return None
    return (
        f"serving the published examples of the public suite(s) {', '.join(public_suites)} on {host}: with them, "
        "anyone who has read this repository tells which method each tool is; --examples deployment serves examples "
        "drawn for this deployment, and a private suite (pau-mcp create) hides the methods themselves (docs/server.md, "
        "Threat model)"
    )
