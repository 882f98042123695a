"""Changes that make a new method out of an existing one: the candidates ``pau-mcp create --variants-of`` tries.

Six kinds, each a rewrite of the hidden source with ``ast`` (nothing runs here):

- ``constant``: one integer or float constant moves by one (``3`` -> ``4``, ``0.5`` -> ``1.5``);
- ``comparison``: one comparison loosens or tightens or flips (``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``);
- ``arithmetic``: one operator changes (``+`` <-> ``-``, ``*`` -> ``+``, ``/`` and ``//`` -> ``*``, ``%`` -> ``//``);
- ``argument-order``: two positional parameters trade places;
- ``edge-case``: a new first rule: above the median value (or length) of one argument among the original's inputs,
  the function returns one of its other outputs;
- ``composition``: another one-argument method of the suite applied to this one's result.

Only code the method reaches is changed (``importers.slicing``): the source is first cut to ``test_func`` and the
module-level code it reaches, so no try is spent on a sibling that never runs. The input validator is never
changed: a variant keeps its original's domain. Whether a change alters behaviour is decided by running it
(``pipeline``), not here.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wasm_runtime import decode, parse_python, values_equal

from ..manifests import FrozenOutcome, Method
from ..manifests.importers import ENTRY, CannotAnonymise, anonymise, slice_function
from .messages import VALIDATOR

__all__ = ["KINDS", "Candidate", "candidates"]

#: Every kind of change, in the order the docs list them.
KINDS: tuple[str, ...] = ("constant", "comparison", "arithmetic", "argument-order", "edge-case", "composition")

_COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
}  # fmt: skip
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv,
}  # fmt: skip
_SYMBOLS = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Add: "+", ast.Sub: "-",
    ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
}  # fmt: skip
_MAX_SHOWN = 60


@dataclass(frozen=True)
class Candidate:
    """One change to try: its kind, what it does in words (operator-only), and the changed source."""

    kind: str
    change: str
    source: str


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _changeable(tree: ast.Module) -> list[ast.AST]:
    """The nodes inside the module's functions other than the validator, in a fixed order."""
    nodes: list[ast.AST] = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) and top.name != VALIDATOR:
            nodes.extend(ast.walk(top))
    return nodes


def _sites(source: str, pick: Callable[[ast.AST], bool]) -> int:
    return sum(1 for node in _changeable(parse_python(source)) if pick(node))


def _rewrite(
    source: str, pick: Callable[[ast.AST], bool], index: int, change: Callable[[ast.AST], str]
) -> tuple[str, str]:
    """The source with the ``index``-th node ``pick`` selects changed by ``change`` (which says what it did)."""
    tree = parse_python(source)
    node = [n for n in _changeable(tree) if pick(n)][index]
    said = change(node)
    return ast.unparse(tree) + "\n", f"{said} (line {getattr(node, 'lineno', '?')})"


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _bump(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant)
    old = node.value
    assert isinstance(old, int | float) and not isinstance(old, bool)
    node.value = old + 1
    return f"constant {old!r} -> {node.value!r}"


def _is_comparison(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARISONS


def _flip(node: ast.AST) -> str:
    assert isinstance(node, ast.Compare)
    old = type(node.ops[0])
    node.ops[0] = _COMPARISONS[old]()
    return f"comparison {_SYMBOLS[old]} -> {_SYMBOLS[_COMPARISONS[old]]}"


def _is_arithmetic(node: ast.AST) -> bool:
    return isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC


def _swap_operator(node: ast.AST) -> str:
    assert isinstance(node, (ast.BinOp, ast.AugAssign))
    old = type(node.op)
    node.op = _ARITHMETIC[old]()
    return f"arithmetic {_SYMBOLS[old]} -> {_SYMBOLS[_ARITHMETIC[old]]}"


def _site_candidates(
    source: str, kind: str, pick: Callable[[ast.AST], bool], change: Callable[[ast.AST], str]
) -> list[Candidate]:
    out = []
    for index in range(_sites(source, pick)):
        changed, said = _rewrite(source, pick, index, change)
        if changed != source:
            out.append(Candidate(kind, said, changed))
    return out


def _entry(tree: ast.Module) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == ENTRY), None)


def _argument_orders(method: Method) -> list[Candidate]:
    tree = parse_python(method.source)
    function = _entry(tree)
    if function is None or function.args.posonlyargs:
        return []
    free = len(function.args.args) - len(function.args.defaults)  # parameters without a default
    out = []
    for i in range(free):
        for j in range(i + 1, free):
            swapped = parse_python(method.source)
            entry = _entry(swapped)
            assert entry is not None
            entry.args.args[i].arg, entry.args.args[j].arg = entry.args.args[j].arg, entry.args.args[i].arg
            try:
                renamed = anonymise(ast.unparse(swapped) + "\n", ENTRY)
            except CannotAnonymise:
                continue
            out.append(Candidate("argument-order", f"argument order: arg{i} and arg{j} trade places", renamed.source))
    return out


def _itself(value: Any) -> Any:
    return value


def _length(value: Any) -> int:
    return len(value)


def _literal(text: str) -> object:
    return ast.literal_eval(parse_python(text, mode="eval").body)


def _edge_cases(method: Method, rng: random.Random) -> list[Candidate]:
    """A first rule on one argument: above its median among the original's inputs, return another output."""
    cases = [
        (c.input, c.outcome)
        for c in (*method.examples, *method.tests)
        if c.outcome is not None and c.outcome.status == "ok"
    ]
    rows: list[tuple[tuple[object, ...], FrozenOutcome]] = []
    for text, outcome in cases:
        try:
            value = _literal(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        rows.append((value if isinstance(value, tuple) else (value,), outcome))
    fixed = [p for p in method.params if not p.startswith("*")]
    out = []
    for position, name in enumerate(fixed):
        values = [row[0][position] for row in rows if len(row[0]) > position]
        if len(values) != len(rows) or len(rows) < 2:
            continue
        measure: Callable[[Any], Any]
        if all(type(v) in (int, float) for v in values):
            measure, test = _itself, name
        elif all(isinstance(v, (str, list, tuple, dict, set, frozenset, bytes)) for v in values):
            measure, test = _length, f"len({name})"
        else:
            continue
        measured = sorted({measure(v) for v in values})
        if len(measured) < 2:
            continue
        threshold = measured[(len(measured) - 1) // 2]
        above = [o for (args, o) in rows if measure(args[position]) > threshold]
        below = [o for (args, o) in rows if measure(args[position]) <= threshold]
        choices = [o for o in below if o.value is not None and any(o.value != a.value for a in above)]
        if not choices:
            continue
        chosen = rng.choice(choices)
        try:
            if not values_equal(_literal(str(chosen.value)), decode(chosen.encoded)):
                continue  # its repr does not read back as the same value: it cannot be written as a literal
        except Exception:  # noqa: BLE001 - any value whose repr is not a literal
            continue
        tree = parse_python(method.source)
        function = _entry(tree)
        if function is None:
            continue
        rule = parse_python(f"if {test} > {threshold!r}:\n    return {chosen.value}\n").body
        first = function.body[0] if function.body else None
        validated = (
            isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)
            and isinstance(first.value.func, ast.Name) and first.value.func.id == VALIDATOR
        )  # fmt: skip
        function.body[1 if validated else 0 : 1 if validated else 0] = rule
        said = f"edge case: returns {_clip(str(chosen.value))} when {test} > {threshold!r}"
        out.append(Candidate("edge-case", said, ast.unparse(tree) + "\n"))
    return out


class _Suffix(ast.NodeTransformer):
    """Renames the module-level names of a source (and every use of them) by adding a suffix."""

    def __init__(self, names: set[str], suffix: str) -> None:
        self.names, self.suffix = names, suffix

    def _new(self, name: str) -> str:
        return name + self.suffix if name in self.names else name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._new(node.arg)
        self.generic_visit(node)
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self._new(n) for n in node.names]
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.Nonlocal:
        node.names = [self._new(n) for n in node.names]
        return node


def _suffixed(source: str, suffix: str) -> list[ast.stmt]:
    tree = parse_python(source)
    names: set[str] = set()
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(top.name)
        elif isinstance(top, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = top.targets if isinstance(top, ast.Assign) else [top.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    _Suffix(names, suffix).visit(tree)
    for top in tree.body:  # definitions at module level follow their new names (methods of classes do not)
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and top.name in names:
            top.name += suffix
    return tree.body


def _reached(method: Method) -> Method:
    """The method with only the code its entry reaches: a change anywhere else could never alter what it does."""
    try:
        cut = slice_function(method.source, method.entry)
    except CannotAnonymise:
        return method
    return method if cut.source == method.source else method.model_copy(update={"source": cut.source})


def _compositions(method: Method, partners: Sequence[Method], rng: random.Random) -> list[Candidate]:
    fixed = [p for p in method.params if not p.startswith("*")]
    if len(fixed) != len(method.params):
        return []
    out = []
    for partner in rng.sample(list(partners), min(2, len(partners))):
        body = [*_suffixed(method.source, "_a"), *_suffixed(_reached(partner).source, "_b")]
        arguments = ", ".join(fixed)
        body.extend(parse_python(f"def {ENTRY}({arguments}):\n    return {ENTRY}_b({ENTRY}_a({arguments}))\n").body)
        source = ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"
        out.append(Candidate("composition", f"composition: {partner.id} applied to the result", source))
    return out


def candidates(
    method: Method, suite: Sequence[Method], kinds: Sequence[str], rng: random.Random, tries: int
) -> tuple[list[Candidate], int]:
    """The changes to try on ``method``, the kinds taking turns (kinds and sites in ``rng``'s order), at most ``tries``.

    Args:
        method: The original, frozen (its inputs and outcomes guide the edge cases).
        suite: The methods a composition may take its second function from (one-argument ones, not ``method``).
        kinds: The kinds allowed (``KINDS``).
        rng: The run's generator for this method.
        tries: The most candidates returned.

    Returns:
        The candidates, and how many there were before the cut.
    """
    try:
        parse_python(method.source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], 0
    method = _reached(method)
    made: dict[str, list[Candidate]] = {}
    for kind in kinds:
        if kind == "constant":
            found = _site_candidates(method.source, kind, _is_number, _bump)
        elif kind == "comparison":
            found = _site_candidates(method.source, kind, _is_comparison, _flip)
        elif kind == "arithmetic":
            found = _site_candidates(method.source, kind, _is_arithmetic, _swap_operator)
        elif kind == "argument-order":
            found = _argument_orders(method)
        elif kind == "edge-case":
            found = _edge_cases(method, rng)
        elif kind == "composition":
            partners = [
                m
                for m in suite
                if m.id != method.id and len(m.params) == 1 and not m.params[0].startswith("*") and m.frozen
            ]
            found = _compositions(method, partners, rng)
        else:
            raise ValueError(f"unknown kind of change {kind!r}; choose among {', '.join(KINDS)}")
        rng.shuffle(found)
        made[kind] = found
    order = [k for k in kinds if made.get(k)]
    rng.shuffle(order)
    queue: list[Candidate] = []
    while any(made[k] for k in order):
        for kind in order:
            if made[kind]:
                queue.append(made[kind].pop(0))
    return queue[:tries], len(queue)
