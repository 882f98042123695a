"""Anonymisation: one rule for every importer, applied to source text with ``ast`` only.

The entry function becomes ``test_func`` and its parameters ``arg0..argN``
(every use inside the function follows, recursive calls included);
docstrings (and any other bare string statement) go from every body, and
comments go because ``ast.unparse`` never writes them. Helper functions stay, under their
own names, unless a name contains the entry's original name: then that part
becomes ``test_func`` too (``is_prime_helper`` -> ``test_func_helper``), so no
error message can carry it. Nothing here executes the source.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field

from wasm_runtime import parse_python

__all__ = ["ENTRY", "Anonymised", "CannotAnonymise", "anonymise", "docstring_of"]

#: The name every hidden method's entry function gets.
ENTRY = "test_func"

# Shorter names ("f", "go") are substrings of too many ordinary identifiers to rename by
# containment; check_method skips its name check for them for the same reason.
_MIN_NAME_TO_HIDE = 3

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class CannotAnonymise(ValueError):
    """The source cannot be anonymised (it does not parse, or has no such function); the message says why."""


@dataclass(frozen=True)
class Anonymised:
    """An anonymised source and what was renamed.

    Attributes:
        source: The rewritten source, defining ``test_func``.
        header: ``def test_func(arg0, arg1):``.
        params: The header's parameter names.
        original_name: The entry's name before renaming.
        renamed: Every identifier renamed, old name -> new name.
    """

    source: str
    header: str
    params: list[str]
    original_name: str
    renamed: dict[str, str] = field(default_factory=dict)


def docstring_of(source: str, name: str) -> str | None:
    """The docstring of the top-level function ``name`` in ``source``, or None (also when it does not parse).

    A string statement after a first statement (``import math`` then the text)
    counts too: the author meant it as the docstring.
    """
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, _FUNCTIONS) and node.name == name:
            strings = [text for statement in node.body if (text := _string_of(statement)) is not None]
            return inspect.cleandoc(strings[0]) if strings else None
    return None


def _string_of(node: ast.stmt) -> str | None:
    """The string of a statement that is a bare string literal (a docstring, when it comes first), else None."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return node.value.value
    return None


def _is_string_statement(node: ast.stmt) -> bool:
    return _string_of(node) is not None


def anonymise(source: str, entry: str, hidden_name: str | None = None) -> Anonymised:
    """Rename ``entry`` to ``test_func`` and its parameters to ``arg0..argN``; drop docstrings and comments.

    Args:
        source: Python source defining ``entry`` at top level (helpers and imports may come with it).
        entry: The name of the function to anonymise.
        hidden_name: The function's real name when ``entry`` is a stand-in already (``solution``):
            names containing it are renamed too, and it is reported as the original name.

    Returns:
        The anonymised source with its header and what was renamed.

    Raises:
        CannotAnonymise: The source does not parse, has no top-level function ``entry``,
            or already uses a name the renaming needs for something else.
    """
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise CannotAnonymise(f"the source does not parse: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:
        raise CannotAnonymise(f"the source does not parse: {exc}") from None
    function = next((n for n in tree.body if isinstance(n, _FUNCTIONS) and n.name == entry), None)
    if function is None:
        raise CannotAnonymise(f"the source defines no top-level function {entry!r}")
    if isinstance(function, ast.AsyncFunctionDef):
        raise CannotAnonymise(f"{entry} is a coroutine function; hidden methods must return values")

    renamed = _global_renames(tree, entry)
    if hidden_name and hidden_name != entry:
        if hidden_name in _bound_names(tree):
            raise CannotAnonymise(f"the source defines both {entry!r} and its real name {hidden_name!r}")
        # A leftover use of the real name can only mean the function itself (a recursive call).
        renamed = {**_global_renames(tree, hidden_name), **renamed}
    _check_free(tree, set(renamed.values()) - set(renamed), "renaming the entry")
    _rename_identifiers(tree, renamed)

    params = _parameter_renames(function)
    # A new name that is also an old parameter name is renamed in the same pass, so only others clash.
    clash = sorted((set(params.values()) - set(params)) & _identifiers(function.body))
    if clash:
        raise CannotAnonymise(f"the function already uses the name {clash[0]!r}, which a parameter must take")
    _rename_parameters(function, params)
    _rename_keywords(tree, params)
    renamed.update({old: new for old, new in params.items() if old != new})

    _strip_docstrings(tree)
    ast.fix_missing_locations(tree)
    text = ast.unparse(tree) + "\n"
    header_params = _header_params(function)
    return Anonymised(
        source=text,
        header=f"def {ENTRY}({', '.join(header_params)}):",
        params=header_params,
        original_name=hidden_name or entry,
        renamed=renamed,
    )


def _global_renames(tree: ast.Module, entry: str) -> dict[str, str]:
    """The entry -> test_func, plus every name the program binds that contains the entry's name."""
    renames = {entry: ENTRY}
    if entry == ENTRY or len(entry) < _MIN_NAME_TO_HIDE:
        return renames
    pattern = re.compile(re.escape(entry), re.IGNORECASE)
    for name in _bound_names(tree):
        if name != entry and pattern.search(name):
            renames[name] = pattern.sub(ENTRY, name)
    return renames


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the source itself defines: functions, classes and assigned names.

    Not imports (the module's own name must stay) and not parameters of other
    functions (callers may pass them by keyword).
    """
    members = {id(node) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for node in _class_members(cls)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in members:
            continue
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _class_members(cls: ast.ClassDef) -> list[ast.AST]:
    """The nodes naming a class's methods and attributes, reached through attributes, so never renamed."""
    members: list[ast.AST] = []
    for statement in cls.body:
        if isinstance(statement, (*_FUNCTIONS, ast.ClassDef)):
            members.append(statement)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            members.extend(t for t in targets if isinstance(t, ast.Name))
    return members


def _identifiers(nodes: ast.AST | list[ast.stmt]) -> set[str]:
    found: set[str] = set()
    for root in nodes if isinstance(nodes, list) else [nodes]:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                found.update(node.names)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).split(".")[0])
    return found


def _check_free(tree: ast.Module, targets: set[str], why: str) -> None:
    used = _identifiers(tree)
    taken = sorted(targets & used)
    if taken:
        raise CannotAnonymise(f"the source already uses the name {taken[0]!r}, needed for {why}")


_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class _Renamer(ast.NodeTransformer):
    """Renames identifiers everywhere in a subtree: names, definitions, parameters, global and nonlocal."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.mapping.get(node.arg, node.arg)
        self.generic_visit(node)
        return node

    def _visit_definition(self, node: _Definition) -> _Definition:
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    visit_FunctionDef = _visit_definition
    visit_AsyncFunctionDef = _visit_definition

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        kept = [
            (member, getattr(member, "name", None) or getattr(member, "id", None)) for member in _class_members(node)
        ]
        self._visit_definition(node)
        for member, name in kept:
            setattr(member, "name" if hasattr(member, "name") else "id", name)
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.Nonlocal:
        node.names = [self.mapping.get(name, name) for name in node.names]
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.mapping.get(name, name) for name in node.names]
        return node


def _rename_identifiers(tree: ast.Module, mapping: dict[str, str]) -> None:
    _Renamer(mapping).visit(tree)


def _all_args(function: ast.FunctionDef) -> list[ast.arg]:
    a = function.args
    ordered = [*a.posonlyargs, *a.args]
    if a.vararg is not None:
        ordered.append(a.vararg)
    ordered.extend(a.kwonlyargs)
    if a.kwarg is not None:
        ordered.append(a.kwarg)
    return ordered


def _parameter_renames(function: ast.FunctionDef) -> dict[str, str]:
    return {arg.arg: f"arg{i}" for i, arg in enumerate(_all_args(function))}


def _rename_parameters(function: ast.FunctionDef, params: dict[str, str]) -> None:
    """Rename the parameters and their uses in the body; defaults, annotations and decorators stay.

    Those three are evaluated where the function is defined, not inside it, so a
    name there never refers to a parameter.
    """
    for arg in _all_args(function):
        arg.arg = params[arg.arg]
    renamer = _Renamer(params)
    function.body = [renamer.visit(statement) for statement in function.body]


def _rename_keywords(tree: ast.Module, params: dict[str, str]) -> None:
    """Keyword arguments of calls to the entry (recursion, helpers) name its parameters: follow the renaming."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == ENTRY:
            for keyword in node.keywords:
                if keyword.arg is not None:
                    keyword.arg = params.get(keyword.arg, keyword.arg)


def _header_params(function: ast.FunctionDef) -> list[str]:
    a = function.args
    names = [arg.arg for arg in (*a.posonlyargs, *a.args)]
    if a.vararg is not None:
        names.append("*" + a.vararg.arg)
    return names


def _strip_docstrings(tree: ast.Module) -> None:
    """Remove docstrings, and every other bare string statement: they do nothing but can tell a lot."""
    for node in ast.walk(tree):
        for attribute in ("body", "orelse", "finalbody"):
            body = getattr(node, attribute, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [statement for statement in body if not _is_string_statement(statement)]
                if len(kept) != len(body):
                    setattr(node, attribute, kept or [ast.Pass()])
