"""The leaderboard (``pau-mcp leaderboard RUN... --out DIR``): one row per model, protocol and suite (and agent and
mode, where the runs differ in them), as a static page and ``results.json``.

Each row pools its runs (an epoch group's epochs, or several runs of one configuration). A method's score in a row is
its mean over the row's counted scores of that method, so K epochs weigh a method once; the row's mean and its 95%
percentile bootstrap interval are over methods. Columns: the judge's mean and code match's, each with its interval;
pass^k of code match at or above the threshold (k = the epochs; with one, the share passing); mean queries, agent
tokens, cost and episode time; the failures a score hides (malformed actions, invalid arguments, refused calls,
zero-query episodes); the suite's creation date and the model's training cutoff where known; and the memorisation
gap: where the rows include a suite made with ``pau-mcp create --variants-of`` from this row's suite, by the same
model, agent, mode and protocol, the original's mean minus the variant's over the pairs both scored, with its
interval (bootstrap over pairs).

Rows are sorted by a chosen column; each row says whether its interval for that column overlaps the next row's (when
it does, the order of the two is not settled by these runs). The page has a plot of code match against cost, one
point per row with its interval. The page is self-contained: inline style, an inline SVG, and a short script that
sorts by a clicked heading and recomputes the overlaps.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pau_mcp import __version__
from pau_mcp.freshness import Freshness

from .conduct import RunConduct, run_conduct
from .data import ReportError, RunData, load_runs
from .epochs import DEFAULT_THRESHOLD, method_means, pass_hat
from .provenance import freshness_verdicts, model_cutoffs, suite_dates, variant_origins
from .stats import Interval, bootstrap_interval

if TYPE_CHECKING:
    from pau_mcp.manifests import ManifestStore
    from pau_mcp.runstore import RunStore

__all__ = [
    "SORTS",
    "Board",
    "BoardMade",
    "BoardRow",
    "build_board",
    "board_json",
    "board_html",
    "make_board",
    "write_board",
]

#: The columns a leaderboard may be sorted by, and whether larger is better.
SORTS: dict[str, bool] = {
    "codematch": True, "judge": True, "pass": True, "gap": False, "queries": False, "tokens": False, "cost": False,
    "time": False,
}  # fmt: skip


@dataclass(frozen=True)
class Gap:
    """The memorisation gap of a row: its originals' mean minus their variants' (same model, agent, mode, protocol).

    Attributes:
        variant_suite: The suite of the variants.
        pairs: Original and variant methods both scored.
        interval: The mean difference (original minus variant) and its 95% bootstrap interval over pairs.
    """

    variant_suite: str
    pairs: int
    interval: Interval


@dataclass(frozen=True)
class BoardRow:
    """One leaderboard row.

    Attributes:
        model: The agent's model ("" for the probe).
        agent: The agent.
        mode: ``interactive`` or ``incontext``.
        protocol: The protocol followed.
        suite: The suite.
        runs: The runs pooled.
        epochs: Epochs (runs per method): the k of pass^k.
        episodes: Episodes planned over those runs.
        done: Done episodes.
        failed: Failed episodes.
        judge: Judge mean over methods with its interval.
        codematch: Code match likewise.
        pass_hat: pass^k of code match at or above the threshold (None without code match).
        queries: Mean counted calls per done episode.
        tokens: The agent's tokens over finished episodes.
        cost_usd: What they cost.
        seconds: Episode time summed over finished episodes.
        conduct: Malformed actions, invalid arguments, refusals, zero-query episodes.
        suite_created: The suite's creation date, where its manifest records one.
        model_cutoff: The model's training cutoff, where the capability table records one.
        freshness: Whether the model's score on the suite is fresh (``pau_mcp.freshness``): ``fresh``, ``stale`` or
            ``unknown``, and why.
        variant_of: The suite this row's suite was made from, when it is a variant suite.
        gap: Its memorisation gap, when a variant suite of it was run by the same configuration.
    """

    model: str
    agent: str
    mode: str
    protocol: str
    suite: str
    runs: tuple[str, ...]
    epochs: int
    episodes: int
    done: int
    failed: int
    judge: Interval
    codematch: Interval
    pass_hat: float | None
    queries: float | None
    tokens: int
    cost_usd: float
    seconds: float
    conduct: RunConduct
    suite_created: str | None = None
    model_cutoff: str | None = None
    freshness: Freshness | None = None
    variant_of: str | None = None
    gap: Gap | None = None

    def value(self, column: str) -> float | None:
        """The row's number in a sortable column (None when it has none)."""
        values: dict[str, float | None] = {
            "codematch": self.codematch.mean if self.codematch.n else None,
            "judge": self.judge.mean if self.judge.n else None,
            "pass": self.pass_hat, "gap": self.gap.interval.mean if self.gap else None, "queries": self.queries,
            "tokens": float(self.tokens), "cost": self.cost_usd, "time": self.seconds,
        }  # fmt: skip
        return values[column]

    def interval(self, column: str) -> Interval | None:
        """The row's interval in a column that has one (the scores and the gap)."""
        if column == "codematch":
            return self.codematch
        if column == "judge":
            return self.judge
        if column == "gap" and self.gap is not None:
            return self.gap.interval
        return None


@dataclass(frozen=True)
class Board:
    """A whole leaderboard.

    Attributes:
        rows: Its rows, sorted.
        sort: The column sorted by.
        overlaps: For each row but the last, whether its interval in the sort column overlaps the next row's (None
            where either has none).
        threshold: Code match at or above which an episode passes.
        resamples: Bootstrap resamples per interval.
        seed: Bootstrap seed.
        generated: When it was made (ISO 8601).
        notes: Sentences under the table.
    """

    rows: tuple[BoardRow, ...]
    sort: str
    overlaps: tuple[bool | None, ...]
    threshold: float
    resamples: int
    seed: int
    generated: str
    notes: tuple[str, ...] = field(default_factory=tuple)


def build_board(
    runs: Sequence[RunData],
    *,
    sort: str = "codematch",
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = 10_000,
    seed: int = 0,
    variant_origins: Mapping[str, str] | None = None,
    suite_dates: Mapping[str, str | None] | None = None,
    cutoffs: Mapping[str, str | None] | None = None,
    freshness: Mapping[tuple[str, str], Freshness] | None = None,
) -> Board:
    """Pool ``runs`` into rows, compute every number, and sort.

    Args:
        runs: The runs (``load_runs``); runs without episodes (servers' runs) are left out.
        sort: One of ``SORTS``.
        threshold: Code match at or above which an episode passes.
        resamples: Bootstrap resamples per interval.
        seed: Bootstrap seed (each interval starts from it).
        variant_origins: Each variant method's id -> its original's (the manifests' provenance).
        suite_dates: Each suite's creation date, where known.
        cutoffs: Each model's training cutoff, where known.
        freshness: Each (model, suite)'s freshness verdict (``pau_mcp.freshness.assess_freshness``).

    Raises:
        ValueError: an unknown sort column, or no run with episodes.
    """
    if sort not in SORTS:
        raise ValueError(f"unknown sort column {sort!r}; choose from {', '.join(SORTS)}")
    groups: dict[tuple[str, str, str, str, str], list[RunData]] = {}
    for run in runs:
        if run.episodes:
            key = (run.setting("model"), run.setting("agent"), run.mode, run.protocol, run.suite)
            groups.setdefault(key, []).append(run)
    if not groups:
        raise ValueError("none of these runs has evaluation episodes: a leaderboard ranks `pau-mcp eval` runs")
    origins = dict(variant_origins or {})
    scores = {key: method_means(members, "codematch") for key, members in groups.items()}
    rows = []
    for key, members in groups.items():
        model, agent, mode, protocol, suite = key
        row = _row(key, members, threshold, resamples, seed)
        variant_of = _variant_suite_of(members, origins)
        gap = _gap(key, groups, scores, origins, resamples, seed)
        row = _with(row, (suite_dates or {}).get(suite), (cutoffs or {}).get(model), variant_of, gap)
        rows.append(replace(row, freshness=(freshness or {}).get((model, suite))))
    larger_first = SORTS[sort]
    present = [r for r in rows if r.value(sort) is not None]
    absent = [r for r in rows if r.value(sort) is None]
    present.sort(key=lambda r: (-(r.value(sort) or 0.0) if larger_first else (r.value(sort) or 0.0), r.model))
    ordered = tuple(present + absent)
    overlaps = tuple(_overlap(a.interval(sort), b.interval(sort)) for a, b in zip(ordered, ordered[1:], strict=False))
    notes = _notes(ordered, threshold)
    return Board(ordered, sort, overlaps, threshold, resamples, seed, datetime.now(UTC).isoformat(), notes)


@dataclass(frozen=True)
class BoardMade:
    """What ranking runs came to.

    Attributes:
        status: ``made`` or ``error`` (a run is not in the store, none has episodes, or the capability table
            cannot be read: the message says which).
        message: Why there is no board, on error.
        board: The board, when made.
        runs: The runs ranked.
    """

    status: Literal["made", "error"]
    message: str = ""
    board: Board | None = None
    runs: int = 0


def make_board(
    store: RunStore,
    names: Sequence[str],
    *,
    manifests: ManifestStore,
    capabilities: Path | None = None,
    sort: str = "codematch",
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = 10_000,
    seed: int = 0,
) -> BoardMade:
    """Rank the runs ``names`` (an ``eval --epochs`` run's name stands for its epochs), each row told where it came
    from: its suite's date and what its variants were made from (the manifests), its model's cutoff and freshness
    (the capability table at ``capabilities``; None: the packaged one)."""
    from pau_mcp.llm import CapabilityTable, LLMNotConfigured

    try:
        runs = load_runs(store, names)
        origins, dates = variant_origins(manifests, runs), suite_dates(manifests, runs)
        table = CapabilityTable.load(capabilities)
        board = build_board(
            runs, sort=sort, threshold=threshold, resamples=resamples, seed=seed, variant_origins=origins,
            suite_dates=dates, cutoffs=model_cutoffs(table, runs), freshness=freshness_verdicts(manifests, table, runs),
        )  # fmt: skip
    except (ReportError, ValueError, LLMNotConfigured) as exc:
        return BoardMade("error", str(exc))
    return BoardMade("made", board=board, runs=len(runs))


def _with(row: BoardRow, created: str | None, cutoff: str | None, variant_of: str | None, gap: Gap | None) -> BoardRow:
    return replace(row, suite_created=created, model_cutoff=cutoff, variant_of=variant_of, gap=gap)


def _row(
    key: tuple[str, str, str, str, str], runs: Sequence[RunData], threshold: float, resamples: int, seed: int
) -> BoardRow:
    model, agent, mode, protocol, suite = key
    methods = [m for run in runs for m in run.methods]
    done = [m for m in methods if m.done]
    finished = [m for m in methods if m.state in ("done", "failed")]
    judge = method_means(runs, "judge")
    codematch = method_means(runs, "codematch")
    epochs = _epochs(runs)
    queries = [m.queries for m in done if m.queries is not None]
    conduct = run_conduct([(m.state, m.queries, m.conduct) for m in methods], interactive=mode != "incontext")
    return BoardRow(
        model=model, agent=agent, mode=mode, protocol=protocol, suite=suite, runs=tuple(r.name for r in runs),
        epochs=epochs, episodes=len(methods), done=len(done), failed=sum(1 for m in methods if m.state == "failed"),
        judge=bootstrap_interval(list(judge.values()), resamples=resamples, seed=seed),
        codematch=bootstrap_interval(list(codematch.values()), resamples=resamples, seed=seed),
        pass_hat=pass_hat(runs, threshold), queries=sum(queries) / len(queries) if queries else None,
        tokens=sum(m.input_tokens + m.output_tokens for m in finished), cost_usd=sum(m.cost_usd for m in finished),
        seconds=sum(m.seconds or 0.0 for m in finished), conduct=conduct,
    )  # fmt: skip


def _epochs(runs: Sequence[RunData]) -> int:
    """Runs per method: the most times any method was played over the row's runs."""
    counts: dict[str, int] = {}
    for run in runs:
        for method in run.methods:
            counts[method.method_id] = counts.get(method.method_id, 0) + 1
    return max(counts.values(), default=0)


def _variant_suite_of(runs: Sequence[RunData], origins: Mapping[str, str]) -> str | None:
    """The suite the row's methods were made from, when they are variants."""
    found = {origins[m.method_id].split("/", 1)[0] for run in runs for m in run.methods if m.method_id in origins}
    return ", ".join(sorted(found)) if found else None


def _gap(
    key: tuple[str, str, str, str, str], groups: Mapping[tuple[str, str, str, str, str], Sequence[RunData]],
    scores: Mapping[tuple[str, str, str, str, str], Mapping[str, float]], origins: Mapping[str, str], resamples: int,
    seed: int,
) -> Gap | None:  # fmt: skip
    """Original minus variant code match over the pairs this row (the originals) and a variant row both scored."""
    mine = scores[key]
    for other, theirs in scores.items():
        if other[:4] != key[:4] or other == key:
            continue
        pairs = [(origins[v], v) for v in theirs if origins.get(v) in mine]
        if pairs:
            differences = [mine[o] - theirs[v] for o, v in sorted(pairs)]
            return Gap(other[4], len(pairs), bootstrap_interval(differences, resamples=resamples, seed=seed))
    return None


def _overlap(a: Interval | None, b: Interval | None) -> bool | None:
    if a is None or b is None:
        return None
    return a.overlaps(b)


def _notes(rows: Sequence[BoardRow], threshold: float) -> tuple[str, ...]:
    notes = [
        "Means are over methods, each method's score its mean over the row's runs (an epoch group's epochs count a "
        "method once); intervals are 95% percentile bootstrap intervals over methods.",
        f"pass^k: the chance that all k runs of a method pass (code match at least {threshold:g}); k is the row's "
        "epochs, and with one run it is the share of methods passing.",
    ]
    for row in rows:
        if row.conduct.every_episode_without_query:
            notes.append(f"{_label(row)}: every done episode made zero queries.")
    if any(row.gap for row in rows):
        notes.append(
            "Memorisation gap: the originals' mean code match minus their variants' (pau-mcp create --variants-of), "
            "by the same model, agent, mode and protocol, over the pairs both scored; an interval above 0 suggests the "
            "model remembers the originals."
        )
    return tuple(notes)


def _label(row: BoardRow) -> str:
    return f"{row.model or '(no model)'} {row.agent} {row.mode} on {row.suite}"


# -- results.json -------------------------------------------------------------------------------------------------


def board_json(board: Board) -> dict[str, Any]:
    """The leaderboard as ``results.json`` holds it: every number of every row, and how they were made."""
    return {
        "generated": board.generated, "pau_mcp_version": __version__, "sort": board.sort,
        "pass_threshold": board.threshold, "resamples": board.resamples, "seed": board.seed, "confidence": 0.95,
        "rows": [_row_json(row, board.overlaps[i] if i < len(board.overlaps) else None)
                 for i, row in enumerate(board.rows)],
        "notes": list(board.notes),
    }  # fmt: skip


def _interval_json(interval: Interval) -> dict[str, Any]:
    return {"n": interval.n, "mean": interval.mean if interval.n else None, "low": interval.low, "high": interval.high}


def _row_json(row: BoardRow, overlaps_next: bool | None) -> dict[str, Any]:
    return {
        "model": row.model, "agent": row.agent, "mode": row.mode, "protocol": row.protocol, "suite": row.suite,
        "runs": list(row.runs), "epochs": row.epochs, "episodes": row.episodes, "done": row.done,
        "failed": row.failed, "judge": _interval_json(row.judge), "codematch": _interval_json(row.codematch),
        "pass_hat_k": row.pass_hat, "queries_mean": row.queries, "tokens": row.tokens, "cost_usd": row.cost_usd,
        "seconds": row.seconds, **row.conduct.as_dict(),
        "every_episode_without_query": row.conduct.every_episode_without_query,
        "suite_created": row.suite_created, "model_cutoff": row.model_cutoff, "variant_of": row.variant_of,
        "freshness": None if row.freshness is None else row.freshness.status,
        "freshness_reason": None if row.freshness is None else row.freshness.reason,
        "memorisation_gap": None if row.gap is None else {
            "variant_suite": row.gap.variant_suite, "pairs": row.gap.pairs, **_interval_json(row.gap.interval)
        },
        "overlaps_next": overlaps_next,
    }  # fmt: skip


# -- the page ------------------------------------------------------------------------------------------------------

_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    # (heading, what the cell shows, sort key)
    ("#", "rank", None),
    ("model", "model", None),
    ("agent / mode", "agent", None),
    ("protocol", "protocol", None),
    ("suite", "suite", None),
    ("code match", "codematch", "codematch"),
    ("judge (1-5)", "judge", "judge"),
    ("pass^k", "pass", "pass"),
    ("overlaps next", "overlap", None),
    ("queries", "queries", "queries"),
    ("tokens", "tokens", "tokens"),
    ("cost ($)", "cost", "cost"),
    ("time (s)", "time", "time"),
    ("memorisation gap", "gap", "gap"),
    ("malformed / invalid / refused / 0-query", "conduct", None),
    ("suite created", "created", None),
    ("model cutoff", "cutoff", None),
    ("fresh", "fresh", None),
    ("runs", "runs", None),
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ci(interval: Interval, digits: int) -> str:
    if not interval.n:
        return "n/a"
    if interval.low is None or interval.high is None:
        return f"{interval.mean:.{digits}f}"
    return f"{interval.mean:.{digits}f} <small>[{interval.low:.{digits}f}, {interval.high:.{digits}f}]</small>"


def _cell(row: BoardRow, what: str, rank: int, overlap: bool | None) -> str:
    c = row.conduct
    shown = {
        "rank": str(rank), "model": _e(row.model or "(no model)"), "agent": _e(f"{row.agent} / {row.mode}"),
        "protocol": _e(row.protocol), "suite": _e(row.suite + (f" (variant of {row.variant_of})" if row.variant_of else "")),
        "codematch": _ci(row.codematch, 3), "judge": _ci(row.judge, 2),
        "pass": "n/a" if row.pass_hat is None else f"{row.pass_hat:.3f} <small>(k={row.epochs})</small>",
        "overlap": "" if overlap is None else ("yes" if overlap else "no"),
        "queries": "n/a" if row.queries is None else f"{row.queries:.1f}", "tokens": f"{row.tokens:,}",
        "cost": f"{row.cost_usd:.4f}", "time": f"{row.seconds:.1f}",
        "gap": "" if row.gap is None else f"{_ci(row.gap.interval, 3)} <small>vs {_e(row.gap.variant_suite)}, "
               f"{row.gap.pairs} pairs</small>",
        "conduct": f"{c.malformed_actions} / {c.invalid_arguments} / {c.refusals} / {c.zero_query}",
        "created": _e(row.suite_created or ""), "cutoff": _e(row.model_cutoff or ""),
        "fresh": "" if row.freshness is None else f'<span title="{_e(row.freshness.reason)}">'
                 f"{_e({'fresh': 'fresh', 'stale': 'not fresh', 'unknown': 'unknown'}[row.freshness.status])}</span>",
        "runs": _e(", ".join(row.runs)),
    }  # fmt: skip
    return shown[what]


def _data(row: BoardRow) -> str:
    """The row's sortable numbers and intervals, for the page's script."""
    values = {}
    for key in SORTS:
        value = row.value(key)
        interval = row.interval(key)
        values[key] = [value, interval.low if interval else None, interval.high if interval else None]
    return _e(json.dumps(values))


def board_html(board: Board) -> str:
    """The leaderboard as one self-contained page (no external file, no network)."""
    head = "".join(
        f"<th{f' data-sort={chr(34)}{key}{chr(34)} title={chr(34)}sort by {_e(title)}{chr(34)}' if key else ''}>"
        f"{_e(title)}{' ▾' if key == board.sort else ''}</th>"
        for title, _, key in _COLUMNS
    )
    body = []
    for i, row in enumerate(board.rows):
        overlap = board.overlaps[i] if i < len(board.overlaps) else None
        cells = "".join(f"<td>{_cell(row, what, i + 1, overlap)}</td>" for _, what, _ in _COLUMNS)
        body.append(f'<tr data-values="{_data(row)}">{cells}</tr>')
    notes = "".join(f"<li>{_e(note)}</li>" for note in board.notes)
    return _PAGE.format(
        generated=_e(board.generated),
        version=_e(__version__),
        sort=_e(board.sort),
        head=head,
        body="".join(body),
        plot=_plot(board),
        notes=notes,
        larger=json.dumps(SORTS),  # a constant of ours: JSON, no HTML escaping
    )


def _plot(board: Board) -> str:
    """Code match against cost, one point per row with its interval, as inline SVG."""
    points = [(r, r.cost_usd, r.codematch) for r in board.rows if r.codematch.n]
    width, height, left, bottom, top, right = 640, 360, 60, 40, 20, 20
    if not points:
        return '<p class="empty">No row has a code match to plot.</p>'
    most = max(cost for _, cost, _ in points) or 1.0

    def x(cost: float) -> float:
        return left + (width - left - right) * (cost / most)

    def y(score: float) -> float:
        return top + (height - top - bottom) * (1 - score)

    marks = []
    for number, (row, cost, interval) in enumerate(points, start=1):
        low, high = interval.low if interval.low is not None else interval.mean, interval.high or interval.mean
        marks.append(
            f'<line x1="{x(cost):.1f}" x2="{x(cost):.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}" class="ci"/>'
            f'<circle cx="{x(cost):.1f}" cy="{y(interval.mean):.1f}" r="5"><title>{_e(_label(row))}: code match '
            f"{interval.mean:.3f}, ${cost:.4f}</title></circle>"
            f'<text x="{x(cost) + 8:.1f}" y="{y(interval.mean) + 4:.1f}">{number}</text>'
        )
    ticks = "".join(
        f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>'
        f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
        for v in (0.0, 0.25, 0.5, 0.75, 1.0)
    )
    costs = "".join(
        f'<text x="{x(most * f):.1f}" y="{height - bottom + 16}" text-anchor="middle">{most * f:.4f}</text>'
        for f in (0.0, 0.5, 1.0)
    )
    return (
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="code match against cost" class="plot">'
        f"{ticks}{costs}"
        f'<text x="{(left + width - right) / 2}" y="{height - 4}" text-anchor="middle">cost ($) of the row\'s runs</text>'
        f'<text x="14" y="{(top + height - bottom) / 2}" transform="rotate(-90 14 {(top + height - bottom) / 2})" '
        f'text-anchor="middle">code match</text>{"".join(marks)}</svg>'
        '<p class="legend">Each point is a row (its number in the table), with its 95% interval.</p>'
    )


def write_board(board: Board, out_dir: Path) -> tuple[Path, Path]:
    """Write ``index.html`` and ``results.json`` into ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    page, data = out_dir / "index.html", out_dir / "results.json"
    page.write_text(board_html(board), encoding="utf-8")
    data.write_text(json.dumps(board_json(board), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return page, data


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>pau-mcp leaderboard</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 100%; }}
h1 {{ font-size: 1.4em; margin: 0 0 .3em; }}
.meta {{ color: #666; margin: 0 0 1em; }}
.scroll {{ overflow-x: auto; max-width: 100%; border: 1px solid #ddd; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ padding: .35em .6em; border-bottom: 1px solid #eee; text-align: right; vertical-align: top; }}
th {{ background: #f6f6f6; position: sticky; top: 0; white-space: nowrap; }}
th[data-sort] {{ cursor: pointer; text-decoration: underline dotted; }}
td:nth-child(2), td:nth-child(3), td:nth-child(4), td:nth-child(5), td:last-child,
th:nth-child(2), th:nth-child(3), th:nth-child(4), th:nth-child(5), th:last-child {{ text-align: left; }}
small {{ color: #666; }}
.plot {{ width: 100%; max-width: 640px; height: auto; display: block; margin-top: 1em; }}
.plot text {{ font-size: 11px; fill: #444; }} .plot circle {{ fill: #2b6cb0; }}
.plot .ci {{ stroke: #2b6cb0; stroke-width: 2; }} .plot .grid {{ stroke: #eee; }}
.legend, .empty {{ color: #666; }}
</style></head>
<body>
<h1>pau-mcp leaderboard</h1>
<p class="meta">Generated {generated} by pau-mcp {version}; sorted by <b id="sorted">{sort}</b>
(click a dotted heading to sort by it). Data: <a href="results.json">results.json</a>.</p>
<div class="scroll"><table id="board"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>
<h2>Code match against cost</h2>
{plot}
<ul class="notes">{notes}</ul>
<script>
const larger = {larger};
function overlap(a, b) {{
  if (a[1] === null || a[2] === null || b[1] === null || b[2] === null) return '';
  return a[1] <= b[2] && b[1] <= a[2] ? 'yes' : 'no';
}}
function sortBy(key) {{
  const body = document.querySelector('#board tbody');
  const rows = [...body.rows];
  const value = (r) => JSON.parse(r.dataset.values)[key][0];
  rows.sort((a, b) => {{
    const x = value(a), y = value(b);
    if (x === null) return y === null ? 0 : 1;
    if (y === null) return -1;
    return larger[key] ? y - x : x - y;
  }});
  rows.forEach((r, i) => {{
    body.appendChild(r);
    r.cells[0].textContent = String(i + 1);
    const next = rows[i + 1];
    r.cells[8].textContent = next ? overlap(JSON.parse(r.dataset.values)[key], JSON.parse(next.dataset.values)[key]) : '';
  }});
  document.querySelector('#sorted').textContent = key;
}}
document.querySelectorAll('th[data-sort]').forEach((th) => th.addEventListener('click', () => sortBy(th.dataset.sort)));
</script>
</body></html>
"""
