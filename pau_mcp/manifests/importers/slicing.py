"""A function's own source: the function and the module-level code it reaches, found with ``ast``.

A file of functions is not one method: each public function becomes its own, and its hidden source holds what that
function needs to run (the helpers it calls, the constants and imports it reads, and what they read in turn) and
nothing else. A sibling it never reaches would ride along under its real name, an import only a sibling uses would
make the side-effect check refuse it, and a change tried for a variant could land in code that never runs.

From the entry function, a module-level statement is reached when:

- it binds a name reached code reads: a ``def``, a ``class``, an assignment, an import, or a compound statement
  binding it (``try: import x`` / ``except ImportError: ...``); then every name it reads is reached too;
- it may change a reached name while the module loads: it assigns into it or calls a method of it
  (``TABLE["x"] = 1``, ``RULES.append(f)``), or calls (a decorator included) a function of the module whose code
  mentions it (``setup()``, ``@register``);
- it is a function declaring ``global NAME`` of a reached name (calling it assigns that name);
- it is a ``from __future__`` import (it changes how the rest compiles), or a star import when reached code reads a
  name the module never binds.

Which names a function reads as module-level names is what Python's own symbol table says (``symtable``: a local
that shadows one does not count). Reached code that reads ``globals``, ``vars``, ``eval`` or ``exec`` may reach any
name: the whole module is kept. ``if __name__ == "__main__":`` blocks never run when the module is loaded and are
left out. Where in doubt, more is kept: a little too much is safe, too little would break the function. Nothing
here executes the source.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import symtable
from collections import defaultdict
from dataclasses import dataclass

from wasm_runtime import parse_python

from .anonymise import CannotAnonymise

__all__ = ["Slice", "slice_function"]

#: Builtins through which code reaches names it does not spell out.
_DYNAMIC = frozenset({"globals", "vars", "eval", "exec"})
_BUILTINS = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Slice:
    """What ``slice_function`` kept of a module.

    Attributes:
        source: The entry and the module-level code it reaches, in file order (the module's own text when every
            statement is kept).
        kept: Module-level names kept beside the entry, in file order.
        left_out: Module-level names left out, in file order.
        whole: Reached code reads ``globals``, ``vars``, ``eval`` or ``exec``, so the whole module was kept.
    """

    source: str
    kept: tuple[str, ...]
    left_out: tuple[str, ...]
    whole: bool = False


def _scope_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``node`` that run in its own scope: nested functions, classes, lambdas and comprehensions are
    given themselves but not their insides."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        found.append(child)
        if not isinstance(child, (*_SCOPES, *_COMPREHENSIONS)):
            stack.extend(ast.iter_child_nodes(child))
    return found


def _declared_global(definition: ast.AST) -> set[str]:
    return {name for node in ast.walk(definition) if isinstance(node, ast.Global) for name in node.names}


def _binds(statement: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name} | _declared_global(statement)
    names: set[str] = set()
    for node in [statement, *_scope_nodes(statement)]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            names |= _declared_global(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_future(node):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _mentions(statement: ast.stmt) -> set[str]:
    """Every name a statement mentions, its functions' bodies included (generously: a local counts too)."""
    names: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _reads(source: str, body: list[ast.stmt]) -> list[set[str]]:
    """The module-level names each top-level statement reads: those its own code names, and those its functions,
    classes, lambdas and comprehensions refer to as globals (Python's own symbol table says which). Without a
    symbol table (source the compiler refuses though it parses), every name a statement mentions."""
    try:
        table = symtable.symtable(source, "<slice>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [_mentions(statement) for statement in body]
    starts = [min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))]) for s in body]
    reads = [{n.id for n in _load_time(statement) if isinstance(n, ast.Name)} for statement in body]
    stack = list(table.get_children())
    while stack:
        scope = stack.pop()
        stack.extend(scope.get_children())
        position = bisect.bisect_right(starts, scope.get_lineno()) - 1
        if position >= 0:
            reads[position].update(
                symbol.get_name() for symbol in scope.get_symbols() if symbol.is_global() or symbol.is_declared_global()
            )
    return reads


def _load_time(statement: ast.stmt) -> list[ast.AST]:
    """The nodes of a top-level statement that run while the module loads: not the bodies of its functions and
    lambdas (their decorators, defaults and annotations do run), but a class's body."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node)  # itself (its decorators are called), not its body
            arguments = node.args
            stack.extend(node.decorator_list)
            stack.extend(d for d in (*arguments.defaults, *arguments.kw_defaults) if d is not None)
            every = (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
            stack.extend(a.annotation for a in every if a is not None and a.annotation is not None)
            if node.returns is not None:
                stack.append(node.returns)
        elif isinstance(node, ast.Lambda):
            stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
        else:
            found.append(node)
            stack.extend(ast.iter_child_nodes(node))
    return found


def _base(node: ast.expr) -> str | None:
    """The name at the root of ``a.b[c].d``, if any."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _load_effects(statement: ast.stmt) -> tuple[set[str], set[str]]:
    """What a top-level statement does to names while the module loads: the names it assigns into or calls a
    method of, and the names it calls (decorators included)."""
    changed: set[str] = set()
    called: set[str] = set()
    for node in _load_time(statement):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            name = _base(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = _base(node.func)
        else:
            name = None
        if name is not None:
            changed.add(name)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            called.update(n for d in node.decorator_list if (n := _base(d.func if isinstance(d, ast.Call) else d)))
    return changed, called


def _is_main_guard(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return False
    test = statement.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    named = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return named and main


def _is_future(statement: ast.AST) -> bool:
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"


def _is_star(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and any(a.name == "*" for a in statement.names)


def slice_function(source: str, entry: str) -> Slice:
    """The top-level function ``entry`` of ``source`` and only the module-level code it reaches.

    Args:
        source: A module defining ``entry`` at its top level.
        entry: The function's name.

    Returns:
        The slice: its source, and which module-level names were kept and left out.

    Raises:
        CannotAnonymise: The source does not parse, or defines no top-level function ``entry``.
    """
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CannotAnonymise(f"the source does not parse: {getattr(exc, 'msg', None) or exc}") from None
    body = tree.body
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry for n in body):
        raise CannotAnonymise(f"the source defines no top-level function {entry!r}")
    graph = _Graph(source, body)
    kept, reached = graph.reach(entry)
    whole = bool(reached & _DYNAMIC)
    if any(name not in graph.binders and name not in _BUILTINS for name in reached):
        for index, statement in enumerate(body):  # a name from nowhere else may come from a star import
            kept[index] = kept[index] or _is_star(statement)
    if whole:
        kept = [not g for g in graph.guard]
    names_in = [n for n in _ordered(graph.binds, kept, True) if n != entry]
    names_out = [n for n in _ordered(graph.binds, kept, False) if n != entry and n not in names_in]
    if all(kept):
        text = source
    else:
        text = ast.unparse(ast.Module(body=[s for s, k in zip(body, kept, strict=True) if k], type_ignores=[])) + "\n"
    return Slice(source=text, kept=tuple(names_in), left_out=tuple(names_out), whole=whole)


class _Graph:
    """Who binds, reads, changes and calls which module-level names, statement by statement."""

    def __init__(self, source: str, body: list[ast.stmt]) -> None:
        self.body = body
        self.binds = [_binds(statement) for statement in body]
        self.reads = _reads(source, body)
        self.guard = [_is_main_guard(statement) for statement in body]
        self.binders: defaultdict[str, list[int]] = defaultdict(list)
        self.changers: defaultdict[str, list[int]] = defaultdict(list)  # assign into a name, or call its methods
        self.callers: defaultdict[str, list[int]] = defaultdict(list)  # call a name while the module loads
        self.mentioners: defaultdict[str, list[str]] = defaultdict(list)  # names whose code mentions a name
        for index, statement in enumerate(body):
            if self.guard[index] or _is_star(statement):
                continue
            for name in self.binds[index]:
                self.binders[name].append(index)
                for read in self.reads[index]:
                    self.mentioners[read].append(name)
            changed, called = _load_effects(statement)
            for name in changed:
                self.changers[name].append(index)
            for name in called:
                self.callers[name].append(index)

    def reach(self, entry: str) -> tuple[list[bool], set[str]]:
        """The statements kept for ``entry`` and the names reached: each statement and name is visited once."""
        kept = [_is_future(statement) for statement in self.body]
        reached: set[str] = set()
        touching: set[str] = set()  # names whose code may change a reached name when called
        queue = [entry]

        def keep(index: int) -> None:
            if not kept[index]:
                kept[index] = True
                queue.extend(self.reads[index] - reached)

        while queue:
            name = queue.pop()
            if name in reached:
                continue
            reached.add(name)
            for index in (*self.binders.get(name, ()), *self.changers.get(name, ())):
                keep(index)
            # A statement that calls, while loading, code mentioning this name (or mentioning such code) may change it.
            stack = [name]
            while stack:
                for mentioner in self.mentioners.get(stack.pop(), ()):
                    if mentioner not in touching:
                        touching.add(mentioner)
                        stack.append(mentioner)
                        for index in self.callers.get(mentioner, ()):
                            keep(index)
        return kept, reached


def _ordered(binds: list[set[str]], kept: list[bool], which: bool) -> list[str]:
    """The names bound by the statements kept (or left out), in file order, each once."""
    found: dict[str, None] = {}
    for names, was_kept in zip(binds, kept, strict=True):
        if was_kept == which:
            for name in sorted(names):
                found.setdefault(name, None)
    return list(found)
