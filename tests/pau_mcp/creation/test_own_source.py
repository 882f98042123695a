"""A function's hidden source is that function and what it reaches: `pau-mcp create` on a file of four functions,
one of which imports os and one of which calls another, keeps the three innocent ones, each with only its own code;
variants change only code the method reaches."""

from __future__ import annotations

import random
from typing import Any

import pytest
from creating import records, report_of, run_create
from scripted import Known, ScriptedModel

from pau_mcp.creation import candidates
from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Tags
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox

FOUR = '''"""Four functions: one imports os, one calls another."""
import os

GREETING = "hello from a sibling"


def here(x):
    return os.sep + str(x)


def double(x):
    return x * 2 + 0 * 1701


def quadruple(x):
    return double(double(x)) + 0 * 1702


def shout(text):
    return text.upper() + _shout_mark() + "" * 1703


def _shout_mark():
    return "!"


def greet():
    return GREETING
'''
NUMBERS = ["(1,)", "(2,)", "(0,)", "(-4,)", "(10,)", "(7,)", "(100,)", "(3,)"]
WORDS = ["('a',)", "('hey',)", "('',)", "('Abc',)", "('xyz',)", "('q r',)", "('MiXed',)"]
MODEL = [
    Known("1701", NUMBERS, "Returns arg0 doubled.", "doubled", "def test_func(arg0):\n    return arg0 * 2"),
    Known("1702", NUMBERS, "Returns four times arg0.", "four times", "def test_func(arg0):\n    return arg0 * 4"),
    Known(
        "1703",
        WORDS,
        "Upper-cases arg0 and adds an exclamation mark.",
        "exclamation",
        "def test_func(arg0):\n    return arg0.upper() + '!'",
    ),  # fmt: skip
]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from fakellm import FakeLLM

    root = tmp_path_factory.mktemp("own")
    (root / "funcs").mkdir()
    (root / "funcs" / "four.py").write_text(FOUR)
    with FakeLLM(ScriptedModel(MODEL)) as fake:
        ran = run_create(fake, root / "data", root / "suites", root / "funcs" / "four.py", "--suite", "four")
    report = report_of(ran)
    store = ManifestStore([root / "suites"], include_packaged=False)
    return {"records": records(report), "store": store}


def _method(made: dict[str, Any], key: str) -> Method:
    record = made["records"][key]
    assert record["outcome"] == "kept", record
    store: ManifestStore = made["store"]
    return store.method(record["methods"][0])


def test_an_import_only_one_function_uses_refuses_only_that_function(made: dict[str, Any]) -> None:
    assert made["records"]["four.py::here"]["reason"] == "side-effects"
    assert made["records"]["four.py::here"]["detail"] == "it imports os"
    for key in ("four.py::double", "four.py::quadruple", "four.py::shout"):
        assert made["records"][key]["outcome"] == "kept", made["records"][key]


def test_each_method_carries_only_its_function_and_what_it_reaches(made: dict[str, Any]) -> None:
    double, quadruple, shout = (_method(made, f"four.py::{n}") for n in ("double", "quadruple", "shout"))
    assert "1701" in double.source and "1702" not in double.source and "1703" not in double.source
    assert "def double(" in quadruple.source and "1702" in quadruple.source and "1703" not in quadruple.source
    assert "1703" in shout.source and "double" not in shout.source
    for method in (double, quadruple, shout):
        for sibling in ("import os", "os.sep", "hello from a sibling", "def greet", "def here"):
            assert sibling not in method.source, (method.id, sibling)
    read = next(s for s in made["records"]["four.py::quadruple"]["steps"] if s["step"] == "read")
    assert "reaches double; leaves out" in read["detail"] and "here" in read["detail"]


def test_a_helper_it_uses_is_anonymised_as_before(made: dict[str, Any]) -> None:
    shout = _method(made, "four.py::shout")
    assert "_test_func_mark()" in shout.source and "shout" not in shout.source.lower()


def test_a_variant_changes_only_code_the_method_reaches(sandbox: Sandbox) -> None:
    source = (
        "LIMIT = 3\n\ndef unused(v):\n    return v * 100 < 5 + 1\n\ndef test_func(arg0):\n    return arg0 > LIMIT\n"
    )
    inputs = ["(1,)", "(5,)", "(2,)", "(3,)", "(4,)", "(6,)"]
    method = freeze_method(
        Method(
            id="s/m", header="def test_func(arg0):", params=["arg0"], source=source, description="gold",
            examples=[Case(input=i) for i in inputs[:2]], tests=[Case(input=i) for i in inputs[2:]],
            provenance=Provenance(dataset="t"), tags=Tags(arity=1),
        ),
        sandbox,
    )  # fmt: skip
    found, total = candidates(method, [method], ["constant", "comparison", "arithmetic"], random.Random(0), 100)
    assert [c.change for c in found] == ["comparison > -> >= (line 4)"] and total == 1
    assert "unused" not in found[0].source and "LIMIT = 3" in found[0].source
