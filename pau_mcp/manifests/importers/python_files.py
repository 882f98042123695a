"""Your own Python functions as a suite: benchmark agents on your APIs.

Every top-level public function (no leading ``_``) of a ``.py`` file, or of
each ``.py`` file directly in a folder, becomes a method; its source is the
function and the module-level code it reaches (helpers, constants, imports:
``slicing``), so siblings it never uses stay out. Descriptions come from docstrings,
or from a sidecar ``<stem>.descriptions.json`` (function name -> text), which
wins. Inputs come from ``--inputs FILE`` or a sidecar ``<stem>.inputs.json``:
function name (or ``<stem>.<name>``) -> list of argument literals, in the
sandbox's form (a tuple is the argument list, anything else one argument).
Outcomes are frozen in the sandbox; the files never run on the host. Files are
read as ``userfiles`` reads what a user hands over: in a folder, only regular
files whose real path lies inside it (a ``.py`` link to a file elsewhere is
refused, not read), at most ``MAX_SOURCE_BYTES`` each, as UTF-8 text.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from wasm_runtime import Limits, SandboxInterface, parse_python

from ...userfiles import UnreadableFile, printable, read_text
from ..model import SuiteInfo
from ..store import ManifestStore
from .anonymise import docstring_of
from .common import (
    DatasetUnavailable,
    Draft,
    ImportReport,
    Probe,
    Progress,
    Refusal,
    build_suite,
    description_from_docstring,
    method_name,
    prepare_target,
    split_probes,
    suite_name_from,
)
from .slicing import slice_function

__all__ = ["MAX_SOURCE_BYTES", "import_python", "public_functions", "python_files", "read_python"]

#: The largest .py file read (a module of functions, not a data dump).
MAX_SOURCE_BYTES = 1024 * 1024
_MAX_SIDECAR_BYTES = 16 * 1024 * 1024


def public_functions(source: str) -> list[str]:
    """Names of the top-level functions not starting with ``_``, in file order.

    Raises:
        SyntaxError: The source does not parse.
    """
    tree = parse_python(source)
    return [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")
    ]


def _json_mapping(path: Path, what: str, inside: Path | None = None) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path, limit=_MAX_SIDECAR_BYTES, inside=inside))
    except UnreadableFile as exc:
        raise DatasetUnavailable(printable(f"cannot read the {what} file: {exc}")) from None
    except RecursionError:
        raise DatasetUnavailable(printable(f"{path}: the {what} file nests too deep")) from None
    except json.JSONDecodeError as exc:
        raise DatasetUnavailable(f"{path}: the {what} file is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise DatasetUnavailable(f"{path}: the {what} file must map function names to values")
    return data


def python_files(path: Path) -> tuple[list[Path], Path | None]:
    """The .py files a path names (the file itself, or the ``*.py`` entries directly in a folder, links included:
    ``read_python`` refuses those leading out), and the folder they must stay in (None for a file named alone).

    Raises:
        DatasetUnavailable: The path is missing, is not a .py file, or is a folder without .py files.
    """
    if path.is_dir():
        files = sorted(p for p in path.glob("*.py") if not p.is_dir())
        if not files:
            raise DatasetUnavailable(f"{path}: no .py files in this folder")
        return files, path
    if path.exists() or path.is_symlink():
        if path.suffix != ".py":
            raise DatasetUnavailable(f"{path}: not a .py file")
        return [path], None
    raise DatasetUnavailable(f"{path}: no such file or folder")


def read_python(file: Path, inside: Path | None) -> str:
    """The text of one .py file a user handed over: a regular file, inside ``inside`` when given, UTF-8, at most
    ``MAX_SOURCE_BYTES``.

    Raises:
        UnreadableFile: One line naming the file (its name printable) and what is wrong.
    """
    try:
        return read_text(file, limit=MAX_SOURCE_BYTES, inside=inside)
    except UnreadableFile as exc:
        raise UnreadableFile(printable(str(exc))) from None


def _lookup(mapping: dict[str, Any], stem: str, function: str) -> Any:
    return mapping.get(f"{stem}.{function}", mapping.get(function))


def _probes(raw: Any, where: str) -> list[Probe] | str:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        return f"the inputs in {where} must be a list of literal strings such as \"(1, 'a')\""
    return [Probe(item) for item in dict.fromkeys(raw)]


def import_python(
    store: ManifestStore,
    sandbox: SandboxInterface,
    source: Path,
    *,
    inputs: Path | None = None,
    suite: str | None = None,
    replace: bool = False,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import the public functions of a .py file or folder as a suite (default name: the file or folder stem).

    Args:
        store: Where suites live; the new one goes under ``store.writable_root()``.
        sandbox: Freezes and validates every method.
        source: A .py file, or a folder whose .py files (not sub-folders) are read.
        inputs: JSON mapping function name (or ``<stem>.<name>``) -> list of argument literals;
            without it, each file's ``<stem>.inputs.json`` beside it.
        suite: The suite's name.
        replace: Overwrite an existing suite of that name.
        limits: Sandbox limits.
        progress: Progress bars, as in ``build_suite``.

    Returns:
        The report; a function without inputs or description is refused, with every missing piece named in
        one reason (and a file with no public function is refused too).

    Raises:
        DatasetUnavailable: The path or a JSON file is missing or malformed.
        ImportTargetError: The suite exists (without ``replace``) or the name is invalid.
    """
    source = Path(source)
    name = suite or suite_name_from(source.stem if source.is_file() else source.resolve().name)
    prepare_target(store, name, replace)
    files, folder = python_files(source)
    given = _json_mapping(inputs, "inputs") if inputs is not None else None
    report = ImportReport(dataset=str(source), suite=name)
    items: list[Draft | Refusal] = []
    used: set[str] = set()
    found: list[tuple[Path, str, str]] = []
    for file in files:
        try:
            text = read_python(file, folder)
        except UnreadableFile as exc:
            items.append(Refusal(file.name, f"unreadable: {exc}"))
            continue
        try:
            functions = public_functions(text)
        except SyntaxError as exc:
            items.append(Refusal(file.name, f"does not parse: {exc.msg} (line {exc.lineno})"))
            continue
        if not functions:
            items.append(
                Refusal(file.name, "no public function: define one at the top level, its name not starting with _")
            )
        found.extend((file, text, function) for function in functions)
    for position, (file, text, function) in enumerate(found):
        key = f"{file.name}::{function}"
        sidecar = file.with_name(f"{file.stem}.inputs.json")
        beside = folder or file.parent
        exists = sidecar.exists() or sidecar.is_symlink()
        mapping = given if given is not None else (_json_mapping(sidecar, "inputs", beside) if exists else {})
        described = file.with_name(f"{file.stem}.descriptions.json")
        exists = described.exists() or described.is_symlink()
        descriptions = _json_mapping(described, "descriptions", beside) if exists else {}
        # Every missing piece at once, so one round of fixes is enough.
        missing: list[str] = []
        where = inputs or sidecar
        raw = _lookup(mapping, file.stem, function)
        probes: list[Probe] = []
        if raw is None:
            missing.append(f'no inputs: add "{function}": ["(...)", ...] to {where}')
        else:
            used.update({function, f"{file.stem}.{function}"})
            checked = _probes(raw, str(where))
            if isinstance(checked, str):
                missing.append(checked)
            elif not checked:
                missing.append(f'no inputs: the list for "{function}" in {where} is empty')
            else:
                probes = checked
        description = _lookup(descriptions, file.stem, function)
        if not isinstance(description, str) or not description.strip():
            description = description_from_docstring(docstring_of(text, function), function)
        if not description.strip():
            missing.append(f'no description: add a docstring to {function}, or "{function}": "..." to {described}')
        if missing:
            items.append(Refusal(key, "; ".join(missing)))
            continue
        examples, tests = split_probes(probes, hide=function)
        items.append(Draft(
            key=key,
            name=method_name("f", position, len(found)),
            source=slice_function(text, function).source,
            entry=function,
            description=description,
            examples=examples,
            tests=tests,
            provenance={"dataset": f"python:{file.name}", "original_id": key},
        ))  # fmt: skip
    unknown = sorted(set(given or {}) - used)
    if unknown:
        report.notes.append(f"inputs given for functions not found (ignored): {', '.join(unknown)}")
    info = SuiteInfo(
        name=name,
        description=f"Functions from {source.name}, imported with `pau-mcp import python`.",
        dataset="python files",
    )
    return build_suite(items, info, store, sandbox, report, replace=replace, limits=limits, progress=progress)
