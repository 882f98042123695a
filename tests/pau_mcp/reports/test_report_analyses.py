"""The paper's analyses in `pau-mcp report`: suite profiles, rank correlation, self-contradiction, upper bound,
significance marks, against values worked out by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM
from test_report_fixtures import CONFIG, build_store

from pau_mcp.llm import LLMClient
from pau_mcp.manifests import ManifestStore
from pau_mcp.reports import Report, build_report, load_runs
from pau_mcp.reports.analyses import suite_profile
from pau_mcp.reports.plots import draw_plots
from pau_mcp.reports.render import TableData, method_rows, report_tables
from pau_mcp.reports.stats import spearman
from pau_mcp.runstore import EpisodeResult, RunStore
from pau_mcp.scoring import CodeMatch, write_code
from wasm_runtime import Sandbox

ROOT = Path(__file__).resolve().parents[3]


def _table(report: Report, key: str) -> TableData:
    return next(t for t in report_tables(report) if t.key == key)


def _episodes(
    store: RunStore, name: str, config: dict[str, Any], scores: dict[str, dict[str, tuple[float, dict[str, Any]]]]
) -> None:
    """A run whose episodes are done with the given scores: kind -> (value, detail)."""
    run_id = store.ensure_run(name, "eval", config)
    store.plan_episodes(run_id, list(scores))
    for method, kinds in scores.items():
        store.start_episode(run_id, method)
        session = store.ensure_session(run_id, f"{name}/{method}", "internal")
        submission = store.record_submission(session, method, "d", None)
        for kind, (value, detail) in kinds.items():
            store.record_score(submission, kind, "scored", value, "m", detail)
        store.finish_episode(run_id, method, EpisodeResult(state="done", submission_id=submission, queries=1))


# -- rank correlation ---------------------------------------------------------------------------------


def test_spearman_matches_hand_computed_values_ties_included() -> None:
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert spearman([5, 4, 3], [4, 4, 1]) == pytest.approx(1.5 / 3**0.5)  # ranks 3,2,1 against 2.5,2.5,1
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [2, 2, 2]) is None and spearman([1], [1]) is None


def test_the_report_correlates_per_method_scores_of_every_pair_of_runs(tmp_path: Path) -> None:
    store = build_store(tmp_path / "runs.db")
    report = build_report(load_runs(store, ["alpha-int", "alpha-ctx"]), resamples=100)
    by_kind = {c.kind: c for c in report.correlations}
    # Judge over m1..m3 (m4 unscored in both, m5 failed in-context): 5,4,3 against 4,4,1.
    assert (by_kind["judge"].n, by_kind["judge"].rho) == (3, pytest.approx(1.5 / 3**0.5))
    # Code match over m1..m4: 1.0, 0.85, 0.5, 0.0 against 1.0, 0.6, 0.0, 0.4.
    assert (by_kind["codematch"].n, by_kind["codematch"].rho) == (4, pytest.approx(0.8))
    rows = _table(report, "correlations").rows
    assert ["alpha-int", "alpha-ctx", "judge", "3", "+0.866"] in rows
    assert "rank_correlation.png" in [name for name, _, _ in draw_plots(report)]


# -- self-contradiction ---------------------------------------------------------------------------------


def test_the_code_writers_code_is_checked_on_the_inputs_the_agent_observed(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    method = ManifestStore().method("builtin/b001")  # product of the non-zero digits
    observed = [("(234,)", "24"), ("(7,)", "7"), ("(105,)", "5"), ("(105,)", "5"), ("(not a literal", "?")]
    with FakeLLM() as fake:
        # Right on one- and two-digit inputs and those without zeros; 105 gives 0.
        fake.say(
            "```python\ndef test_func(arg0):\n    r = 1\n    for c in str(arg0):\n        r *= int(c)\n    return r\n```"
        )
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")

        async def go() -> CodeMatch:
            llm = LLMClient()
            try:
                return await write_code(llm, "openai/c", sandbox, method, "digits", examples=observed)
            finally:
                await llm.aclose()

        result = anyio.run(go)
    assert result.observed is not None
    # Three distinct valid inputs: 105 (seen twice) counts once; the broken literal is not run.
    assert (result.observed.checked, result.observed.disagree) == (3, 1) and result.observed.contradicts


def test_self_contradiction_is_flagged_per_episode_and_counted_per_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    observed = {
        "b/m1": {"checked": 4, "disagree": 0},
        "b/m2": {"checked": 5, "disagree": 2},
        "b/m3": {"checked": 3, "disagree": 1},
        "b/m4": None,  # scored without the agent's examples: not checked
    }
    _episodes(
        store, "run", CONFIG | {"mode": "interactive"},
        {m: {"codematch": (0.5, {"observed": o})} for m, o in observed.items()},
    )  # fmt: skip
    report = build_report(load_runs(store, ["run"]), resamples=10)
    (found,) = report.contradictions
    assert (found.checked, found.contradicting, found.inputs, found.disagree) == (3, 2, 12, 3)
    assert found.methods == ("b/m2", "b/m3") and found.share == pytest.approx(2 / 3)
    assert _table(report, "contradictions").rows == [["run", "openai/alpha", "3", "2", "66.7%", "12", "3 (25.0%)"]]
    flags = {row["method_id"]: row["observed_disagree"] for row in method_rows(report)}
    assert flags == {"b/m1": 0, "b/m2": 2, "b/m3": 1, "b/m4": ""}
    assert "self_contradiction.png" in [name for name, _, _ in draw_plots(report)]


# -- the upper bound ------------------------------------------------------------------------------------


def test_each_runs_code_match_is_shown_beside_the_gold_descriptions_on_the_same_methods(tmp_path: Path) -> None:
    store = build_store(tmp_path / "runs.db")
    gold = {"b/m1": 1.0, "b/m2": 1.0, "b/m3": 0.75, "b/m4": 0.5}  # no gold score for m5
    _episodes(store, "gold", {"suites": ["builtin"]}, {m: {"codematch_gold": (v, {})} for m, v in gold.items()})
    report = build_report(load_runs(store, ["alpha-int", "gold"]), resamples=10)
    (bound,) = report.upper_bounds
    # alpha-int's code match over m1..m4: 1.0, 0.85, 0.5, 0.0; the gold descriptions': 1.0, 1.0, 0.75, 0.5.
    assert (bound.run, bound.n) == ("alpha-int", 4)
    assert bound.codematch == pytest.approx(2.35 / 4) and bound.gold == pytest.approx(3.25 / 4)
    assert bound.ratio == pytest.approx(2.35 / 3.25)
    assert _table(report, "upper_bounds").rows[0][:6] == ["alpha-int", "openai/alpha", "4", "0.588", "0.812", "72.3%"]


# -- significance marks ---------------------------------------------------------------------------------


def test_a_significant_mode_difference_is_marked_in_the_table_and_the_figure(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    methods = [f"b/m{i}" for i in range(12)]
    _episodes(
        store, "int", CONFIG | {"mode": "interactive"}, {m: {"judge": (4.0 + i % 2, {})} for i, m in enumerate(methods)}
    )
    _episodes(
        store, "ctx", CONFIG | {"mode": "incontext"}, {m: {"judge": (2.0 + i % 2, {})} for i, m in enumerate(methods)}
    )
    _episodes(
        store,
        "int2",
        CONFIG | {"mode": "interactive", "model": "openai/beta"},
        {m: {"judge": (3.0, {})} for m in methods},
    )
    _episodes(
        store,
        "ctx2",
        CONFIG | {"mode": "incontext", "model": "openai/beta"},
        {m: {"judge": (3.0, {})} for m in methods},
    )
    report = build_report(load_runs(store, ["int", "ctx", "int2", "ctx2"]), resamples=500)
    rows = _table(report, "modes").rows
    assert [row[-1] for row in rows] == ["interactive *", "no"]
    (figure,) = [f for name, _, f in draw_plots(report) if name == "modes.png"]
    marks = [t.get_text() for axes in figure.axes for t in axes.texts]
    assert marks == ["*"]  # over alpha's interactive bar only


# -- suite profiles ---------------------------------------------------------------------------------------


def test_a_suite_profile_counts_methods_by_arguments_and_test_suite_size() -> None:
    methods = ManifestStore().suite("builtin").methods.values()
    profile = suite_profile("builtin", methods)
    assert profile.arity == {1: 33, 2: 25, 3: 5, 4: 2}
    assert profile.sizes == {20: 53, 21: 8, 22: 4}
    least, median, mean, most = profile.size_stats()
    assert (least, median, most) == (20, 20.0, 22) and mean == pytest.approx((53 * 20 + 8 * 21 + 4 * 22) / 65)


def test_pau_mcp_report_describes_any_suite_without_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "report", "--suite", "builtin", "--data-dir", str(tmp_path),
         "--plots", str(tmp_path / "plots")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Methods by number of arguments" in done.stdout and "33 (50.8%)" in done.stdout
    assert "Test-suite sizes" in done.stdout
    assert (tmp_path / "plots" / "test_suite_sizes.png").stat().st_size > 1000
    nothing = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "report", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip
    assert nothing.returncode == 2 and "--suite" in nothing.stderr


def test_under_the_reference_protocol_the_contradiction_share_is_over_the_unsolved_episodes(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    episodes = {  # code match and the check: m1 solved (0.9), m2 and m3 not
        "b/m1": {"codematch": (0.9, {"observed": {"checked": 4, "disagree": 1}})},
        "b/m2": {"codematch": (0.5, {"observed": {"checked": 5, "disagree": 2}})},
        "b/m3": {"codematch": (0.2, {"observed": {"checked": 3, "disagree": 0}})},
    }
    for name, protocol in (("ours", "pau-mcp"), ("theirs", "reference")):
        _episodes(store, name, CONFIG | {"mode": "interactive", "protocol": protocol}, episodes)
    report = build_report(load_runs(store, ["ours", "theirs"]), resamples=10)
    found = {c.run: c for c in report.contradictions}
    assert (found["ours"].checked, found["ours"].contradicting, found["ours"].among) == (3, 2, "checked")
    assert (found["theirs"].checked, found["theirs"].contradicting, found["theirs"].among) == (2, 1, "unsolved")
    assert found["theirs"].share == pytest.approx(1 / 2) and found["theirs"].methods == ("b/m2",)
    assert _table(report, "contradictions").rows[1][2] == "2 unsolved"
    assert any("among the checked episodes that failed" in note for note in report.notes)
