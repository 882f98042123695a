"""Where functions come from: the five datasets the paper built PAU from, and your own Python files.

The datasets are read with the Hugging Face ``datasets`` library, from files you have (parquet, JSON lines, a JSON
array, CSV, a ``save_to_disk`` folder) or, with no file, from the hub under the name the paper used. Nothing is
vendored. Each row becomes an ``Item``: the function's source and entry, what the dataset documents about it, and
inputs the dataset itself gives. Like the importers, sources only read code with ``ast``; nothing runs here.

| source | hub name | paper's split | gold from the dataset | inputs from the dataset |
|---|---|---|---|---|
| ``cruxeval`` | cruxeval-org/cruxeval (test) | test | none | its one input |
| ``mbpp`` | Muennighoff/mbpp, sanitized (test) | test | the prompt | the calls in ``test_list`` |
| ``humaneval`` | openai/openai_humaneval (test) | test | the docstring | the ``candidate(...)`` calls |
| ``code-alpaca`` | sahil2801/CodeAlpaca-20k (train) | train | none (the instruction is context) | none |
| ``magicoder`` | ise-uiuc/Magicoder-OSS-Instruct-75K (train) | train | none (the problem is context) | none |
| a .py file or folder | | test | docstring or descriptions sidecar | inputs sidecar |
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Literal

from wasm_runtime import parse_python

from ..manifests import call_arguments
from ..manifests.importers import DatasetUnavailable, description_from_docstring, docstring_of
from ..manifests.importers.humaneval import candidate_inputs
from ..manifests.importers.python_files import public_functions, python_files, read_python
from ..userfiles import UnreadableFile, printable, read_text
from .dating import date_files

__all__ = ["DATASETS", "Dataset", "Item", "Source", "load_source"]

#: Longest argument literal taken from a dataset (a manifest case holds at most 64 KiB).
MAX_INPUT_CHARS = 16 * 1024
_MAX_SIDECAR_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Item:
    """One function on its way into a suite.

    Attributes:
        key: The item's id in its dataset (``HumanEval/17``, ``sample_3``, ``mbpp/11``, ``shop.py::price``).
        index: Its position among the source's items (names the method: ``h017``).
        source: Python source defining ``entry`` (helpers and imports may come with it).
        entry: The function to turn into ``test_func``.
        docs: A gold description from the dataset's own documentation, when it has one.
        context: What the dataset says about the task (an instruction, a problem statement): shown to the model
            that writes the validator, inputs and description, never used as gold as it is.
        inputs: Argument-tuple literals the dataset gives (its tests' calls), in our form.
        problem: Why the item cannot be used, when it cannot (the ``unreadable`` refusal).
        published: When its function was first published (``load_source(..., after=)``: a folder's files only).
        dated_by: How that is known: ``git`` (the file's first commit) or ``mtime`` (its modification time).
    """

    key: str
    index: int
    source: str
    entry: str
    docs: str | None = None
    context: str | None = None
    inputs: tuple[str, ...] = ()
    problem: str | None = None
    published: date | None = None
    dated_by: Literal["git", "mtime"] | None = None


@dataclass(frozen=True)
class Dataset:
    """One of the paper's datasets: where it lives on the hub, its split, and how its rows become items."""

    name: str
    hub: str
    config: str | None
    hub_split: str
    split: str
    prefix: str
    columns: tuple[str, ...]
    items: Callable[[Any], Iterable[Item | None]]


@dataclass
class Source:
    """The items of one source, and what reading it found.

    Attributes:
        name: ``cruxeval``, ..., or ``python``.
        label: How reports name it (``cruxeval (data/test.parquet)``).
        split: ``test`` or ``train`` (the paper's split of the source, unless overridden).
        prefix: The method names' first letter.
        items: Every function found, in the source's order.
        skipped: Rows that hold no function at all (Code Alpaca's prose answers), not counted as refusals.
        url: Where the dataset lives.
        after: With ``after``: only functions first published after this day were taken.
        older: Functions left out for being first published on or before ``after``.
        dated: Functions taken, by how their day is known (``git``, ``mtime``).
    """

    name: str
    label: str
    split: str
    prefix: str
    items: list[Item] = field(default_factory=list)
    skipped: int = 0
    url: str | None = None
    after: date | None = None
    older: int = 0
    dated: dict[str, int] = field(default_factory=dict)


def _functions(source: str) -> list[str] | None:
    """Top-level function names of ``source``, or None when it does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def literal_calls(code: str, name: str) -> list[str]:
    """The argument-tuple literals of every call of ``name`` in ``code`` whose arguments are all literals.

    Calls with keywords, ``*`` or a computed argument are left out; repeats are kept once; code that does not
    parse gives none.
    """
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: list[str] = []
    calls = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]
    for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        if call.keywords or any(isinstance(a, ast.Starred) or not _literal(a) for a in call.args):
            continue
        parts = [ast.get_source_segment(code, a) or ast.unparse(a) for a in call.args]
        text = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if len(text) <= MAX_INPUT_CHARS and text not in found:
            found.append(text)
    return found


def _text(row: Any, column: str) -> str:
    value = row.get(column)
    return value if isinstance(value, str) else ""


def _cruxeval(rows: Any) -> Iterable[Item | None]:
    for index, row in enumerate(rows):
        code = _text(row, "code")
        key = _text(row, "id") or f"cruxeval/{index}"
        argument = call_arguments(f"f({_text(row, 'input')})") if _text(row, "input") else None
        inputs = (argument,) if argument and len(argument) <= MAX_INPUT_CHARS else ()
        yield Item(key, index, code, "f", inputs=inputs, problem=None if code.strip() else "the row has no code")


def _humaneval(rows: Any) -> Iterable[Item | None]:
    for index, row in enumerate(rows):
        entry = _text(row, "entry_point")
        code = _text(row, "prompt") + _text(row, "canonical_solution")
        key = _text(row, "task_id") or f"HumanEval/{index}"
        try:
            inputs = tuple(candidate_inputs(_text(row, "test"))[0])
        except (ValueError, SyntaxError):
            inputs = ()
        docs = description_from_docstring(docstring_of(code, entry), entry) or None
        problem = None if entry and code.strip() else "the row has no prompt, solution or entry_point"
        yield Item(key, index, code, entry, docs=docs, inputs=inputs, problem=problem)


_TASK = re.compile(r"^\s*(write\s+)?(a\s+)?(python\s+)?(function|program)\s+(to|that)\s+", re.IGNORECASE)


def _mbpp_docs(prompt: str) -> str | None:
    """The task statement as a description: "Write a function to find x." becomes "Find x."."""
    text = " ".join(prompt.split())
    if not text:
        return None
    text = _TASK.sub("", text, count=1)
    return text[:1].upper() + text[1:]


def _mbpp(rows: Any) -> Iterable[Item | None]:
    for index, row in enumerate(rows):
        code = _text(row, "code")
        key = f"mbpp/{row.get('task_id', index)}"
        names = _functions(code)
        tests = row.get("test_list") or []
        tests = [t for t in tests if isinstance(t, str)]
        if not names:
            yield Item(
                key,
                index,
                code,
                "",
                problem="the code defines no function" if names == [] else "the code does not parse",
            )
            continue
        # The function the tests call is the entry; the reference took the last one defined, the same in nearly all rows.
        called = [n for n in names if any(re.search(rf"\b{re.escape(n)}\s*\(", t) for t in tests)]
        entry = called[-1] if called else names[-1]
        inputs = tuple(dict.fromkeys(i for t in tests for i in literal_calls(t, entry)))
        docs = _mbpp_docs(_text(row, "prompt") or _text(row, "text"))
        yield Item(key, index, code, entry, docs=docs, inputs=inputs)


def _code_alpaca(rows: Any) -> Iterable[Item | None]:
    for index, row in enumerate(rows):
        code = _text(row, "output")
        names = _functions(code) if code.lstrip().startswith("def ") else None
        if not names:
            yield None  # a prose answer, or code in another language: no function to take
            continue
        instruction = _text(row, "instruction").strip()
        given = _text(row, "input").strip()
        context = instruction + (f"\nInput: {given}" if given else "")
        yield Item(f"code-alpaca/{index}", index, code, names[0], context=context or None)


def _python_blocks(text: str) -> list[str]:
    """The bodies of the text's fenced ```python blocks, in order.

    Each search starts where the last block ended, so the text is read once: a lazy ```python...(.*?)``` pattern
    reads to the end again from every opening fence that is never closed.
    """
    blocks: list[str] = []
    position = 0
    while (opening := text.find("```python", position)) >= 0:
        line_end = text.find("\n", opening)
        closing = text.find("```", line_end + 1) if line_end >= 0 else -1
        if closing < 0:
            break
        blocks.append(text[line_end + 1 : closing])
        position = closing + 3
    return blocks


def _magicoder(rows: Any) -> Iterable[Item | None]:
    for index, row in enumerate(rows):
        if _text(row, "lang") not in ("", "python", "Python"):
            yield None
            continue
        blocks = _python_blocks(_text(row, "solution"))
        # As the paper did: one Python block holding exactly one function and no class.
        code = blocks[0] if len(blocks) == 1 else ""
        names = _functions(code) if code else None
        if not names or len(names) != 1 or re.search(r"^[ \t]*class\s", code, re.MULTILINE):
            yield None
            continue
        key = f"magicoder/{row.get('index', index)}"
        yield Item(key, index, code, names[0], context=_text(row, "problem").strip() or None)


#: The paper's five datasets, by the name ``pau-mcp create`` takes.
DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset("cruxeval", "cruxeval-org/cruxeval", None, "test", "test", "x", ("code", "input"), _cruxeval),
        Dataset("mbpp", "Muennighoff/mbpp", "sanitized", "test", "test", "m", ("code",), _mbpp),
        Dataset(
            "humaneval",
            "openai/openai_humaneval",
            None,
            "test",
            "test",
            "h",
            ("prompt", "canonical_solution", "entry_point"),
            _humaneval,
        ),  # fmt: skip
        Dataset(
            "code-alpaca",
            "sahil2801/CodeAlpaca-20k",
            None,
            "train",
            "train",
            "a",
            ("instruction", "output"),
            _code_alpaca,
        ),
        Dataset(
            "magicoder",
            "ise-uiuc/Magicoder-OSS-Instruct-75K",
            None,
            "train",
            "train",
            "g",
            ("problem", "solution"),
            _magicoder,
        ),  # fmt: skip
    ]
}

_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv", ".gz": "json"}


def _datasets_library() -> Any:
    try:
        import datasets
    except ImportError:
        raise DatasetUnavailable(
            "reading the paper's datasets needs the Hugging Face `datasets` library: pip install 'pau-mcp[datasets]'"
        ) from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def _rows(dataset: Dataset, path: Path | None, cache_dir: Path) -> Any:
    """The rows of a dataset, through ``datasets``: from a local file or folder, else from the hub."""
    library = _datasets_library()
    try:
        if path is None:
            return library.load_dataset(dataset.hub, dataset.config, split=dataset.hub_split, cache_dir=str(cache_dir))
        if path.is_dir():
            if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
                loaded = library.load_from_disk(str(path))
                return loaded[dataset.hub_split] if isinstance(loaded, library.DatasetDict) else loaded
            return library.load_dataset(str(path), split=dataset.hub_split, cache_dir=str(cache_dir))
        kind = _FORMATS.get(path.suffix.lower())
        if kind is None:
            raise DatasetUnavailable(
                f"{path}: give a .parquet, .jsonl, .json or .csv file, or a folder (a saved dataset or data files)"
            )
        return library.load_dataset(kind, data_files=str(path), split="train", cache_dir=str(cache_dir))
    except DatasetUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets raises many unrelated types for a missing or bad file
        where = str(path) if path is not None else f"the hub ({dataset.hub})"
        hint = (
            f"without network, download {dataset.hub} elsewhere and pass --from FILE"
            if path is None
            else "check that the file is the dataset's, in one of the formats --from takes"
        )
        raise DatasetUnavailable(
            f"could not read {dataset.name} from {where} ({type(exc).__name__}: {exc}); {hint}"
        ) from None


def _python_items(path: Path, after: date | None = None) -> tuple[list[Item], str]:
    """Every public function of a .py file, or of each .py file directly in a folder.

    A file that cannot be read safely (a link leading out of the folder, something that is not a regular file or
    not UTF-8 text, one over ``MAX_SOURCE_BYTES``) becomes an unreadable item with the reason, and nothing of it
    is read.
    """
    try:
        files, folder = python_files(path)
    except DatasetUnavailable as exc:
        if path.is_dir():
            raise
        raise DatasetUnavailable(f"{exc}, nor one of the datasets ({', '.join(DATASETS)})") from None
    beside = folder or path.parent
    days = date_files(files, beside) if after is not None else {}
    items: list[Item] = []
    for file in files:
        try:
            text = read_python(file, folder)
        except UnreadableFile as exc:
            items.append(Item(file.name, len(items), "", "", problem=str(exc)))
            continue
        day = days.get(file)
        published, dated_by = (day.day, day.by) if day is not None else (None, None)
        descriptions = _sidecar(file, "descriptions", beside)
        inputs = _sidecar(file, "inputs", beside)
        try:
            names = public_functions(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) else ""
            items.append(
                Item(file.name, len(items), text, "", problem=f"does not parse: {getattr(exc, 'msg', exc)}{where}")
            )
            continue
        for name in names:
            docs = descriptions.get(f"{file.stem}.{name}", descriptions.get(name))
            if not isinstance(docs, str) or not docs.strip():
                docs = description_from_docstring(docstring_of(text, name), name) or None
            given = inputs.get(f"{file.stem}.{name}", inputs.get(name)) or []
            literals = tuple(str(i) for i in given if isinstance(i, str) and len(i) <= MAX_INPUT_CHARS)
            items.append(
                Item(
                    f"{file.name}::{name}", len(items), text, name, docs=docs, inputs=literals, published=published,
                    dated_by=dated_by,
                )
            )  # fmt: skip
    return items, str(path)


def _sidecar(file: Path, what: str, inside: Path) -> dict[str, Any]:
    path = file.with_name(f"{file.stem}.{what}.json")
    if not (path.exists() or path.is_symlink()):
        return {}
    try:
        data = json.loads(read_text(path, limit=_MAX_SIDECAR_BYTES, inside=inside))
    except UnreadableFile as exc:
        raise DatasetUnavailable(printable(str(exc))) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DatasetUnavailable(printable(f"{path}: cannot read it as JSON ({exc})")) from None
    if not isinstance(data, dict):
        raise DatasetUnavailable(printable(f"{path}: must map function names to {what}"))
    return data


def load_source(
    name: str, path: Path | None, *, cache_dir: Path, limit: int | None = None, after: date | None = None
) -> Source:
    """Read a source into items.

    Args:
        name: One of ``DATASETS`` (read with ``datasets``), or a path to a .py file or folder of your functions.
        path: For a dataset, a local file or folder of its rows; None loads it from the Hugging Face hub.
        cache_dir: Where ``datasets`` keeps what it converts.
        limit: Keep only the first ``limit`` functions.
        after: Only functions first published after this day (``dating``): for your own files, which have dates.

    Raises:
        DatasetUnavailable: The file or folder cannot be read (the message says what to do), ``datasets`` is not
            installed, or the rows lack the dataset's columns.
        ValueError: ``after`` was given for a dataset, whose rows carry no dates.
    """
    dataset = DATASETS.get(name)
    if dataset is None:
        items, label = _python_items(Path(name).expanduser(), after)
        source = Source("python", label, "test", "f", after=after)
        for found in items:
            if after is not None and found.published is not None and found.published <= after:
                source.older += 1
                continue
            if limit is not None and len(source.items) >= limit:
                break
            if found.dated_by is not None:
                source.dated[found.dated_by] = source.dated.get(found.dated_by, 0) + 1
            source.items.append(found)
        return source
    if after is not None:
        raise ValueError(
            f"{dataset.name}'s rows carry no dates, so --after cannot choose among them: use it with a folder of your "
            "own functions (dated by their first git commit, else their modification time)"
        )
    rows = _rows(dataset, path, cache_dir)
    columns = set(getattr(rows, "column_names", None) or [])
    missing = [c for c in dataset.columns if c not in columns]
    if missing:
        where = path or dataset.hub
        raise DatasetUnavailable(
            f"{where}: not {dataset.name} rows (no column {', '.join(missing)}; it has {', '.join(sorted(columns)) or 'none'})"
        )
    source = Source(
        dataset.name, f"{dataset.name} ({path or dataset.hub})", dataset.split, dataset.prefix,
        url=f"https://huggingface.co/datasets/{dataset.hub}",
    )  # fmt: skip
    seen: set[str] = set()
    for item in dataset.items(rows):
        if item is None:
            source.skipped += 1
            continue
        if limit is not None and len(source.items) >= limit:
            break
        if item.key in seen:  # a dataset whose id column repeats: the row's position tells them apart
            item = replace(item, key=f"{item.key}#{item.index}")
        seen.add(item.key)
        source.items.append(item)
    return source
