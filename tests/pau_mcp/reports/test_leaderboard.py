"""`pau-mcp leaderboard`: runs of the scripted model ranked into a page and results.json, rendered in Chromium."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from browser import open_page
from click.testing import CliRunner
from scripted_runs import scripted_run

from pau_mcp.cli import main
from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox


@pytest.fixture(scope="module")
def board(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs of the scripted model: two epochs of one model, one run of another, the first model on variants of its
    methods, and the probe; ranked into a leaderboard."""
    root = tmp_path_factory.mktemp("board")
    suites = root / "suites"
    # Made after the model's release (the capability row below): scores on it are fresh; on builtin, unknown.
    made = datetime(2026, 1, 5, tzinfo=UTC)
    variants = Suite.create(suites, SuiteInfo(name="bvar", dataset="variants of builtin", created=made))
    dates = root / "dates.json"
    dates.write_text('{"models": [{"match": ["agent"], "released": "2025-06-01"}]}')
    for number in (1, 2):
        variants.save(freeze_method(Method(
            id=f"bvar/v00{number}", header="def test_func(arg0):", params=["arg0"],
            source="def test_func(arg0):\n    return arg0\n", description="Returns its argument unchanged.",
            tests=[Case(input=f"({v},)") for v in range(1, 9)],
            examples=[Case(input="(5,)")], provenance=Provenance(dataset="t", variant_of=f"builtin/b00{number}"),
            tags=Tags(arity=1),
        ), sandbox))  # fmt: skip
    manifests = ("--manifests", str(suites))
    scripted_run(root, "a", "--epochs", "2", *manifests)
    scripted_run(root, "b", *manifests, model="openai/other")
    scripted_run(root, "a-var", "--suite", "bvar", *manifests, methods=())
    probe = CliRunner().invoke(
        main, ["eval", "--agent", "probe", "--run", "p", "--methods", "builtin/b001", "--budget", "2", "--no-score",
               "--data-dir", str(root), "--db", str(root / "runs.db")],
    )  # fmt: skip
    assert probe.exit_code == 0, probe.output
    out = root / "board"
    ranked = CliRunner().invoke(
        main, ["leaderboard", "a", "b", "a-var", "p", "--out", str(out), "--db", str(root / "runs.db"),
               "--resamples", "2000", "--model-capabilities", str(dates), *manifests],
    )  # fmt: skip
    assert ranked.exit_code == 0, ranked.output
    assert "4 rows from 5 run(s)" in ranked.output
    return out


def test_results_json_has_a_row_per_model_protocol_and_suite_with_intervals_pass_hat_k_costs_and_the_gap(
    board: Path,
) -> None:
    results = json.loads((board / "results.json").read_text())
    rows = {(r["model"], r["suite"]): r for r in results["rows"]}
    assert set(rows) == {("openai/agent", "builtin"), ("openai/other", "builtin"), ("openai/agent", "bvar"),
                         ("", "builtin")}  # fmt: skip
    a = rows[("openai/agent", "builtin")]
    assert a["runs"] == ["a-epoch1", "a-epoch2"] and a["epochs"] == 2 and a["done"] == 4
    assert a["judge"]["mean"] == 3.0 and a["judge"]["low"] == a["judge"]["high"] == 3.0
    assert a["codematch"]["n"] == 2 and a["codematch"]["low"] <= a["codematch"]["mean"] <= a["codematch"]["high"]
    assert a["pass_hat_k"] == 0.0  # the scripted code writer's `return arg0` passes neither method
    assert a["tokens"] > 0 and a["seconds"] > 0 and a["queries_mean"] == 2
    assert (a["malformed_actions"], a["zero_query_episodes"]) == (0, 0)
    variant = rows[("openai/agent", "bvar")]
    assert variant["variant_of"] == "builtin" and variant["codematch"]["mean"] == 1.0
    gap = a["memorisation_gap"]
    assert gap["variant_suite"] == "bvar" and gap["pairs"] == 2
    assert gap["mean"] == pytest.approx(a["codematch"]["mean"] - 1.0)
    assert rows[("openai/other", "builtin")]["memorisation_gap"] is None
    assert (variant["freshness"], a["freshness"], rows[("openai/other", "builtin")]["freshness"]) == (
        "fresh",
        "unknown",
        "unknown",
    )
    assert (
        variant["freshness_reason"]
        == "suite bvar was created on 2026-01-05, after openai/agent was released 2025-06-01"
    )
    assert rows[("", "builtin")]["codematch"]["mean"] is None
    # Sorted by code match, highest first; rows without it last. Equal scores' intervals overlap.
    assert [r["suite"] for r in results["rows"]][0] == "bvar" and results["rows"][-1]["model"] == ""
    assert results["rows"][1]["overlaps_next"] is True


@pytest.mark.parametrize("width", [1280, 800])
def test_the_page_renders_every_row_and_the_plot_without_overflowing_the_window(board: Path, width: int) -> None:
    page = open_page(
        (board / "index.html").as_uri(),
        [
            {"wait_selector": "#board tbody tr"},
            {"eval": "document.querySelectorAll('#board tbody tr').length"},
            {"eval": "document.documentElement.scrollWidth <= document.documentElement.clientWidth"},
            {"eval": "document.querySelectorAll('svg.plot circle').length"},
            {"eval": "document.querySelector('svg.plot').getBoundingClientRect().right <= window.innerWidth"},
            {"eval": "[...document.querySelectorAll('#board tbody tr')].map(r => r.cells[1].innerText)"},
        ],
        width=width,
    )
    rows, fits, points, plot_fits, models = page["values"]
    assert rows == 4 and points == 3 and fits and plot_fits
    assert models[-1] == "(no model)"
    assert not page["errors"]


def test_clicking_a_heading_sorts_by_it_and_renumbers_the_rows(board: Path) -> None:
    page = open_page(
        (board / "index.html").as_uri(),
        [
            {"wait_selector": "#board tbody tr"},
            {"eval": "document.querySelector('th[data-sort=cost]').click()"},
            {
                "eval": "[...document.querySelectorAll('#board tbody tr')].map(r => [r.cells[0].innerText, "
                "r.cells[11].innerText])"
            },
            {"eval": "document.querySelector('#sorted').innerText"},
        ],
    )
    ranked, sorted_by = page["values"][1:]
    costs = [float(cost) for _, cost in ranked]
    assert [rank for rank, _ in ranked] == ["1", "2", "3", "4"] and costs == sorted(costs)
    assert sorted_by == "cost"
