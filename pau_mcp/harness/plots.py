"""Report plots with matplotlib: score distributions per run, and interactive against in-context.

Figures are drawn with matplotlib's object API on the Agg canvas, never
through ``pyplot``: no global backend is switched, no window can open, and
nothing is shared between calls.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pau_mcp.harness.report import KINDS, Report
from pau_mcp.harness.stats import CODEMATCH_BUCKETS, JUDGE_SCORES, ScoreStats

__all__ = ["Plot", "render_plots", "write_plots"]

# Red (bad) to green (good); one colour per judge score and per code-match bucket.
_JUDGE_COLOURS = ("#d73027", "#fc8d59", "#fee08b", "#91cf60", "#1a9850")
_BUCKET_COLOURS = ("#a50026", "#f46d43", "#fdae61", "#d9ef8b", "#66bd63", "#006837")
_JUDGE_TITLE = "Judge score distribution per run"
_CODE_TITLE = "Code match distribution per run"
_MODES_TITLE = "Interactive against in-context per model"
_MODE_COLOURS = {"interactive": "#4575b4", "in-context": "#fdae61"}


@dataclass(frozen=True)
class Plot:
    """One rendered plot.

    Attributes:
        name: The file name (``judge_distribution.png``).
        title: What it shows.
        png: The PNG bytes.
    """

    name: str
    title: str
    png: bytes


@dataclass(frozen=True)
class _Bar:
    label: str
    group: str
    stats: ScoreStats


def render_plots(report: Report) -> list[Plot]:
    """Every plot of a report: the judge and code-match distributions, and the mode comparison when there is one."""
    bars = _bars(report)
    plots = [
        Plot(
            "judge_distribution.png",
            _JUDGE_TITLE,
            _stacked(bars["judge"], [str(s) for s in JUDGE_SCORES], _JUDGE_COLOURS, "judge score", _JUDGE_TITLE),
        ),
        Plot(
            "codematch_distribution.png",
            _CODE_TITLE,
            _stacked(bars["codematch"], list(CODEMATCH_BUCKETS), _BUCKET_COLOURS, "code match", _CODE_TITLE),
        ),
    ]
    if report.modes:
        plots.append(Plot("modes.png", _MODES_TITLE, _modes(report)))
    return plots


def write_plots(plots: Sequence[Plot], directory: Path) -> list[Path]:
    """Write each plot as a PNG file in ``directory`` (created if missing); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for plot in plots:
        path = directory / plot.name
        path.write_bytes(plot.png)
        paths.append(path)
    return paths


def _bars(report: Report) -> dict[str, list[_Bar]]:
    """Per kind, one bar per run, grouped by model (in first-seen order), then the Max bar."""
    order = list(dict.fromkeys(s.model or "(no model)" for s in report.summaries))
    by_model = sorted(report.summaries, key=lambda s: order.index(s.model or "(no model)"))
    bars = {}
    for kind in KINDS:
        bars[kind] = [_Bar(s.name, s.model or "(no model)", getattr(s, kind)) for s in by_model]
        if report.max_stats is not None:
            bars[kind].append(_Bar("Max", "all runs", report.max_stats[kind]))
    return bars


def _positions(bars: Sequence[_Bar]) -> list[float]:
    """Bar x positions with a gap between model groups, so each model's runs stand together."""
    positions, x = [], 0.0
    for index, bar in enumerate(bars):
        if index and bar.group != bars[index - 1].group:
            x += 0.6
        positions.append(x)
        x += 1.0
    return positions


def _stacked(rows: Sequence[_Bar], keys: list[str], colours: Sequence[str], legend: str, title: str) -> bytes:
    figure = Figure(figsize=(max(6.0, 1.1 * len(rows) + 3), 4.8), layout="constrained")
    axes = figure.add_subplot()
    xs = _positions(rows)
    bottoms = [0.0] * len(rows)
    for key, colour in zip(keys, colours, strict=True):
        heights = [100 * bar.stats.share(key) for bar in rows]
        axes.bar(xs, heights, bottom=bottoms, color=colour, label=key, width=0.8, edgecolor="white", linewidth=0.5)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    axes.set_xticks(xs, [f"{bar.label}\n(n={bar.stats.n})" for bar in rows], rotation=30, ha="right", fontsize=8)
    for group, centre in _group_centres(rows, xs):
        axes.annotate(group, (centre, 1.01), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8)
    axes.set_ylim(0, 100)
    axes.set_ylabel("share of methods (%)")
    figure.suptitle(title, fontsize=10)
    axes.legend(title=legend, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title_fontsize=8)
    return _png(figure)


def _group_centres(bars: Sequence[_Bar], xs: Sequence[float]) -> list[tuple[str, float]]:
    groups: dict[str, list[float]] = {}
    for bar, x in zip(bars, xs, strict=True):
        groups.setdefault(bar.group, []).append(x)
    return [(group, sum(v) / len(v)) for group, v in groups.items()]


def _modes(report: Report) -> bytes:
    figure = Figure(figsize=(max(7.0, 1.6 * len(report.modes) + 4), 4.2), layout="constrained")
    labels = [f"{m.model}\n{m.agent}" if m.agent else m.model for m in report.modes]
    xs = list(range(len(report.modes)))
    for index, (kind, title, top) in enumerate(
        (("judge", "judge score (mean)", 5.0), ("codematch", "code match (mean)", 1.0))
    ):
        axes = figure.add_subplot(1, 2, index + 1)
        for offset, (mode, side) in zip((-0.2, 0.2), (("interactive", 0), ("in-context", 1)), strict=True):
            axes.bar(
                [x + offset for x in xs],
                [m.means[kind][side] for m in report.modes],
                width=0.4,
                label=mode,
                color=_MODE_COLOURS[mode],
            )
        axes.set_xticks(xs, labels, fontsize=8)
        axes.set_ylim(0, top)
        axes.set_title(title, fontsize=10)
        axes.legend(fontsize=8)
    figure.suptitle(_MODES_TITLE, fontsize=10)
    return _png(figure)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    # No timestamp or version in the file: the same report gives the same bytes.
    figure.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return buffer.getvalue()
