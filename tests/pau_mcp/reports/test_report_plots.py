"""Plot labels stay legible with long run names: whole names, wrapped at separators, never overlapping or cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from test_report_fixtures import CONFIG, INCONTEXT, INTERACTIVE, add_run

from pau_mcp.reports import Report, build_report, load_runs
from pau_mcp.reports.plots import draw_plots, render_plots
from pau_mcp.runstore import RunStore

LONG = [
    "builtin-paper-interactive-openai-gpt-4o-mini-2024-07-18",
    "builtin-paper-incontext-openai-gpt-4o-mini-2024-07-18",
    "builtin-tools-interactive-anthropic-claude-haiku-4-5-20251001-with-a-retry",
]
MODELS = ["openai/gpt-4o-mini-2024-07-18", "openai/gpt-4o-mini-2024-07-18", "anthropic/claude-haiku-4-5-20251001"]


@pytest.fixture()
def report(tmp_path: Path) -> Report:
    store = RunStore(tmp_path / "runs.db")
    modes = ["interactive", "incontext", "interactive"]
    for name, model, mode, episodes in zip(LONG, MODELS, modes, [INTERACTIVE, INCONTEXT, INTERACTIVE], strict=True):
        add_run(store, name, CONFIG | {"model": model, "mode": mode}, episodes)
    try:
        return build_report(load_runs(store, LONG), resamples=50)
    finally:
        store.close()


def _drawn(figure: Figure):  # type: ignore[no-untyped-def]
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def _assert_legible(figure: Figure, labels, names: list[str], line_limit: int) -> None:  # type: ignore[no-untyped-def]
    renderer = _drawn(figure)
    texts = [label.get_text() for label in labels]
    for name in names:
        assert any(name in text.replace("\n", "") for text in texts), f"{name} is not whole in {texts}"
    for text in texts:
        assert all(len(line) <= line_limit for line in text.splitlines()), text
    boxes = [label.get_window_extent(renderer) for label in labels]
    page = figure.bbox
    for label, box in zip(labels, boxes, strict=True):
        assert label.get_fontsize() >= 8
        assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1
    for index, box in enumerate(boxes):
        for other in boxes[index + 1 :]:
            assert not box.overlaps(other), "two labels overlap"


def test_distribution_plots_show_every_long_run_name_whole_and_apart(report: Report) -> None:
    drawn = {name: figure for name, _, figure in draw_plots(report)}
    for kind in ("judge", "codematch"):
        axes = drawn[f"{kind}_distribution.png"].axes[0]
        _assert_legible(drawn[f"{kind}_distribution.png"], axes.get_yticklabels(), [*LONG, "Max"], 30)
        others = [t.get_text() for t in axes.texts]
        assert MODELS[0] in others and MODELS[2] in others, "each model names its group of runs"


def test_the_mode_plot_names_each_long_model_whole(report: Report) -> None:
    (figure,) = [figure for name, _, figure in draw_plots(report) if name == "modes.png"]
    for axes in figure.axes:
        _assert_legible(figure, axes.get_xticklabels(), [MODELS[0]], 30)


def test_rendered_plots_are_the_drawn_figures_as_png(report: Report) -> None:
    plots = render_plots(report)
    assert [p.name for p in plots] == [name for name, _, _ in draw_plots(report)]
    assert all(p.png.startswith(b"\x89PNG") and len(p.png) > 5_000 for p in plots)
