"""The methods a server exposes, and every text an agent may see about them.

Everything agent-facing is built here from the agent view of a manifest
(tool name, header, initial examples) and nothing else, so source, gold
description and test suite cannot reach an agent through a tool, resource or
prompt. The same facts go out as text (the tool description, the resource, the
prompt) and as data (``MethodFacts``, in each method tool's ``_meta``), so a
client reads them without parsing prose.

The initial examples are the ones the deployment serves (``examples``: the
published ones, or ones drawn for the deployment), the same in every text, in
the facts and in the input schema. Every list an agent sees comes in the order
of the tool names, which are keyed, so it says nothing of the method ids.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..contract import FACTS_KEY, KnownExample, MethodFacts
from ..manifests import Case, ManifestError, ManifestStore, Method, call_arguments, call_text, tool_name
from .examples import ServedExamples
from .schemas import nullable, parameter_schemas

__all__ = ["Catalog", "Exposed", "ToolDocs"]

#: How a documented tool says to pass arguments (``{params}``: the parameter names).
_CALLING = (
    "Pass the arguments either as JSON values, one property per parameter ({params}), or as one `args` string holding "
    "a Python literal tuple, for values JSON cannot carry (tuples, sets, bytes, complex numbers, dicts with non-string "
    'keys): e.g. {{"args": "((1, 2), {{3: \'x\'}})"}}. When `args` is a string it is the call (the other properties '
    "are then ignored)."
)


@dataclass(frozen=True)
class ToolDocs:
    """Documentation a deployment serves in place of the header-and-examples text (``pau-mcp serve --docs``).

    Built by the composition root (the command), never by the server, which reads no run and chooses no gold text:
    what is served is exactly these texts.

    Attributes:
        source: Where the texts come from, as the operator named it (``none``, ``gold``, a run, a file).
        texts: Each method's documentation by method id; a method without one is served with none.
    """

    source: str
    texts: Mapping[str, str]


@dataclass(frozen=True)
class Exposed:
    """One method as a server exposes it.

    Attributes:
        method: The method (its hidden parts never leave the server).
        tool: Its opaque tool name in this deployment (``manifests.tool_name``).
        served: The initial examples this deployment serves; None: the published ones.
        documentation: What the deployment documents it with (``ToolDocs``), in place of the initial examples;
            None: the header and the initial examples, as always ("" documents it with nothing but its header).
    """

    method: Method
    tool: str
    served: ServedExamples | None = None
    documentation: str | None = None

    @property
    def cases(self) -> tuple[Case, ...]:
        """The initial examples served, each with its outcome: what every text, the facts and the schema show."""
        return self.served.cases if self.served is not None else tuple(self.method.examples)

    @property
    def origin(self) -> str:
        """Where the served examples come from: ``published`` or ``deployment`` (for the operator)."""
        return self.served.origin if self.served is not None else "published"

    @property
    def documented(self) -> bool:
        """True when the deployment serves documentation instead of the initial examples."""
        return self.documentation is not None

    @property
    def arity(self) -> int:
        """Number of parameters."""
        return len(self.method.params)

    @cached_property
    def examples(self) -> list[KnownExample]:
        """The initial examples as an agent sees them: every text and ``facts`` show these."""
        known = []
        for case in self.cases:
            shown = case.outcome.shown() if case.outcome is not None else "(not frozen)"
            call = call_text(self.method.entry, case.input)
            # The argument tuple as the call shows it: ('abc',) for one argument however the manifest writes it.
            literal = call_arguments(call) or case.input.strip()
            known.append(KnownExample(line=f"{call} -> {shown}", input=literal, output=shown, original=case.original))
        return known

    def example_lines(self) -> list[str]:
        """The initial examples as call lines, e.g. ``test_func(1, 'a') -> 3``."""
        return [example.line for example in self.examples]

    def facts(self, budget: int) -> MethodFacts:
        """What the description says, as data (``budget`` 0: unlimited); a documented tool publishes no examples."""
        method = self.method
        return MethodFacts(
            header=method.header, entry=method.entry, params=list(method.params),
            examples=[] if self.documented else self.examples, budget=budget or None,
        )  # fmt: skip

    def meta(self, budget: int) -> dict[str, Any]:
        """The tool's ``_meta``: its facts under ``FACTS_KEY``, as JSON."""
        return {FACTS_KEY: self.facts(budget).model_dump(mode="json")}

    def description(self, budget: int) -> str:
        """The tool description: header, how to call it, initial examples, budget."""
        params = ", ".join(self.method.params)
        budget_text = (
            f"You may call it {budget} times; each result says how many calls you have left."
            if budget
            else "There is no limit on calls."
        )
        examples = "\n".join(f"  {line}" for line in self.example_lines()) or "  (none)"
        if self.documented:
            return (
                f"A Python function `{self.method.header}` whose code you cannot read. "
                + (
                    f"Its documentation:\n{self.documentation}\n"
                    if self.documentation
                    else "It has no documentation.\n"
                )
                + _CALLING.format(params=params)
                + f"\n{budget_text}"
            )
        return (
            f"A hidden Python function `{self.method.header}`. You cannot read its code; call it to find out what it does.\n"
            f"Pass the arguments either as JSON values, one property per parameter ({params}; typed as the examples "
            "show), or as one `args` string holding a Python literal tuple, for values JSON cannot carry (tuples, sets, "
            'bytes, complex numbers, dicts with non-string keys) or other types: e.g. {"args": "((1, 2), {3: \'x\'})"}. '
            "When `args` is a string it is the call (the other properties are then ignored).\n"
            f"Known examples:\n{examples}\n{budget_text} When you know what it does, call `submit` with its tool name "
            "and your description."
        )

    @cached_property
    def parameter_schemas(self) -> dict[str, dict[str, Any]]:
        """Each parameter's JSON Schema, typed from the initial examples only (``schemas.parameter_schemas``)."""
        return parameter_schemas(self.method.params, [case.input for case in self.cases])

    def input_schema(self) -> dict[str, Any]:
        """One typed property per parameter, or ``args``, a Python literal tuple for any value.

        Nothing is required, so that either form validates; strict-mode clients, which must send every
        property, send ``args: null`` for the JSON form and placeholders for the parameters with ``args``.
        """
        properties: dict[str, Any] = dict(self.parameter_schemas)
        names = ", ".join(self.method.params)
        others = f"the {names} propert{'y is' if self.arity == 1 else 'ies are'} ignored" if names else "it is the call"
        properties["args"] = {
            **nullable({"type": "string"}),
            "description": f"all {self.arity} arguments as a Python literal tuple, e.g. \"(1, 'a')\", for values JSON "
            f"cannot carry or other types than the examples show; when it is a string it is the call and {others}; "
            "null or absent: the properties are the call",
        }
        return {"type": "object", "properties": properties, "additionalProperties": False}

    def resource_text(self, budget: int) -> str:
        """The resource body: what an agent may know before calling."""
        lines = [f"tool: {self.tool}", f"header: {self.method.header}"]
        if self.documented:
            lines += ["documentation:", *(f"  {line}" for line in (self.documentation or "(none)").splitlines())]
        else:
            lines += ["examples:", *(f"  {line}" for line in self.example_lines())]
        lines.append(f"budget: {budget or 'unlimited'} calls per session")
        return "\n".join(lines) + "\n"

    def prompt_text(self, budget: int) -> str:
        """The interactive-mode starting prompt, in this project's words."""
        budget_text = f"at most {budget} calls" if budget else "as many calls as you need"
        known = (
            (self.documentation or "(no documentation)") if self.documented
            else "\n".join(f"  {line}" for line in self.example_lines())
        )  # fmt: skip
        return (
            f"You are investigating a Python function you cannot read: `{self.method.header}`. It is available as the "
            f"tool `{self.tool}`.\n\nWhat is already known:\n"
            + known
            + f"\n\nWork like a scientist: form a hypothesis about what the function does, choose an input that could "
            "prove it wrong, call the tool, and revise. Probe the corners where behaviour often changes: zero, negative "
            "numbers, empty and single-element containers, duplicates, boundaries, unusual types. "
            f"You have {budget_text}.\n\nWhen you are confident, call `submit` with `method` set to `{self.tool}` and a "
            "`description` precise enough that a programmer could re-implement the function from it, covering every "
            "case you found (optionally add `code`, your own Python implementation of the function)."
        )


class Catalog:
    """The methods one server serves, by tool name, listed in the order of their tool names.

    The tool names are keyed (``manifests.tool_name``), so their order is a shuffle of the methods only the
    deployment key can undo: the position of a tool in any list says nothing of its method id. Operator commands
    that want the suites' own order use ``in_suite_order``.

    Args:
        store: Where suites come from.
        suites: Suites to serve.
        methods: Optional subset (the operator's choice): method ids or tool names.
        key: The deployment's secret, which names the tools (``Settings.deployment_key()``).
        docs: Documentation to serve in place of the initial examples (``serve --docs``); None: the examples.
        allow_empty: Serve no method at all when no suite is named (a server of fixtures only).

    Raises:
        ManifestError: an unknown suite or method, or no method at all (unless ``allow_empty`` and no suite).
    """

    def __init__(
        self, store: ManifestStore, suites: Iterable[str], methods: Iterable[str] = (), *, key: str,
        docs: ToolDocs | None = None, allow_empty: bool = False,
    ) -> None:  # fmt: skip
        suites = list(suites)
        exposed = [
            Exposed(m, tool_name(key, m.id), documentation=None if docs is None else docs.texts.get(m.id, ""))
            for m in store.methods(suites)
        ]
        self.docs = docs
        wanted = set(methods)
        if wanted:
            known = {e.tool for e in exposed} | {e.method.id for e in exposed}
            unknown = sorted(wanted - known)
            if unknown:
                raise ManifestError(f"not in the served suites: {', '.join(unknown)}; see `pau-mcp methods`")
            exposed = [e for e in exposed if e.tool in wanted or e.method.id in wanted]
        if not exposed and not (allow_empty and not suites):
            raise ManifestError("no methods to serve; check --suite and --methods")
        unfrozen = [e.method.id for e in exposed if not e.method.frozen]
        if unfrozen:
            raise ManifestError(
                f"{len(unfrozen)} methods have no frozen outcomes (e.g. {unfrozen[0]}); run `pau-mcp manifests freeze` first"
            )
        self._set(exposed)

    def _set(self, exposed: list[Exposed]) -> None:
        self._suite_order = [e.method.id for e in exposed]
        self._by_tool = {e.tool: e for e in sorted(exposed, key=lambda e: e.tool)}
        self._by_id = {e.method.id: e for e in exposed}

    def __len__(self) -> int:
        return len(self._by_tool)

    def __iter__(self) -> Iterator[Exposed]:
        """The methods in the order of their tool names: the order of every list an agent sees."""
        return iter(self._by_tool.values())

    def in_suite_order(self) -> list[Exposed]:
        """The methods in the suites' own order (by method id): for operator output only, never for an agent."""
        return [self._by_id[method_id] for method_id in self._suite_order]

    def with_examples(self, served: Mapping[str, ServedExamples]) -> Catalog:
        """The same methods serving other initial examples: ``served`` by method id (others keep theirs)."""
        catalog = copy.copy(self)
        catalog._set([dataclasses.replace(e, served=served.get(e.method.id, e.served)) for e in self.in_suite_order()])
        return catalog

    def find(self, name_or_id: str) -> Exposed | None:
        """A method by tool name or method id: for the operator's commands only, never for an agent's input."""
        return self._by_tool.get(name_or_id) or self._by_id.get(name_or_id)

    def by_tool(self, name: str) -> Exposed | None:
        """A method by tool name alone: what every agent-facing input goes through, so that a method id is
        answered exactly as any unknown name."""
        return self._by_tool.get(name)
