"""`pau-mcp create --variants-of`: a variant that behaves differently is kept with new checked gold and its origin
recorded; one that behaves like its original is refused; agents see neither origin nor change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from creating import Serve, records, report_of, run_create
from pau_command import run_pau
from scripted import Known, ScriptedModel

from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Suite, SuiteInfo, Tags
from pau_mcp.manifests.checks import freeze_method

ORIGINALS = {
    # ">" -> ">=" changes the answer at 3, which the tests hold: a variant.
    "o1": (
        "def test_func(arg0):\n    tag = 'm1601'\n    return arg0 > 3\n",
        ["(1,)", "(5,)", "(2,)", "(3,)", "(4,)", "(6,)", "(0,)"],
    ),
    # "<" -> "<=" changes the answer only at 100, which no input holds: the same behaviour.
    "o2": (
        "def test_func(arg0):\n    tag = 'm1602'\n    if arg0 < 100:\n        return 'small'\n    return 'big'\n",
        ["(1,)", "(500,)", "(5,)", "(50,)", "(200,)", "(300,)", "(1000,)"],
    ),
}


def write_suite(root: Path) -> None:
    suite = Suite.create(root, SuiteInfo(name="orig", dataset="mine"))
    from wasm_runtime import Sandbox

    sandbox = Sandbox()
    for name, (source, inputs) in ORIGINALS.items():
        method = Method(
            id=f"orig/{name}", header="def test_func(arg0):", params=["arg0"], source=source,
            description="the original's gold", examples=[Case(input=i) for i in inputs[:2]],
            tests=[Case(input=i) for i in inputs[2:]],
            provenance=Provenance(dataset="mine", original_name="threshold_check"), tags=Tags(arity=1),
        )  # fmt: skip
        suite.save(freeze_method(method, sandbox))


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from fakellm import FakeLLM

    root = tmp_path_factory.mktemp("variants")
    write_suite(root / "suites")
    model = ScriptedModel(
        [
            Known(
                "m1601",
                None,
                "True when arg0 is at least 3.",
                "at least 3",
                "def test_func(arg0):\n    return arg0 >= 3",
            ),
            Known("m1602", None, "Never asked.", "Never asked", ""),
        ]
    )
    with FakeLLM(model) as fake:
        ran = run_create(
            fake, root / "data", root / "suites", "--variants-of", "orig", "--change", "comparison", "--suite", "orig-v"
        )
    return {"ran": ran, "report": report_of(ran), "root": root, "model": model}


def test_a_variant_that_behaves_differently_is_kept_with_its_origin_and_new_gold(varied: dict[str, Any]) -> None:
    record = records(varied["report"])["orig/o1"]
    assert record["outcome"] == "kept", record
    (method_id,) = record["methods"]
    method = ManifestStore([varied["root"] / "suites"], include_packaged=False).method(method_id)
    assert method.provenance.variant_of == "orig/o1"
    assert method.provenance.variant_change == "comparison: comparison > -> >= (line 3)"
    assert method.provenance.original_name == "threshold_check"  # still kept out of everything agents see
    assert method.description == "True when arg0 is at least 3."
    assert method.provenance.gold_check is not None and method.provenance.gold_check.match == 1.0
    assert "arg0 >= 3" in method.source
    behaviour = next(s for s in record["steps"] if s["step"] == "behaviour")
    assert behaviour["detail"] == "differs on 1 of the original's 7 inputs"


def test_a_variant_that_behaves_like_its_original_is_refused(varied: dict[str, Any]) -> None:
    record = records(varied["report"])["orig/o2"]
    assert record["reason"] == "same-behaviour", record
    assert [s["status"] for s in record["steps"] if s["step"] == "behaviour"] == ["failed", "refused"]
    assert varied["model"].asked["describe", "m1602"] == 0  # no model request for a variant that is not kept


def test_agents_see_neither_the_origin_nor_the_change(varied: dict[str, Any]) -> None:
    root = varied["root"] / "suites"
    method_id = records(varied["report"])["orig/o1"]["methods"][0]
    shown = run_pau("manifests", "show", method_id, "--manifests", root, "--json")
    assert shown.returncode == 0
    for secret in ("orig/o1", "variant", "comparison", "at least 3", ">="):
        assert secret not in shown.stdout
    assert run_pau("manifests", "validate", "--suite", "orig-v", "--manifests", root).returncode == 0


def test_a_method_with_no_place_for_the_change_is_refused(tmp_path: Path, serve: Serve) -> None:
    root = tmp_path / "suites"
    write_suite(root)
    ran = run_create(
        serve(ScriptedModel([])), tmp_path / "data", root, "--variants-of", "orig", "--change", "argument-order"
    )
    assert ran.returncode == 1
    assert {r["reason"] for r in report_of(ran)["records"]} == {"no-change"}


def test_variant_options_need_variants_of(tmp_path: Path, serve: Serve) -> None:
    from creating import create_env

    env = create_env(serve(ScriptedModel([])), tmp_path)
    ran = run_pau("create", tmp_path, "--change", "constant", "--model", "openai/x", "--manifests", tmp_path, env=env)
    assert ran.returncode == 2 and "go with --variants-of" in ran.stderr


ENDLESS = (
    "def test_func(arg0):\n    tag = 'm1603'\n    n = arg0\n    count = 0\n    while n:\n        n //= 2\n"
    "        count += 1\n    return count\n"
)


def test_a_change_that_makes_a_loop_endless_costs_a_small_budget_not_the_time_limit_per_input(
    tmp_path: Path, serve: Serve
) -> None:
    """`n //= 2` -> `n *= 2` never ends: it is run within 50 times the original's CPU (at least 10 ms) per input,
    left out, and the next change is tried; at the full 2 s limit, its 6 endless inputs alone took 12 s of CPU."""
    import resource

    from wasm_runtime import Sandbox

    inputs = ["(1,)", "(8,)", "(0,)", "(5,)", "(100,)", "(3,)", "(64,)"]
    suite = Suite.create(tmp_path / "suites", SuiteInfo(name="loops", dataset="mine"))
    method = Method(
        id="loops/l1", header="def test_func(arg0):", params=["arg0"], source=ENDLESS, description="gold",
        examples=[Case(input=i) for i in inputs[:2]], tests=[Case(input=i) for i in inputs[2:]],
        provenance=Provenance(dataset="mine"), tags=Tags(arity=1),
    )  # fmt: skip
    suite.save(freeze_method(method, Sandbox()))
    known = Known(
        "m1603",
        None,
        "Minus the bit length of arg0.",
        "bit length",
        "def test_func(arg0):\n    return -arg0.bit_length()",
    )
    before = resource.getrusage(resource.RUSAGE_SELF)
    ran = run_create(
        serve(ScriptedModel([known])), tmp_path / "data", tmp_path / "suites", "--variants-of", "loops",
        "--change", "arithmetic", "--per-method", "2", "--timeout", "2",
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_SELF)
    record = records(report_of(ran))["loops/l1"]
    behaviour = [s["detail"] for s in record["steps"] if s["step"] == "behaviour"]
    assert any("6 ran out of its time budget and are left out" in d for d in behaviour), behaviour
    assert record["outcome"] == "kept" and len(record["methods"]) == 1, record
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert spent < 8, f"{spent:.1f} s of CPU"
