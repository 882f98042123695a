"""Report renderings: PNG plots, self-contained HTML, Markdown and CSV, all from one computed report."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from test_report_fixtures import add_probe_run, build_store

from pau_mcp.reports import Report, build_report, load_runs
from pau_mcp.reports.plots import draw_plots, render_plots, write_plots
from pau_mcp.reports.render import method_rows, print_report, report_tables, run_rows, to_html, to_markdown, write_csv

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def report(tmp_path: Path) -> Report:
    store = build_store(tmp_path / "runs.db")
    try:
        return build_report(load_runs(store, ["alpha-int", "alpha-ctx"]), resamples=500, seed=0)
    finally:
        store.close()


def test_plots_are_written_as_non_empty_png_files(report: Report, tmp_path: Path) -> None:
    paths = write_plots(render_plots(report), tmp_path / "plots")
    assert sorted(p.name for p in paths) == [
        "codematch_distribution.png", "judge_distribution.png", "modes.png", "rank_correlation.png",
    ]  # fmt: skip
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        assert len(data) > 5_000, f"{path.name} is suspiciously small"


def test_the_mode_plot_is_left_out_when_no_runs_pair_up(report: Report) -> None:
    single = build_report(report.runs[:1], resamples=10)
    assert [p.name for p in render_plots(single)] == ["judge_distribution.png", "codematch_distribution.png"]


def test_html_is_one_self_contained_page(report: Report) -> None:
    page = to_html(report, render_plots(report))
    assert page.count("data:image/png;base64,") == 4
    assert 'src="http' not in page and "<script" not in page and "<link" not in page
    assert "<table>" in page and "alpha-int" in page and "3.50" in page
    assert "Unscored judge replies are left out" in page


@pytest.fixture()
def mixed(tmp_path: Path) -> Report:
    """The two paper runs (judged, code written from their descriptions) and a probe run (direct code only)."""
    store = build_store(tmp_path / "runs.db")
    add_probe_run(store)
    try:
        return build_report(
            load_runs(store, ["alpha-int", "alpha-ctx", "builtin-probe-interactive-none"]), resamples=50
        )
    finally:
        store.close()


def _cells(page: str, title: str) -> tuple[list[tuple[str, str]], list[list[tuple[str, str]]]]:
    """The header and rows of the HTML table under ``title``, each cell as (class attribute, text)."""
    table = page.split(f"<h2>{title}</h2>", 1)[1].split("</table>", 1)[0]
    cell = re.compile(r'<t[hd](?: class="([^"]*)")?>([^<]*)</t[hd]>')
    head, *rows = [cell.findall(row) for row in table.split("<tr>")[1:]]
    return head, rows


def test_the_html_page_shows_each_figure_title_once_and_no_empty_figure_part(mixed: Report) -> None:
    plots = render_plots(mixed)
    page = to_html(mixed, plots)
    headings = re.findall(r"<h2>([^<]*)</h2>", page)
    assert not {plot.title for plot in plots} & set(headings)  # the picture carries its title
    assert page.count("<figure>") == len(plots)
    drawn = {name: figure for name, _, figure in draw_plots(mixed)}
    panels = [axes.get_title() for axes in drawn["modes.png"].axes]
    assert panels == ["judge score (mean)", "code match (mean)"]  # no direct-code panel: no paper run has one
    for name in ("judge_distribution.png", "codematch_distribution.png", "direct_distribution.png"):
        labels = [label.get_text() for axes in drawn[name].axes for label in axes.get_yticklabels()]
        assert labels and not any("(n=0)" in label for label in labels), labels  # no empty bar for a run


def test_the_html_tables_align_text_left_and_numbers_right_and_scroll_inside_their_box(mixed: Report) -> None:
    page = to_html(mixed)
    head, rows = _cells(page, "Runs")
    aligned = {text: classes for classes, text in head}
    assert all(aligned[c] == "" for c in ("run", "kind", "protocol", "model", "agent", "mode", "suite"))
    assert all(aligned[c] == "num" for c in ("done", "failed", "queries", "input tokens", "cost ($)"))
    assert "th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left;" in page
    assert re.search(r"td\.num \{ text-align: right;", page)
    assert page.count('<div class="table"><table>') == page.count("<table>") > 5
    assert "div.table { overflow-x: auto;" in page


def test_a_run_never_judged_shows_no_judge_mean_and_a_pair_without_a_score_no_row(mixed: Report) -> None:
    page = to_html(mixed)
    _, rows = _cells(page, "Judge score (1-5)")
    probe = next(row for row in rows if row[0][1] == "builtin-probe-interactive-none")
    assert [text for _, text in probe[1:5]] == ["0", "n/a", "n/a", "n/a"]
    _, rows = _cells(page, "Direct code (0-1)")
    paper = next(row for row in rows if row[0][1] == "alpha-int")
    assert [text for _, text in paper[1:4]] == ["0", "n/a", "n/a"]
    _, rows = _cells(page, "Interactive against in-context")
    assert [row[2][1] for row in rows] == ["judge", "code match"]
    _, rows = _cells(page, "Paired bootstrap")
    assert "direct code" not in [row[2][1] for row in rows if {row[0][1], row[1][1]} == {"alpha-int", "alpha-ctx"}]


def test_markdown_holds_every_table_and_the_unscored_rule(report: Report) -> None:
    text = to_markdown(report)
    for title in (
        "## Runs",
        "## Judge score (1-5)",
        "## Code match (0-1)",
        "## Interactive against in-context",
        "## Paired bootstrap",
        "## Notes",
    ):
        assert title in text
    judge_row = next(line for line in text.splitlines() if line.startswith("| alpha-int | 4 |"))
    assert judge_row == "| alpha-int | 4 | 3.50 | 1.12 | 75.0% | 0.0% | 25.0% | 25.0% | 25.0% | 25.0% | 1 | 0 |"
    assert re.search(r"\| Max \(2 runs\) \| 4 \| 3\.50 \|", text)
    assert "Unscored judge replies are left out" in text


def test_every_layout_shows_the_same_tables(report: Report) -> None:
    titles = [t.title for t in report_tables(report)]
    buffer = io.StringIO()
    print_report(report, Console(file=buffer, width=250))
    terminal, markdown, page = buffer.getvalue(), to_markdown(report), to_html(report)
    for title in titles:
        assert title in terminal and title in markdown and title in page


def test_run_csv_has_one_row_of_raw_numbers_per_run(report: Report, tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    write_csv(run_rows(report), path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [r["run"] for r in rows] == ["alpha-int", "alpha-ctx"]
    first = rows[0]
    assert float(first["judge_mean"]) == pytest.approx(3.5)
    assert (first["judge_5"], first["judge_unscored"], first["unscored_as_one"]) == ("1", "1", "0")
    assert float(first["codematch_mean"]) == pytest.approx(0.51)
    assert (first["codematch_100"], first["codematch_80_100"]) == ("1", "1")
    assert rows[1]["failed"] == "1"


def test_method_csv_has_one_row_per_run_and_method(report: Report, tmp_path: Path) -> None:
    path = tmp_path / "methods.csv"
    write_csv(method_rows(report), path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == 10
    failed = next(r for r in rows if r["run"] == "alpha-ctx" and r["method_id"] == "b/m5")
    assert (failed["state"], failed["judge"], failed["error"]) == ("failed", "", "the agent crashed")
    unscored = next(r for r in rows if r["run"] == "alpha-int" and r["method_id"] == "b/m4")
    assert (unscored["judge_status"], unscored["judge"], unscored["codematch"]) == ("unscored", "", "0.0")
