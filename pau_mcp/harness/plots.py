"""Report plots with matplotlib: score distributions per run, and interactive against in-context.

Figures are drawn with matplotlib's object API on the Agg canvas, never
through ``pyplot``: no global backend is switched, no window can open, and
nothing is shared between calls. Run names are long (``builtin-paper-
interactive-openai-gpt-4o-mini``), so distributions are horizontal bars with
each name written out whole on the left, wrapped at its separators, and the
figure grows with the number of runs; no label is rotated, cut or overlapped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from pau_mcp.harness.report import KIND_TITLES, KINDS, Report
from pau_mcp.harness.stats import CODEMATCH_BUCKETS, JUDGE_SCORES, ScoreStats

__all__ = ["Plot", "draw_plots", "render_plots", "write_plots"]

# Red (bad) to green (good); one colour per judge score and per code-match bucket.
_JUDGE_COLOURS = ("#d73027", "#fc8d59", "#fee08b", "#91cf60", "#1a9850")
_BUCKET_COLOURS = ("#a50026", "#f46d43", "#fdae61", "#d9ef8b", "#66bd63", "#006837")
_TITLES = {
    "judge": "Judge score distribution per run",
    "codematch": "Code match distribution per run",
    "codematch_gold": "Code match from the gold description: distribution per run",
    "direct": "Direct code (submitted by the agent): distribution per run",
}
_LEGENDS = {"judge": "judge score", "codematch": "code match", "codematch_gold": "code match", "direct": "direct code"}
_MODES_TITLE = "Interactive against in-context per model"
# Label lines at most this long: a name breaks after '-', '_', '.', '/' or a space, and only mid-word if it must.
_LABEL_WIDTH = 28
_INCH_PER_UNIT = 0.32  # vertical space per bar slot
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


def draw_plots(report: Report) -> list[tuple[str, str, Figure]]:
    """Every figure of a report, drawn but not rendered, as ``(file name, title, figure)``.

    One distribution per score kind shown in the report, and the mode comparison when runs pair up.
    """
    bars = _bars(report)
    figures = []
    for kind in report.kinds:
        keys = [str(s) for s in JUDGE_SCORES] if kind == "judge" else list(CODEMATCH_BUCKETS)
        colours = _JUDGE_COLOURS if kind == "judge" else _BUCKET_COLOURS
        figure = _stacked(bars[kind], keys, colours, _LEGENDS[kind], _TITLES[kind])
        figures.append((f"{kind}_distribution.png", _TITLES[kind], figure))
    if report.modes and report.kinds:
        figures.append(("modes.png", _MODES_TITLE, _modes(report)))
    return figures


def render_plots(report: Report) -> list[Plot]:
    """Every plot of a report as PNG: a distribution per score kind, and the mode comparison when there is one."""
    return [Plot(name, title, _png(figure)) for name, title, figure in draw_plots(report)]


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
        bars[kind] = [_Bar(s.name, s.model or "(no model)", s.scores[kind]) for s in by_model]
        if report.max_stats is not None and kind in report.max_stats:
            bars[kind].append(_Bar("Max", "all runs", report.max_stats[kind]))
    return bars


def _wrap(text: str, width: int = _LABEL_WIDTH) -> str:
    """Lines of at most ``width`` characters, broken after separators; joined without breaks they are ``text``."""
    lines: list[str] = []
    line = ""
    for piece in re.findall(r"[^-_./ ]*[-_./ ]*", text):
        while len(piece) > width:  # one word longer than a line: break it
            room = width - len(line)
            lines.append(line + piece[:room])
            piece, line = piece[room:], ""
        if len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    if line or not lines:
        lines.append(line)
    return "\n".join(lines)


def _label(bar: _Bar) -> str:
    return f"{_wrap(bar.label)}\n(n={bar.stats.n})"


def _layout(rows: Sequence[_Bar], labels: Sequence[str]) -> tuple[list[float], list[tuple[str, float]], float]:
    """Bar y positions (top down), group headings with their y, and the total height, in bar slots.

    Each bar gets room for its label's lines; each model's runs stand together under a heading naming the
    model, when there is more than one group.
    """
    headed = len({bar.group for bar in rows}) > 1
    ys: list[float] = []
    headings: list[tuple[str, float]] = []
    y = 0.0
    for index, (bar, label) in enumerate(zip(rows, labels, strict=True)):
        step = max(1.0, 0.42 * (label.count("\n") + 1))
        if headed and (index == 0 or bar.group != rows[index - 1].group):
            headings.append((bar.group, y + 0.35))
            y += 0.8
        ys.append(y + step / 2)
        y += step
    return ys, headings, y


def _stacked(rows: Sequence[_Bar], keys: list[str], colours: Sequence[str], legend: str, title: str) -> Figure:
    labels = [_label(bar) for bar in rows]
    ys, headings, total = _layout(rows, labels)
    figure = Figure(figsize=(9.0, max(3.2, total * _INCH_PER_UNIT + 1.6)), layout="constrained")
    axes = figure.add_subplot()
    lefts = [0.0] * len(rows)
    for key, colour in zip(keys, colours, strict=True):
        widths = [100 * bar.stats.share(key) for bar in rows]
        axes.barh(ys, widths, left=lefts, color=colour, label=key, height=0.7, edgecolor="white", linewidth=0.5)
        lefts = [left + w for left, w in zip(lefts, widths, strict=True)]
    axes.set_yticks(ys, labels, fontsize=8)
    axes.set_ylim(total, 0)  # the first run on top
    heading = blended_transform_factory(axes.transAxes, axes.transData)
    for group, y in headings:
        axes.text(0.005, y, group, transform=heading, fontsize=8, fontstyle="italic", va="center", ha="left")
    axes.set_xlim(0, 100)
    axes.set_xlabel("share of methods (%)")
    figure.suptitle(title, fontsize=10)
    axes.legend(title=legend, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title_fontsize=8)
    return figure


def _modes(report: Report) -> Figure:
    labels = [_wrap(m.model, 18) + (f"\n{m.agent}" if m.agent else "") for m in report.modes]
    kinds = report.kinds
    width = max(4.0, 1.5 * len(report.modes) + 1.5)
    figure = Figure(figsize=(width * len(kinds), 4.6), layout="constrained")
    xs = list(range(len(report.modes)))
    for index, kind in enumerate(kinds):
        axes = figure.add_subplot(1, len(kinds), index + 1)
        for offset, (mode, side) in zip((-0.2, 0.2), (("interactive", 0), ("in-context", 1)), strict=True):
            axes.bar(
                [x + offset for x in xs],
                [m.means[kind][side] for m in report.modes],
                width=0.4,
                label=mode,
                color=_MODE_COLOURS[mode],
            )
        axes.set_xticks(xs, labels, fontsize=8)
        axes.set_xlim(-0.6, len(xs) - 0.4)
        axes.set_ylim(0, 5.0 if kind == "judge" else 1.0)
        axes.set_title(f"{KIND_TITLES[kind].rsplit(' (', 1)[0].lower()} (mean)", fontsize=10)
        axes.legend(fontsize=8)
    figure.suptitle(_MODES_TITLE, fontsize=10)
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    # No timestamp or version in the file: the same report gives the same bytes.
    figure.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return buffer.getvalue()
