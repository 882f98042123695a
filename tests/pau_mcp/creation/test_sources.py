"""The paper's five datasets, each in a file format it is published in, read through the Hugging Face `datasets`
library by `pau-mcp create` and made into a suite end to end (scripted model on loopback, real sandbox)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from creating import Serve, records, report_of, run_create
from scripted import Known, ScriptedModel

from pau_mcp.creation import DATASETS, load_source
from pau_mcp.manifests import ManifestStore
from pau_mcp.manifests.importers import DatasetUnavailable

CALLS = ["(1,)", "(2,)", "(0,)", "(5,)", "(9,)", "(4,)"]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def cruxeval(folder: Path) -> Path:
    """Parquet, as the hub serves it."""
    rows = [
        {"code": "def f(nums):\n    return sorted(nums)[::-1] + [1101]", "input": "[3, 1, 2]", "output": "[3, 2, 1, 1101]", "id": "sample_0"},
        {"code": "def f(text):\n    return text.upper() + 'Z' * 0 * 1102", "input": "'ab'", "output": "'AB'", "id": "sample_1"},
    ]  # fmt: skip
    path = folder / "cruxeval.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def mbpp(folder: Path) -> Path:
    """JSON lines, as the sanitized MBPP files are."""
    row = {
        "task_id": 2, "source_file": "x.py", "test_imports": [],
        "prompt": "Write a function to find the sum of squares from 0 up to n.",
        "code": "def sum_sq(n):\n    return sum(i * i for i in range(n + 1)) + 0 * 1201",
        "test_list": ["assert sum_sq(3) == 14", "assert sum_sq(0) == 0", "assert sum_sq(n) == 5"],
    }  # fmt: skip
    return _jsonl(folder / "mbpp.jsonl", [row])


def humaneval(folder: Path) -> Path:
    """Gzipped JSON lines, as HumanEval ships."""
    row = {
        "task_id": "HumanEval/0",
        "prompt": 'def add_one(x: int) -> int:\n    """Return x plus one.\n    >>> add_one(1)\n    2\n    """\n',
        "canonical_solution": "    return x + 1 + 0 * 1301\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
        "entry_point": "add_one",
    }
    path = folder / "humaneval.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(row).encode() + b"\n"))
    return path


def code_alpaca(folder: Path) -> Path:
    """One JSON array, as code_alpaca_20k.json is; a prose answer holds no function and is skipped."""
    rows = [
        {"instruction": "Write a function that reverses a string.", "input": "", "output": "def reverse(s):\n    return s[::-1] + '' * 1401"},
        {"instruction": "Explain recursion.", "input": "", "output": "Recursion is when a function calls itself."},
    ]  # fmt: skip
    path = folder / "code_alpaca.json"
    path.write_text(json.dumps(rows))
    return path


def magicoder(folder: Path) -> Path:
    """JSON lines, as the OSS-Instruct file is; only Python rows with one function count."""
    rows = [
        {"lang": "python", "problem": "Clamp a value between 0 and 10.", "index": 7,
         "solution": "Here it is:\n```python\ndef clamp(v):\n    return max(0, min(10, v)) + 0 * 1501\n```\nDone."},
        {"lang": "java", "problem": "x", "index": 8, "solution": "```java\nclass A {}\n```"},
    ]  # fmt: skip
    return _jsonl(folder / "magicoder.jsonl", rows)


STRINGS = ["('ab',)", "('',)", "('xyz',)", "('a',)", "('hello',)", "('Qq',)"]
LISTS = ["([3, 1, 2],)", "([],)", "([5],)", "([2, 2],)", "([9, 0, 4],)", "([1, 2, 3, 4],)"]

#: dataset -> (corpus writer, known functions, kept keys with where their gold came from)
CASES: dict[str, tuple[Any, list[Known], dict[str, str]]] = {
    "cruxeval": (
        cruxeval,
        [
            Known("1101", LISTS, "Sorts the list arg0 descending then appends 1101.", "descending then appends",
                  "def test_func(arg0):\n    return sorted(arg0)[::-1] + [1101]"),
            Known("1102", STRINGS, "Upper-cases the string arg0.", "Upper-cases", "def test_func(arg0):\n    return arg0.upper()"),
        ],
        {"sample_0": "model", "sample_1": "model"},
    ),
    "mbpp": (
        mbpp,
        [Known("1201", CALLS, "", "sum of squares", "def test_func(arg0):\n    return sum(i * i for i in range(arg0 + 1))")],
        {"mbpp/2": "docs"},
    ),
    "humaneval": (
        humaneval,
        [Known("1301", CALLS, "", "plus one", "def test_func(arg0):\n    return arg0 + 1")],
        {"HumanEval/0": "docs"},
    ),
    "code-alpaca": (
        code_alpaca,
        [Known("1401", STRINGS, "Returns the string arg0 reversed.", "reversed", "def test_func(arg0):\n    return arg0[::-1]")],
        {"code-alpaca/0": "model"},
    ),
    "magicoder": (
        magicoder,
        [Known("1501", ["(-3,)", "(0,)", "(5,)", "(10,)", "(12,)", "(7,)"], "Clamps arg0 into 0..10.", "Clamps",
               "def test_func(arg0):\n    return max(0, min(10, arg0))")],
        {"magicoder/7": "model"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("dataset", list(CASES))
def test_each_dataset_becomes_a_suite_through_the_datasets_library(dataset: str, tmp_path: Path, serve: Serve) -> None:
    write, known, kept = CASES[dataset]
    path = write(tmp_path)
    model = ScriptedModel(known)
    ran = run_create(serve(model), tmp_path / "data", tmp_path / "suites", dataset, "--from", path)
    report = report_of(ran)
    assert ran.returncode == 0, report
    split = DATASETS[dataset].split
    assert report["suite"] == f"{dataset}-{split}"  # the paper's split is the default
    by_key = records(report)
    assert {k for k, r in by_key.items() if r["outcome"] == "kept"} == set(kept), by_key
    suite = ManifestStore([tmp_path / "suites"], include_packaged=False).suite(report["suite"])
    assert f"{split} split" in suite.info.description
    for key, gold in kept.items():
        method = suite.methods[by_key[key]["methods"][0]]
        assert method.provenance.original_id == key and method.provenance.dataset == dataset
        assert method.provenance.gold_check is not None and method.provenance.gold_check.source == gold
    if dataset in ("code-alpaca", "magicoder"):
        assert report["skipped"] == 1  # the row without a Python function


def test_the_dataset_s_own_description_and_inputs_are_used(tmp_path: Path) -> None:
    source = load_source("mbpp", mbpp(tmp_path), cache_dir=tmp_path / "cache")
    (item,) = source.items
    assert item.entry == "sum_sq"
    assert item.docs == "Find the sum of squares from 0 up to n."
    assert item.inputs == ("(3,)", "(0,)")  # sum_sq(n) is not a literal call
    human = load_source("humaneval", humaneval(tmp_path), cache_dir=tmp_path / "cache").items[0]
    assert human.docs == "Return x plus one." and human.inputs == ("(1,)", "(5,)")
    crux = load_source("cruxeval", cruxeval(tmp_path), cache_dir=tmp_path / "cache").items[0]
    assert crux.entry == "f" and crux.inputs == ("([3, 1, 2],)",) and crux.docs is None
    alpaca = load_source("code-alpaca", code_alpaca(tmp_path), cache_dir=tmp_path / "cache")
    assert alpaca.items[0].context == "Write a function that reverses a string." and alpaca.skipped == 1


def test_a_file_that_is_not_the_dataset_says_which_columns_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable, match="not humaneval rows .no column canonical_solution, entry_point"):
        load_source("humaneval", mbpp(tmp_path), cache_dir=tmp_path / "cache")


def test_a_file_of_an_unknown_format_says_which_it_takes(tmp_path: Path) -> None:
    odd = tmp_path / "rows.txt"
    odd.write_text("x")
    with pytest.raises(DatasetUnavailable, match=r"give a \.parquet, \.jsonl, \.json or \.csv file"):
        load_source("cruxeval", odd, cache_dir=tmp_path / "cache")


def test_without_the_datasets_library_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real = builtins.__import__

    def without_datasets(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_datasets)
    with pytest.raises(DatasetUnavailable, match=r"pip install 'pau-mcp\[datasets\]'"):
        load_source("cruxeval", tmp_path / "x.parquet", cache_dir=tmp_path / "cache")


def test_without_a_file_or_network_the_hub_load_says_to_pass_from(tmp_path: Path) -> None:
    """The hub's offline switches are read when `datasets` is first imported: this runs in a process of its own."""
    import os

    from pau_command import run_pau_process

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OPENAI_API_KEY": "k"}
    env["PAU_MCP_DATA_DIR"] = str(tmp_path / "data")
    ran = run_pau_process("create", "cruxeval", "--model", "openai/gpt-4o-mini", "--manifests", tmp_path / "s", env=env)
    assert ran.returncode == 1
    assert "could not read cruxeval from the hub (cruxeval-org/cruxeval)" in ran.stderr
    assert "download cruxeval-org/cruxeval elsewhere and pass --from FILE" in ran.stderr


def test_the_command_knows_the_same_datasets_and_changes_as_the_package() -> None:
    """The command keeps its own copies, so that `pau-mcp --help` does not import the pipeline."""
    from pau_mcp.cli import create
    from pau_mcp.creation import KINDS

    assert tuple(DATASETS) == create._DATASETS and create._KINDS == KINDS
