"""The report's memorisation table: a model's score on originals against its score on their variants."""

from __future__ import annotations

from pathlib import Path

from pau_mcp.reports import MethodScores, RunData, Score, build_report
from pau_mcp.reports.render import report_tables, to_markdown


def run(name: str, model: str, scores: dict[str, float]) -> RunData:
    methods = tuple(
        MethodScores(method_id=m, state="done", scores={"codematch": Score("scored", v)}) for m, v in scores.items()
    )
    return RunData(name, 1, {"model": model, "suite": name}, methods)


ORIGINS = {f"var/v{i}": f"orig/o{i}" for i in range(8)}


def test_a_drop_on_variants_is_shown_per_model_with_its_significance() -> None:
    remembering = [
        run("a-orig", "model-a", {f"orig/o{i}": 1.0 for i in range(8)}),
        run("a-var", "model-a", {f"var/v{i}": 0.2 for i in range(8)}),
    ]
    understanding = [
        run("b-orig", "model-b", {f"orig/o{i}": 0.7 for i in range(8)}),
        run("b-var", "model-b", {f"var/v{i}": 0.7 for i in range(8)}),
    ]
    report = build_report([*remembering, *understanding], resamples=2000, variant_origins=ORIGINS)
    gaps = {g.model: g for g in report.variants}
    assert gaps["model-a"].test.n == 8 and abs(gaps["model-a"].drop - 0.8) < 1e-9
    assert gaps["model-a"].test.p_a_better == 0.0
    assert gaps["model-b"].drop == 0.0 and gaps["model-b"].test.p_a_better == 1.0
    table = next(t for t in report_tables(report) if t.key == "variants")
    assert table.rows[0][:7] == ["model-a", "code match", "8", "1.000", "0.200", "+0.800", "0.0000"]
    assert table.rows[0][7] == "yes *" and table.rows[1][7] == "no"
    assert "Originals against their variants" in to_markdown(report)


def test_without_variants_there_is_no_such_table() -> None:
    report = build_report([run("a", "m", {"orig/o1": 1.0})], resamples=10, variant_origins={})
    assert report.variants == [] and all(t.key != "variants" for t in report_tables(report))


def test_pau_mcp_report_pairs_variants_with_their_originals_from_the_manifests(tmp_path: Path) -> None:
    import os

    from pau_command import run_pau
    from test_report_fixtures import CONFIG, add_run

    from pau_mcp.manifests import Method, Provenance, Suite, SuiteInfo, Tags
    from pau_mcp.runstore import RunStore

    for name in ("orig", "var"):
        suite = Suite.create(tmp_path / "suites", SuiteInfo(name=name))
        for i in range(4):
            origin = f"orig/o{i}" if name == "var" else None
            suite.save(Method(
                id=f"{name}/{name[0]}{i}", header="def test_func(arg0):", params=["arg0"],
                source="def test_func(arg0):\n    return arg0\n", description="d",
                provenance=Provenance(dataset="t", variant_of=origin), tags=Tags(arity=1),
            ))  # fmt: skip
    store = RunStore(tmp_path / "runs.db")
    add_run(store, "on-orig", CONFIG, {f"orig/o{i}": ("scored", 5.0, 1.0, True, 3) for i in range(4)})
    add_run(store, "on-var", CONFIG, {f"var/v{i}": ("scored", 2.0, 0.25, True, 3) for i in range(4)})
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "250"}
    ran = run_pau(
        "report", "on-orig", "on-var", "--db", tmp_path / "runs.db", "--manifests", tmp_path / "suites",
        "--resamples", "500", env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Originals against their variants" in ran.stdout
    assert "+0.750" in ran.stdout and "+3.000" in ran.stdout  # code match 1.0 -> 0.25, judge 5 -> 2
