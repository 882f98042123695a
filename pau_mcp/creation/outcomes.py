"""What a creation run decides about each function: kept, or refused for one reason of a closed set, step by step.

Every function (every method, for ``--variants-of``) gets a ``Record``: the outcome of each step it went through
(``StepOutcome``), the methods it gave, or the one reason it was refused (a key of ``REASONS``) with the particulars.
Records are what the state file keeps (``state``), so they are plain JSON both ways. ``CreationReport`` gathers them
for the command's output, with what the model requests cost.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..userfiles import printable

__all__ = ["REASONS", "STEPS", "CreationReport", "Record", "StepCost", "StepOutcome"]

#: Every step a function can go through, in order (``variant`` and ``behaviour`` only for ``--variants-of``).
STEPS: tuple[str, ...] = (
    "read",
    "side-effects",
    "anonymise",
    "engine",
    "variant",
    "behaviour",
    "validator",
    "inputs",
    "run",
    "select",
    "validate",
    "gold",
    "gold-check",
)

#: The closed set of reasons a function is refused, each with what it means (docs/creation.md lists the same).
REASONS: dict[str, str] = {
    "unreadable": "the item holds no function the pipeline can read (no source, or it does not parse)",
    "side-effects": "it uses files, processes or the network (a module such as os or subprocess, or open())",
    "cannot-anonymise": "its function cannot be renamed test_func(arg0, ...) (async, or a name the renaming needs is taken)",
    "needs-numpy-engine": "it imports numpy, pandas or scipy and the sandbox's numpy engine is not installed",
    "validator-unusable": "the model's input validator is missing, malformed, or refuses every input the function handles",
    "no-inputs": "the model proposed no call with literal arguments that fit the header, and the source gave none",
    "no-working-inputs": "every input raised, hit a limit or was not a valid literal",
    "too-few-inputs": "too few working inputs with distinct outputs for the examples and --min-tests hidden tests",
    "invalid": "the frozen method fails validation (outcomes that do not reproduce, a name that leaks, ...)",
    "no-gold": "no gold description: none in the source (or --gold docs) and the model wrote none",
    "gold-check-failed": "code written from every gold description tried matched fewer hidden tests than --gold-min-match",
    "llm-error": "the model refused a request about this function (a refusal that does not stop the whole run)",
    "same-behaviour": "every change tried behaves exactly like the original on the original's inputs",
    "no-change": "the method has no place for the kinds of change asked for (or no partner to compose with)",
}


@dataclass(frozen=True)
class StepOutcome:
    """One step of one function: ``ok`` (with what it found), ``failed`` (a try that was not good enough; the next is
    tried) or ``refused`` (with the reason's key and particulars: the function goes no further)."""

    step: str
    status: str
    detail: str = ""
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out: dict[str, Any] = {"step": self.step, "status": self.status, "detail": self.detail}
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepOutcome:
        """The inverse of ``to_dict``."""
        return cls(str(data["step"]), str(data["status"]), str(data.get("detail", "")), data.get("reason"))


@dataclass
class StepCost:
    """Model requests one step made: how many, how many the cache answered, tokens and dollars."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: StepCost) -> None:
        """Add another step's numbers to these."""
        self.calls += other.calls
        self.cached += other.cached
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepCost:
        """The inverse of ``to_dict``."""
        return cls(
            **{k: data[k] for k in ("calls", "cached", "input_tokens", "output_tokens", "cost_usd") if k in data}
        )


@dataclass
class Record:
    """Everything decided about one function (or one original method, for variants).

    Attributes:
        key: The item's id in its dataset (``HumanEval/17``, ``shop.py::bulk_discount``, ``builtin/b001``).
        steps: Each step's outcome, in order (a variant run repeats steps for each change it tries).
        methods: The methods kept, as manifest JSON (``Method.model_dump(mode="json")``).
        reason: The refusal's key in ``REASONS`` when nothing was kept, else None.
        detail: The refusal's particulars.
        costs: Model requests per step.
    """

    key: str
    steps: list[StepOutcome] = field(default_factory=list)
    methods: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    detail: str = ""
    costs: dict[str, StepCost] = field(default_factory=dict)

    @property
    def kept(self) -> bool:
        """True when at least one method was kept."""
        return bool(self.methods)

    def ok(self, step: str, detail: str = "") -> None:
        """Record a step that passed."""
        self.steps.append(StepOutcome(step, "ok", detail))

    def fail(self, step: str, detail: str) -> None:
        """Record a try that was not good enough, after which the next one is tried (another gold, another change)."""
        self.steps.append(StepOutcome(step, "failed", detail))

    def refuse(self, step: str, reason: str, detail: str) -> None:
        """Record the step that refused the function, and the refusal."""
        if reason not in REASONS:
            raise ValueError(f"unknown refusal reason {reason!r}")
        self.steps.append(StepOutcome(step, "refused", detail, reason))
        self.reason, self.detail = reason, detail

    def cost(self, step: str) -> StepCost:
        """The cost counter of a step (made on first use)."""
        return self.costs.setdefault(step, StepCost())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (one line of the state file)."""
        return {
            "key": self.key,
            "outcome": "kept" if self.kept else "refused",
            "reason": self.reason,
            "detail": self.detail,
            "steps": [s.to_dict() for s in self.steps],
            "methods": self.methods,
            "costs": {step: c.to_dict() for step, c in self.costs.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """The inverse of ``to_dict``."""
        return cls(
            key=str(data["key"]),
            steps=[StepOutcome.from_dict(s) for s in data.get("steps", [])],
            methods=list(data.get("methods", [])),
            reason=data.get("reason"),
            detail=str(data.get("detail", "")),
            costs={step: StepCost.from_dict(c) for step, c in (data.get("costs") or {}).items()},
        )


@dataclass
class CreationReport:
    """What a creation run did: the suite written, each function's record, and the spend.

    Attributes:
        source: What was read (``cruxeval (cruxeval.parquet)``, ``variants of builtin``).
        suite: The suite's name.
        path: Where it was written; None when nothing was kept.
        records: One per function, in the source's order.
        resumed: Records taken from the state file of an earlier, interrupted run.
        skipped: Items of the source that hold no function at all (prose answers in Code Alpaca), not records.
        notes: Other things worth saying.
        spend: Model requests made by this run (the earlier runs' are in the records' costs).
        state_path: The state file.
    """

    source: str
    suite: str
    path: Path | None = None
    records: list[Record] = field(default_factory=list)
    resumed: int = 0
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    spend: StepCost = field(default_factory=StepCost)
    unpriced: list[str] = field(default_factory=list)
    state_path: Path | None = None

    @property
    def wrote(self) -> bool:
        """True when a suite was written."""
        return self.path is not None

    @property
    def kept(self) -> list[str]:
        """Ids of the methods kept."""
        return [str(m["id"]) for r in self.records for m in r.methods]

    def refusals(self) -> Counter[str]:
        """Refused functions counted by reason."""
        return Counter(r.reason for r in self.records if not r.kept and r.reason)

    def step_costs(self) -> dict[str, StepCost]:
        """Model requests per step over every record (this run's and the resumed ones')."""
        total: dict[str, StepCost] = {}
        for record in self.records:
            for step, cost in record.costs.items():
                total.setdefault(step, StepCost()).add(cost)
        return {step: total[step] for step in STEPS if step in total}

    def lines(self) -> list[str]:
        """The report as text lines: the count, every refusal with its reason, the costs."""
        kept = self.kept
        out = []
        functions = len(self.records)
        if self.wrote:
            out.append(
                f"kept {len(kept)} methods from {functions} functions of {self.source} in suite {self.suite} ({self.path})"
            )
        else:
            out.append(f"kept nothing from {functions} functions of {self.source}; suite {self.suite} was not written")
        if self.resumed:
            out.append(f"resumed: {self.resumed} functions were done by an earlier run (state {self.state_path})")
        if self.skipped:
            out.append(f"skipped {self.skipped} items that hold no function")
        refused = [r for r in self.records if not r.kept]
        if refused:
            counts = ", ".join(f"{reason} {n}" for reason, n in self.refusals().most_common())
            out.append(f"refused {len(refused)} ({counts}):")
            out.extend(f"  {r.key}: [{r.reason}] {r.detail}" for r in refused)
        costs = self.step_costs()
        if costs:
            out.append("model requests by step (all runs): " + "; ".join(
                f"{step} {c.calls} ({c.cached} cached, {c.input_tokens}+{c.output_tokens} tokens, ${c.cost_usd:.4f})"
                for step, c in costs.items()
            ))  # fmt: skip
        s = self.spend
        out.append(
            f"this run: {s.calls} model requests ({s.cached} from the cache), {s.input_tokens} input and "
            f"{s.output_tokens} output tokens, ${s.cost_usd:.4f}"
            + (f" (no price for {', '.join(self.unpriced)}: not counted)" if self.unpriced else "")
        )
        out.extend(self.notes)
        return [printable(line) for line in out]  # keys carry file names, which may hold terminal escapes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every record with its steps, refusals by reason, costs."""
        return {
            "source": self.source,
            "suite": self.suite,
            "path": str(self.path) if self.path else None,
            "kept": self.kept,
            "functions": len(self.records),
            "resumed": self.resumed,
            "skipped": self.skipped,
            "refused_by_reason": dict(self.refusals().most_common()),
            "records": [{**r.to_dict(), "methods": [m["id"] for m in r.methods]} for r in self.records],
            "costs_by_step": {step: c.to_dict() for step, c in self.step_costs().items()},
            "spend": self.spend.to_dict(),
            "unpriced": self.unpriced,
            "state": str(self.state_path) if self.state_path else None,
            "notes": self.notes,
        }
