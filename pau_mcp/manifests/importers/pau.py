"""The PAU dataset (``DJ-Research/PAU-Benchmark``) as suites ``pau-test`` and ``pau-train``.

Rows come from the hub's parquet files, or from a local parquet or JSONL
file. Each row's ``test_func_validated`` is already anonymised by the dataset
(``test_func(arg0, ...)``); it still goes through our anonymiser, which drops
its docstrings and comments. Inputs are rewritten from the reference's
calling rule (a list literal is unpacked into arguments) to ours (only a
tuple is), outcomes are frozen in the sandbox, and the dataset's stored
outputs are only compared with them.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from wasm_runtime import Limits, SandboxInterface, decode, parse_python, values_equal

from ..model import FrozenOutcome, Original, SuiteInfo
from ..store import ManifestStore
from .common import (
    DatasetUnavailable,
    Draft,
    ImportReport,
    Probe,
    Progress,
    Recorded,
    Refusal,
    build_suite,
    method_name,
    prepare_target,
)

__all__ = ["HUB_REPO", "HUB_URL", "compare_json", "import_pau", "load_pau_rows", "reference_arguments"]

HUB_REPO = "DJ-Research/PAU-Benchmark"
HUB_URL = f"https://huggingface.co/datasets/{HUB_REPO}"
SPLITS = ("test", "train")
_PREFIX = {"test": "t", "train": "r"}
_REQUIRED = ("test_func_validated", "description", "train_examples", "test_examples")
_NO_ERROR = (None, "", "None")


def reference_arguments(text: str) -> str:
    """Rewrite a PAU input literal into our argument-tuple literal, keeping its meaning.

    The reference calls ``f(*value)`` when the literal is a tuple *or a list*,
    and ``f(value)`` otherwise; our sandbox unpacks only tuples. So ``[1, 2]``
    (two arguments there) becomes ``(1, 2)``, ``5`` becomes ``(5,)``, and a
    tuple stays as it is. Text that does not parse is returned unchanged: the
    sandbox then reports it as an invalid input.
    """
    stripped = text.strip()
    try:
        node = parse_python(stripped, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    if isinstance(node, ast.Tuple):
        return stripped
    if isinstance(node, ast.List):
        parts = [ast.get_source_segment(stripped, element) or ast.unparse(element) for element in node.elts]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return "(" + (ast.get_source_segment(stripped, node) or stripped) + ",)"


_UNSET = object()


def _json_round_trip(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return _UNSET


def compare_json(recorded: Recorded, outcome: FrozenOutcome) -> str | None:
    """Compare a PAU stored output with our outcome: None when they agree, else the cause.

    Equal values agree, and so does stored text equal to our value's ``repr``
    (the reference stored some outputs as repr text). A value equal only once
    ours goes through JSON (tuples become lists, int dict keys strings) is the
    cause "json round-trip"; one side raising is "error"; anything else "mismatch".
    """
    if recorded.raised or outcome.status != "ok":
        return None if recorded.raised and outcome.status == "error" else "error"
    ours = decode(outcome.encoded)
    theirs = recorded.value
    if values_equal(ours, theirs) or (isinstance(theirs, str) and theirs == outcome.value):
        return None
    through_json = _json_round_trip(ours)
    if through_json is not _UNSET and values_equal(through_json, theirs):
        return "json round-trip"
    return "mismatch"


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetUnavailable("reading parquet needs pyarrow: pip install 'pau-mcp[datasets]'") from None
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several unrelated types for a bad file
        raise DatasetUnavailable(f"{path}: not a readable parquet file ({exc})") from None
    return rows


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetUnavailable(
                    f"{path}:{number}: not JSON ({exc.msg}); give one row object per line"
                ) from None
    return rows


def _split_file(name: str, split: str) -> bool:
    parts = Path(name).parts
    return name.endswith(".parquet") and (
        Path(name).name.startswith(f"{split}-") or Path(name).stem == split or split in parts[:-1]
    )


def _hub_files(split: str) -> list[Path]:
    try:
        from huggingface_hub import HfApi, hf_hub_download
    except ImportError:
        raise DatasetUnavailable(
            "loading from the hub needs huggingface_hub: pip install 'pau-mcp[datasets]'"
        ) from None
    try:
        names = sorted(n for n in HfApi().list_repo_files(HUB_REPO, repo_type="dataset") if _split_file(n, split))
        if not names:
            raise DatasetUnavailable(f"{HUB_REPO} has no parquet file for split {split!r}")
        return [Path(hf_hub_download(HUB_REPO, name, repo_type="dataset")) for name in names]
    except DatasetUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - network, auth and offline-mode errors all end here
        raise DatasetUnavailable(
            f"could not load the {split} split of {HUB_REPO} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            f"without network, download data/{split}-*.parquet from {HUB_URL} elsewhere and pass --from FILE"
        ) from None


def load_pau_rows(split: str = "test", source: Path | None = None) -> list[dict[str, Any]]:
    """The rows of a PAU split: from ``source`` (.parquet, .jsonl or .json lines) or the hub.

    Raises:
        DatasetUnavailable: The file is missing or malformed, or the hub cannot be reached.
    """
    if split not in SPLITS:
        raise DatasetUnavailable(f"unknown split {split!r}; PAU has {', '.join(SPLITS)}")
    if source is None:
        rows = [row for path in _hub_files(split) for row in _read_parquet(path)]
    elif not source.is_file():
        raise DatasetUnavailable(f"{source}: no such file; give a .parquet or .jsonl file of PAU rows")
    elif source.suffix == ".parquet":
        rows = _read_parquet(source)
    else:
        rows = _read_jsonl(source)
    if rows:
        missing = [column for column in _REQUIRED if column not in rows[0]]
        if missing:
            raise DatasetUnavailable(f"{source or HUB_REPO}: not PAU rows, missing column(s) {', '.join(missing)}")
    return rows


def _examples(raw: Any) -> list[Any]:
    """The ``[input, output]`` pairs of an example column (a JSON string, or already a list)."""
    if raw is None:
        return []
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, list):
        raise TypeError("not a list of [input, output] pairs")
    return value


def _probe(pair: Any, keep_text: bool = False) -> Probe:
    """One dataset example as a probe; ``keep_text`` keeps its text as the dataset writes it (initial examples)."""
    if not isinstance(pair, (list, tuple)) or len(pair) < 2 or not isinstance(pair[0], str):
        raise ValueError(f"example {pair!r} is not an [input, output] pair")
    # all_examples rows carry a third element, the error text (repr(None) when the call returned).
    raised = len(pair) > 2 and pair[2] not in _NO_ERROR
    original = None
    if keep_text and pair[0].strip():
        # The reference shows its initial examples as the dataset holds them: the input text as written and str()
        # of the stored output (the first example's a value, the second's the repr text creation.py stored).
        original = Original(input=pair[0], output=json.dumps(pair[1], ensure_ascii=False))
    return Probe(reference_arguments(pair[0]), Recorded(value=pair[1], raised=raised), original)


def _draft(row: dict[str, Any], index: int, split: str, count: int) -> Draft | Refusal:
    key = f"{split}/{index}"
    name = method_name(_PREFIX[split], index, count, width=4)
    try:
        examples = [_probe(pair, keep_text=True) for pair in _examples(row.get("train_examples"))]
        tests = [_probe(pair) for pair in _examples(row.get("test_examples"))]
    except (ValueError, TypeError) as exc:
        return Refusal(key, f"unreadable examples: {exc}")
    source = row.get("test_func_validated")
    if not isinstance(source, str) or not source.strip():
        return Refusal(key, "no source (test_func_validated is empty)")
    return Draft(
        key=key,
        name=name,
        source=source,
        entry="test_func",
        description=row.get("description"),
        examples=examples,
        tests=tests,
        provenance={"dataset": "PAU-Benchmark", "original_id": key, "url": HUB_URL},
    )


def import_pau(
    store: ManifestStore,
    sandbox: SandboxInterface,
    *,
    split: str = "test",
    source: Path | None = None,
    suite: str | None = None,
    replace: bool = False,
    limit: int | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a PAU split as a suite (default name ``pau-<split>``).

    Args:
        store: Where suites live; the new one goes under ``store.writable_root()``.
        sandbox: Freezes and validates every method.
        split: ``test`` (741 functions) or ``train`` (3,889).
        source: A local .parquet or .jsonl file of rows; None loads the split from the hub.
        suite: The suite's name.
        replace: Overwrite an existing suite of that name.
        limit: Import only the first ``limit`` rows.
        limits: Sandbox limits.
        progress: Progress bars, as in ``build_suite``.

    Returns:
        The report: methods imported, refused (with reasons), and disagreements with the stored outputs.

    Raises:
        DatasetUnavailable: The rows cannot be read.
        ImportTargetError: The suite exists (without ``replace``) or the name is invalid.
    """
    name = suite or f"pau-{split}"
    prepare_target(store, name, replace)
    rows = load_pau_rows(split, source)[: limit if limit is not None else None]
    items = [_draft(row, index, split, len(rows)) for index, row in enumerate(rows)]
    info = SuiteInfo(
        name=name,
        description=f"The {split} split of the PAU benchmark (Python API Understanding), frozen in the sandbox.",
        dataset=HUB_REPO,
        url=HUB_URL,
    )
    report = ImportReport(dataset=f"PAU ({split} split)", suite=name)
    return build_suite(
        items, info, store, sandbox, report, replace=replace, limits=limits, comparer=compare_json, progress=progress
    )
