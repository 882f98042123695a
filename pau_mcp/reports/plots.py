"""Report plots with matplotlib: score distributions, interactive against in-context, and the paper's analyses.

Figures are drawn with matplotlib's object API on the Agg canvas, never
through ``pyplot``: no global backend is switched, no window can open, and
nothing is shared between calls. Run names are long (``builtin-paper-
interactive-openai-gpt-4o-mini``), so distributions are horizontal bars with
each name written out whole on the left, wrapped at its separators, and the
figure grows with the number of runs; no label is rotated, cut or overlapped.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from .data import KIND_TITLES, KINDS
from .report import Report
from .stats import CODEMATCH_BUCKETS, JUDGE_SCORES, ScoreStats

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
_UPPER_TITLE = "Code match against its upper bound (the gold description) per run"
_CORRELATION_TITLE = "Rank correlation of per-method scores between runs (Spearman)"
_CONTRADICTION_TITLE = "Self-contradiction: episodes whose description disagrees with the agent's own observations"
_SIZES_TITLE = "Test-suite sizes: hidden test inputs per method"
_COVERAGE_TITLE = "Exploration coverage: share of the tests' lines the agent's calls ran, per run"
_SCATTER_TITLE = "Exploration coverage against code match, per episode"


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

    One distribution per score kind shown in the report, the mode comparison when runs pair up (with
    significance marks), and, when the report has them, the upper bound, the rank correlations, the
    self-contradiction shares and the suites' test-suite sizes.
    """
    bars = _bars(report)
    figures = []
    for kind in report.kinds:
        if not bars[kind]:  # no run has a score of this kind (only errors were recorded): nothing to draw
            continue
        keys = [str(s) for s in JUDGE_SCORES] if kind == "judge" else list(CODEMATCH_BUCKETS)
        colours = _JUDGE_COLOURS if kind == "judge" else _BUCKET_COLOURS
        figure = _stacked(bars[kind], keys, colours, _LEGENDS[kind], _TITLES[kind])
        figures.append((f"{kind}_distribution.png", _TITLES[kind], figure))
    if report.modes and _mode_kinds(report):
        figures.append(("modes.png", _MODES_TITLE, _modes(report)))
    if report.upper_bounds:
        figures.append(("upper_bound.png", _UPPER_TITLE, _upper_bound(report)))
    if any(c.rho is not None for c in report.correlations):
        figures.append(("rank_correlation.png", _CORRELATION_TITLE, _correlation(report)))
    if report.contradictions:
        figures.append(("self_contradiction.png", _CONTRADICTION_TITLE, _contradiction(report)))
    if report.coverage:
        rows = [_Bar(c.run, c.model or "(no model)", c.lines) for c in report.coverage]
        figure = _stacked(rows, list(CODEMATCH_BUCKETS), _BUCKET_COLOURS, "line coverage", _COVERAGE_TITLE)
        figures.append(("coverage_distribution.png", _COVERAGE_TITLE, figure))
        if any(c.points for c in report.coverage):
            figures.append(("coverage_vs_code_match.png", _SCATTER_TITLE, _coverage_scatter(report)))
    if report.suites:
        figures.append(("test_suite_sizes.png", _SIZES_TITLE, _sizes(report)))
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
        # A run with no score of a kind (a probe run is never judged) gets no empty bar.
        bars[kind] = [_Bar(s.name, s.model or "(no model)", s.scores[kind]) for s in by_model if s.scores[kind].n]
        if bars[kind] and report.max_stats is not None and kind in report.max_stats:
            bars[kind].append(_Bar("Max", "all runs", report.max_stats[kind]))
    return bars


def _wrap(text: str, width: int = _LABEL_WIDTH) -> str:
    """Lines of at most ``width`` characters, broken after separators; joined without breaks they are ``text``."""
    lines: list[str] = []
    line = ""
    for piece in re.findall(r"[^-_./ ]*[-_./ ]*", text):
        start = 0  # one word longer than a line: break it, cutting from the left (never copying what is left)
        while len(piece) - start > width:
            room = width - len(line)
            lines.append(line + piece[start : start + room])
            start, line = start + room, ""
        piece = piece[start:]
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


def _mode_kinds(report: Report) -> list[str]:
    """The kinds some run of a mode comparison was scored on: a panel for any other would be empty."""
    scored = {kind: {s.name for s in report.summaries if s.scores[kind].n} for kind in report.kinds}
    return [k for k in report.kinds if any({m.interactive, m.incontext} & scored[k] for m in report.modes)]


def _modes(report: Report) -> Figure:
    labels = [_wrap(m.model, 18) + (f"\n{m.agent}" if m.agent else "") for m in report.modes]
    kinds = _mode_kinds(report)
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
        top = 5.0 if kind == "judge" else 1.0
        for x, m in zip(xs, report.modes, strict=True):
            test = m.tests[kind]
            for offset, side, p in ((-0.2, 0, test.p_a_better), (0.2, 1, test.p_b_better)):
                if p is not None and p < report.significance:
                    axes.text(x + offset, m.means[kind][side] + top * 0.02, "*", ha="center", va="bottom", fontsize=14)
        axes.set_xticks(xs, labels, fontsize=8)
        axes.set_xlim(-0.6, len(xs) - 0.4)
        axes.set_ylim(0, top * 1.12)
        axes.set_title(f"{KIND_TITLES[kind].rsplit(' (', 1)[0].lower()} (mean)", fontsize=10)
        axes.legend(fontsize=8)
    figure.suptitle(f"{_MODES_TITLE} (* p < {report.significance:g}, paired bootstrap)", fontsize=10)
    return figure


def _upper_bound(report: Report) -> Figure:
    bounds = report.upper_bounds
    labels = [f"{_wrap(u.run, 18)}\n(n={u.n})" for u in bounds]
    figure = Figure(figsize=(max(5.0, 1.4 * len(bounds) + 2), 4.6), layout="constrained")
    axes = figure.add_subplot()
    xs = list(range(len(bounds)))
    axes.bar([x - 0.2 for x in xs], [u.codematch for u in bounds], width=0.4, label="code match", color="#4575b4")
    axes.bar([x + 0.2 for x in xs], [u.gold for u in bounds], width=0.4, label="gold description", color="#bdbdbd")
    axes.set_xticks(xs, labels, fontsize=8)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("mean code match")
    axes.legend(fontsize=8)
    figure.suptitle(_UPPER_TITLE, fontsize=10)
    return figure


def _correlation(report: Report) -> Figure:
    kinds = [k for k in report.kinds if any(c.kind == k and c.rho is not None for c in report.correlations)]
    names = list(dict.fromkeys(n for c in report.correlations for n in (c.a, c.b)))
    size = max(4.0, 0.7 * len(names) + 2.5)
    figure = Figure(figsize=(size * len(kinds), size), layout="constrained")
    for index, kind in enumerate(kinds):
        axes = figure.add_subplot(1, len(kinds), index + 1)
        grid = [[1.0 if a == b else float("nan") for b in names] for a in names]
        for c in report.correlations:
            if c.kind == kind and c.rho is not None:
                i, j = names.index(c.a), names.index(c.b)
                grid[i][j] = grid[j][i] = c.rho
        image = axes.imshow(grid, vmin=-1, vmax=1, cmap="RdBu")
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if not math.isnan(value):
                    axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
        short = [_wrap(n, 16) for n in names]
        axes.set_xticks(range(len(names)), short, fontsize=7, rotation=90)
        axes.set_yticks(range(len(names)), short, fontsize=7)
        axes.set_title(KIND_TITLES[kind].rsplit(" (", 1)[0].lower(), fontsize=9)
        figure.colorbar(image, ax=axes, shrink=0.7)
    figure.suptitle(_CORRELATION_TITLE, fontsize=10)
    return figure


def _contradiction(report: Report) -> Figure:
    rows = report.contradictions
    labels = [f"{_wrap(c.run)}\n(n={c.checked})" for c in rows]
    ys = list(range(len(rows)))
    figure = Figure(figsize=(8.0, max(2.6, 0.5 * len(rows) + 1.4)), layout="constrained")
    axes = figure.add_subplot()
    axes.barh(ys, [100 * c.share for c in rows], color="#d73027", height=0.6)
    axes.set_yticks(ys, labels, fontsize=8)
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlim(0, 100)
    axes.set_xlabel("episodes that contradict their own observations (%)")
    figure.suptitle(_CONTRADICTION_TITLE, fontsize=10)
    return figure


def _coverage_scatter(report: Report) -> Figure:
    figure = Figure(figsize=(7.0, 5.0), layout="constrained")
    axes = figure.add_subplot()
    markers = "osD^v<>"
    for index, summary in enumerate(c for c in report.coverage if c.points):
        xs = [100 * x for x, _ in summary.points]
        ys = [y for _, y in summary.points]
        axes.scatter(xs, ys, s=18, alpha=0.7, marker=markers[index % len(markers)], label=_wrap(summary.run, 40))
    axes.set_xlim(-3, 103)
    axes.set_ylim(-0.03, 1.03)
    axes.set_xlabel("share of the tests' lines the agent's calls ran (%)")
    axes.set_ylabel("code match")
    axes.legend(fontsize=7, loc="lower right")
    figure.suptitle(_SCATTER_TITLE, fontsize=10)
    return figure


def _sizes(report: Report) -> Figure:
    suites = report.suites
    figure = Figure(figsize=(7.0, 2.8 * len(suites) + 0.6), layout="constrained")
    for index, suite in enumerate(suites):
        axes = figure.add_subplot(len(suites), 1, index + 1)
        counts = sorted(suite.sizes.items())
        axes.bar([n for n, _ in counts], [k for _, k in counts], width=0.8, color="#4575b4")
        axes.set_title(f"{suite.name} ({suite.methods} methods)", fontsize=9)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlabel("test inputs per method", fontsize=8)
        axes.set_ylabel("methods", fontsize=8)
    figure.suptitle(_SIZES_TITLE, fontsize=10)
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    # No timestamp or version in the file: the same report gives the same bytes.
    figure.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return buffer.getvalue()
