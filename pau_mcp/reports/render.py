"""Report renderings: a rich terminal table, Markdown, CSV and one self-contained HTML page.

Every rendering starts from ``report_tables``, which formats a computed
``Report`` into plain tables of strings once; the terminal, Markdown and HTML
writers only lay those tables out. The CSV files carry raw numbers instead
(``run_rows``, ``method_rows``), for spreadsheets and scripts.
"""

from __future__ import annotations

import base64
import csv
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .analyses import SIZE_BINS
from .data import FRACTION_KINDS, KIND_TITLES, KINDS
from .labels import REPORTED_LABELS
from .report import Report, RunSummary
from .stats import CODEMATCH_BUCKETS, JUDGE_SCORES, BootstrapResult, ScoreStats, mean_and_std

if TYPE_CHECKING:  # plots loads matplotlib: only renderings that embed plots should pay for it
    from .plots import Plot

__all__ = [
    "TableData",
    "method_rows",
    "print_report",
    "report_tables",
    "run_rows",
    "to_html",
    "to_markdown",
    "write_csv",
]

_KIND_NAMES = {
    "judge": "judge",
    "codematch": "code match",
    "codematch_gold": "code match (gold description)",
    "direct": "direct code",
}
_BUCKET_SUFFIXES = dict(zip(CODEMATCH_BUCKETS, ("0_20", "20_40", "40_60", "60_80", "80_100", "100"), strict=True))
_KIND_CAPTIONS = {
    "codematch": "Share of test inputs on which code written from the description matches the hidden function",
    "codematch_gold": "Share of test inputs on which code written from the gold description matches the hidden function (each method's upper bound for code match)",
    "direct": "Share of test inputs on which code the agent submitted matches the hidden function",
}


@dataclass(frozen=True)
class TableData:
    """One formatted table: what every layout (terminal, Markdown, HTML) shows.

    Attributes:
        key: A stable identifier (``runs``, a score kind such as ``judge`` or ``direct``, ``modes``, ``pairs``,
            ``failures``, ``arguments``, ``sizes``, ``correlations``, ``contradictions``, ``upper_bounds``,
            ``variants``).
        title: The heading.
        columns: Column headings.
        rows: Cells as text, one list per row.
        caption: One sentence under the table, or "".
    """

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""


# -- formatting ---------------------------------------------------------------------------------


def _pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def _num(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def _mean(kind: str, value: float) -> str:
    """A mean or std: two decimals on the judge's 1-5 scale, three for fractions (as `eval` and `score` print)."""
    return _num(value, 2 if kind == "judge" else 3)


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_tables(report: Report) -> list[TableData]:
    """Every table of a report, formatted once, in display order."""
    tables = [_runs_table(report)] if report.runs else []
    tables += [_judge_table(report) if kind == "judge" else _fraction_table(report, kind) for kind in report.kinds]
    if report.upper_bounds:
        tables.append(_upper_bounds_table(report))
    if report.modes and report.kinds:
        tables.append(_modes_table(report))
    if report.pairs and report.kinds:
        tables.append(_pairs_table(report))
    if report.correlations:
        tables.append(_correlations_table(report))
    if report.contradictions:
        tables.append(_contradictions_table(report))
    if report.explorers:
        tables.append(_explorers_table(report))
    if report.knowledge:
        tables.append(_knowledge_table(report))
    if report.tasks:
        tables += [_tasks_table(report), _task_hops_table(report)]
    if report.coverage:
        tables.append(_coverage_table(report))
    if report.variants:
        tables.append(_variants_table(report))
    if any(s.returns for s in report.summaries):
        tables.append(_returns_table(report))
    if report.epochs:
        tables.append(_epochs_table(report))
    if any(s.failures is not None for s in report.summaries):
        tables.append(_failures_table(report))
    if report.suites:
        tables += [_arguments_table(report), _sizes_table(report)]
    return tables


def _runs_table(report: Report) -> TableData:
    columns = [
        "run",
        "kind",
        "protocol",
        "model",
        "agent",
        "mode",
        "suite",
        "done",
        "failed",
        "queries",
        "concluded",
        "malformed",
        "invalid args",
        "refused",
        "0-query",
        "input tokens",
        "output tokens",
        "cost ($)",
    ]
    rows = [
        [
            s.name, s.kind, s.protocol, s.model, s.agent, s.mode, s.suite, f"{s.done}/{s.planned}", str(s.failed),
            _num(s.queries_mean, 1), "n/a" if s.concluded_share is None else _pct(s.concluded_share),
            *_conduct_cells(s), f"{s.input_tokens:,}", f"{s.output_tokens:,}", _num(s.cost_usd, 4),
        ]
        for s in report.summaries
    ]  # fmt: skip
    caption = (
        "Queries and concluded are over done episodes; tokens and cost over done and failed ones. Malformed: replies "
        "that gave no usable action; invalid args: calls with unusable arguments; refused: calls the server refused "
        "(over budget, unknown tool), over done and failed episodes; 0-query: done episodes that made no query."
    )
    if any(not run.episodes for run in report.runs):
        caption += " A run without episodes counts its submissions (the latest per session and method) as done."
    return TableData("runs", "Runs", columns, rows, caption)


def _returns_table(report: Report) -> TableData:
    columns = ["run", "episodes", "mean return", "std", "min", "max"]
    rows = []
    for s in report.summaries:
        if s.returns:
            mean, std = mean_and_std(list(s.returns))
            rows.append([s.name, str(len(s.returns)), _num(mean, 3), _num(std, 3), _num(min(s.returns), 3),
                         _num(max(s.returns), 3)])  # fmt: skip
    caption = "An RL rollout's episodes are scored by their returns (the sum of their step rewards, docs/training.md)."
    return TableData("returns", "RL returns", columns, rows, caption)


def _conduct_cells(s: RunSummary) -> list[str]:
    """Malformed actions, invalid arguments, refusals and zero-query episodes (n/a for a run without episodes)."""
    c = s.conduct
    if not c.episodes:
        return ["n/a"] * 4
    return [f"{c.malformed_actions:,}", f"{c.invalid_arguments:,}", f"{c.refusals:,}", f"{c.zero_query}/{c.done}"]


def _epochs_table(report: Report) -> TableData:
    """Per group of epochs, one row per epoch: its mean and interval, pass@k and pass^k for k = its number."""
    columns = ["group", "epoch", "run", "seed", "n", "mean", "95% CI", "k", "pass@k", "pass^k", "consistency"]
    rows = []
    for group in report.epochs:
        for k, epoch in enumerate(group.epochs, start=1):
            i = epoch.interval
            shown = "n/a" if i.low is None or i.high is None else f"[{_num(i.low, 3)}, {_num(i.high, 3)}]"
            consistency = "" if k > 1 else ("n/a" if group.consistency is None else _pct(group.consistency))
            rows.append([
                group.group if k == 1 else "", str(epoch.index), epoch.run, "" if epoch.seed is None else str(epoch.seed),
                str(i.n), _num(i.mean, 3) if i.n else "n/a", shown, str(k), _pct(group.pass_at[k - 1]),
                _pct(group.pass_hat[k - 1]), consistency,
            ])  # fmt: skip
    kinds = {group.kind for group in report.epochs}
    score = " and ".join("code match" if kind == "codematch" else "direct code" for kind in sorted(kinds))
    caption = (
        f"An episode passes when its {score} is at least {report.pass_threshold:g} (--pass-threshold); a failed or "
        "unscored one does not. pass@k: at least one of k epochs passes; pass^k: all k pass (each the mean over the "
        "methods every epoch played of the unbiased estimator). Mean and 95% percentile bootstrap interval over each "
        "epoch's scored episodes. Consistency: the share of methods whose outcome is the same in every epoch."
    )
    return TableData("epochs", "Repeated episodes (epochs)", columns, rows, caption)


def _max_label(report: Report) -> str:
    return f"Max ({len(report.runs)} runs)"


def _judge_table(report: Report) -> TableData:
    columns = ["run", "n", "mean", "std", ">=3", *(str(s) for s in JUDGE_SCORES), "unscored", "no score"]
    rows = [_judge_cells(s.name, s.judge) + [str(s.judge_unscored), str(s.judge_missing)] for s in report.summaries]
    if report.max_stats is not None:
        rows.append(_judge_cells(_max_label(report), report.max_stats["judge"]) + ["", ""])
    return TableData("judge", KIND_TITLES["judge"], columns, rows, report.unscored_rule)


def _judge_cells(name: str, stats: ScoreStats) -> list[str]:
    if not stats.n:  # never judged: no mean of 0.00, no shares of nothing
        return [name, "0", *(["n/a"] * (3 + len(JUDGE_SCORES)))]
    return [
        name,
        str(stats.n),
        _mean("judge", stats.mean),
        _mean("judge", stats.std),
        _pct(stats.share_good),
        *(_pct(stats.share(str(s))) for s in JUDGE_SCORES),
    ]


def _fraction_table(report: Report, kind: str) -> TableData:
    columns = ["run", "n", "mean", "std", "=1.0", "<0.8", *CODEMATCH_BUCKETS, "no score"]
    rows = [_fraction_cells(kind, s.name, s.scores[kind]) + [str(s.missing[kind])] for s in report.summaries]
    if report.max_stats is not None:
        rows.append(_fraction_cells(kind, _max_label(report), report.max_stats[kind]) + [""])
    caption = f"{_KIND_CAPTIONS[kind]}; buckets are [low, high), 100% is exactly 1.0."
    return TableData(kind, KIND_TITLES[kind], columns, rows, caption)


def _fraction_cells(kind: str, name: str, stats: ScoreStats) -> list[str]:
    if not stats.n:  # never scored this way: no mean of 0.000
        return [name, "0", *(["n/a"] * (4 + len(CODEMATCH_BUCKETS)))]
    return [
        name, str(stats.n), _mean(kind, stats.mean), _mean(kind, stats.std), _pct(stats.share_good),
        _pct(stats.share_bad), *(_pct(stats.share(b)) for b in CODEMATCH_BUCKETS),
    ]  # fmt: skip


def _modes_table(report: Report) -> TableData:
    columns = [
        "model",
        "agent",
        "score",
        "interactive",
        "in-context",
        "difference",
        "n",
        "p(interactive better)",
        "p(in-context better)",
        f"p < {report.significance:g}",
    ]
    rows = []
    scored = _scored_runs(report)
    for m in report.modes:
        for kind in report.kinds:
            has = (m.interactive in scored[kind], m.incontext in scored[kind])
            if not any(has):  # neither run has this score (a paper agent's direct code): no row of zeros
                continue
            inter, incon = m.means[kind]
            test = m.tests[kind]
            digits = 2 if kind == "judge" else 3
            rows.append([
                m.model, m.agent, _KIND_NAMES[kind],
                f"{_mean(kind, inter) if has[0] else 'n/a'} ({m.interactive})",
                f"{_mean(kind, incon) if has[1] else 'n/a'} ({m.incontext})",
                f"{inter - incon:+.{digits}f}" if all(has) else "n/a", str(test.n),
                _p(test.p_a_better), _p(test.p_b_better), _significant(test, report.significance),
            ])  # fmt: skip
    caption = (
        "Means over each run's own scored episodes; p-values from the paired bootstrap over the n methods scored in "
        f"both; the last column names the better setting when its p is below {report.significance:g}."
    )
    return TableData("modes", "Interactive against in-context", columns, rows, caption)


def _scored_runs(report: Report) -> dict[str, set[str]]:
    """Per score kind, the runs with at least one score of it."""
    return {kind: {s.name for s in report.summaries if s.scores[kind].n} for kind in report.kinds}


def _significant(test: BootstrapResult, level: float) -> str:
    """Which side is reliably better: ``interactive *``, ``in-context *``, or ``no``."""
    if test.p_a_better is not None and test.p_a_better < level:
        return "interactive *"
    if test.p_b_better is not None and test.p_b_better < level:
        return "in-context *"
    return "no"


def _upper_bounds_table(report: Report) -> TableData:
    columns = ["run", "model", "n", "code match", "gold description", "share of the bound", "gap"]
    rows = [
        [
            u.run, u.model, str(u.n), _mean("codematch", u.codematch), _mean("codematch", u.gold),
            "n/a" if u.ratio is None else _pct(u.ratio), f"{u.codematch - u.gold:+.3f}",
        ]
        for u in report.upper_bounds
    ]  # fmt: skip
    caption = (
        "Code match of each run beside the code match of the gold descriptions (each method's upper bound, "
        "`pau-mcp score --gold`) over the n methods that have both."
    )
    return TableData("upper_bounds", "Code match against its upper bound", columns, rows, caption)


def _variants_table(report: Report) -> TableData:
    columns = ["model", "score", "pairs", "originals", "variants", "drop", "p(orig>var)", "significant"]
    rows = [
        [
            g.model, _KIND_NAMES[g.kind], str(g.test.n), _mean(g.kind, g.test.mean_a), _mean(g.kind, g.test.mean_b),
            f"{g.drop:+.3f}", _p(g.test.p_a_better),
            "yes *" if g.test.p_a_better is not None and g.test.p_a_better < report.significance else "no",
        ]
        for g in report.variants
    ]  # fmt: skip
    caption = (
        "Each model's mean score on original methods and on the variants made from them (pau-mcp create "
        "--variants-of), over the pairs it scored both of; a significant drop is evidence of memorised answers."
    )
    return TableData("variants", "Originals against their variants (memorisation)", columns, rows, caption)


def _correlations_table(report: Report) -> TableData:
    columns = ["run A", "run B", "score", "n", "Spearman rho"]
    rows = [
        [c.a, c.b, _KIND_NAMES[c.kind], str(c.n), "n/a" if c.rho is None else f"{c.rho:+.3f}"]
        for c in report.correlations
    ]
    caption = "Rank correlation of per-method scores between runs, over the n methods both scored."
    return TableData("correlations", "Rank correlation across runs", columns, rows, caption)


def _contradictions_table(report: Report) -> TableData:
    columns = ["run", "model", "checked", "contradicting", "share", "observed inputs", "disagreeing"]
    rows = [
        [
            c.run, c.model, f"{c.checked} unsolved" if c.among == "unsolved" else str(c.checked), str(c.contradicting),
            _pct(c.share), str(c.inputs),
            f"{c.disagree} ({_pct(c.disagree / c.inputs if c.inputs else 0)})",
        ]
        for c in report.contradictions
    ]  # fmt: skip
    caption = (
        "Episodes whose description, written as code by the code writer, disagrees with what the agent itself "
        "observed (checked: episodes scored with the agent's examples)."
    )
    return TableData("contradictions", "Self-contradiction", columns, rows, caption)


def _maybe_num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else _num(value, digits)


def _explorers_table(report: Report) -> TableData:
    columns = [
        "run", "agent", "model", "done", "judge", "code match", "queries", "tokens / episode", "concluded",
        "concluded, check disagreeing",
    ]  # fmt: skip
    rows = [
        [
            e.run, e.agent, e.model, str(e.done), _maybe_num(e.judge, 2), _maybe_num(e.codematch, 3),
            _maybe_num(e.queries, 1), "n/a" if e.tokens is None else f"{e.tokens:,.0f}", str(e.concluded),
            "n/a" if e.disagreeing_share is None else f"{e.disagreeing} of {e.checked} ({_pct(e.disagreeing_share)})",
        ]
        for e in report.explorers
    ]  # fmt: skip
    caption = (
        "Explorers side by side. The last column counts the episodes an agent ended by itself while code written "
        "from its description still disagreed with something it had observed (the scorer's check, the same for every "
        "agent; checked: concluded episodes scored with the agent's examples). Tokens include an observer's own code "
        "writer."
    )
    return TableData("explorers", "Explorers compared", columns, rows, caption)


def _knowledge_table(report: Report) -> TableData:
    columns = ["run", "model", "knowledge", "n", "explored description", "n (gold)", "gold description"]
    rows = [
        [
            k.run, k.model, k.knowledge, str(k.explored[0]), _maybe(("codematch"), k.explored[1]), str(k.gold[0]),
            _maybe("codematch", k.gold[1]),
        ]
        for k in report.knowledge
    ]  # fmt: skip
    caption = (
        "Code match when the code writer is handed only some knowledge (pau-mcp score --knowledge): the function's "
        "header (signature), a description (the run's, or with --gold the gold one) and calls with their results "
        "(examples: the agent's, else the initial examples). Combinations without a description do not depend on it."
    )
    return TableData("knowledge", "Which knowledge matters", columns, rows, caption)


def _tasks_table(report: Report) -> TableData:
    columns = ["run", "model", "docs", "answered", "accuracy", "answer matched", "calls verified", "failed", "calls"]
    rows = []
    for t in report.tasks:
        answered, matched = t.answers
        asked, verified = t.verified
        rows.append([
            t.run, t.model, t.docs, str(answered), "n/a" if t.accuracy is None else _pct(t.accuracy),
            f"{matched} ({_pct(matched / answered if answered else 0)})",
            f"{verified} of {asked}" if asked else "n/a", str(t.failed), _maybe_num(t.calls, 1),
        ])  # fmt: skip
    caption = (
        "Tasks over the hidden tools (pau-mcp eval --mode tasks), with the tools documented by docs: examples (header "
        "and initial examples), none (header only), gold, or a run's learned descriptions. A task is correct when its "
        "answer equals the one frozen from the gold functions and, where it asks for the calls, re-executing them "
        "gives that answer; calls: mean counted tool calls per task."
    )
    return TableData("tasks", "Tasks by documentation", columns, rows, caption)


def _task_hops_table(report: Report) -> TableData:
    hops = sorted({h for t in report.tasks for h in t.by_hops})
    columns = ["run", "docs", *(f"{h} hop{'s' * (h != 1)}" for h in hops), "all"]
    rows = []
    for t in report.tasks:
        cells = []
        for h in hops:
            n, correct = t.by_hops.get(h, (0, 0))
            cells.append(f"{_pct(correct / n)} ({correct}/{n})" if n else "n/a")
        rows.append([t.run, t.docs, *cells, "n/a" if t.accuracy is None else _pct(t.accuracy)])
    caption = "Accuracy by the number of hidden methods a task chains (correct of answered in brackets)."
    return TableData("task_hops", "Task accuracy by hops", columns, rows, caption)


def _coverage_table(report: Report) -> TableData:
    kinds = [k for k in report.kinds if any(k in c.rho for c in report.coverage)]
    columns = ["run", "model", "n", "lines: mean", "lines: median", "all lines", "branches: mean"]
    for kind in kinds:
        columns += [f"rho with {_KIND_NAMES[kind]}", f"{_KIND_NAMES[kind]}: all lines / fewer"]
    rows = []
    for c in report.coverage:
        row = [
            c.run, c.model, str(c.lines.n), _pct(c.lines.mean), _pct(c.lines_median), _pct(c.lines.share_good),
            _pct(c.branches.mean) if c.branches.n else "n/a",
        ]  # fmt: skip
        for kind in kinds:
            n, rho = c.rho.get(kind, (0, None))
            row.append("n/a" if rho is None else f"{rho:+.2f} (n={n})")
            whole, n_whole, partial, n_partial = c.full.get(kind, (None, 0, None, 0))
            row.append(f"{_maybe(kind, whole)} ({n_whole}) / {_maybe(kind, partial)} ({n_partial})")
        rows.append(row)
    caption = (
        "Share of the lines and branches of the hidden function its hidden tests execute that the agent's own calls "
        "executed, per episode (pau-mcp coverage; operator only); rho: Spearman's between line coverage and the score; "
        "the last columns compare episodes whose calls ran every such line with the others (their counts in brackets)."
    )
    return TableData("coverage", "Exploration coverage", columns, rows, caption)


def _maybe(kind: str, value: float | None) -> str:
    return "n/a" if value is None else _mean(kind, value)


def _arguments_table(report: Report) -> TableData:
    arities = sorted({arity for suite in report.suites for arity in suite.arity})
    columns = ["suite", "methods", *(f"{arity} arg{'s' * (arity != 1)}" for arity in arities)]
    rows = [
        [
            suite.name,
            str(suite.methods),
            *(
                f"{suite.arity.get(a, 0)} ({_pct(suite.arity.get(a, 0) / suite.methods if suite.methods else 0)})"
                for a in arities
            ),
        ]
        for suite in report.suites
    ]
    return TableData("arguments", "Methods by number of arguments", columns, rows, "")


def _bin_label(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high - 1}"


def _sizes_table(report: Report) -> TableData:
    columns = ["suite", "methods", "min", "median", "mean", "max", *(_bin_label(lo, hi) for lo, hi in SIZE_BINS)]
    rows = []
    for suite in report.suites:
        low, median, mean, high = suite.size_stats()
        rows.append(
            [
                suite.name,
                str(suite.methods),
                str(low),
                f"{median:g}",
                _num(mean, 1),
                str(high),
                *map(str, suite.binned()),
            ]
        )
    caption = "Hidden test inputs per method; the last columns count methods per test-suite size."
    return TableData("sizes", "Test-suite sizes", columns, rows, caption)


def _pairs_table(report: Report) -> TableData:
    columns = ["run A", "run B", "score", "n", "mean A", "mean B", "p(A>B)", "p(B>A)"]
    # Pairs with no common method are named in the notes instead of filling the table with n/a.
    scored = _scored_runs(report)
    rows = [
        _pair_cells(p.a, p.b, kind, p.tests[kind])
        for p in report.pairs
        for kind in report.kinds
        if any(t.n for t in p.tests.values()) and (p.a in scored[kind] or p.b in scored[kind])
    ]
    caption = f"Paired bootstrap over methods scored in both runs (n), {report.resamples} resamples, seed {report.seed}; small p(A>B): A is reliably better."
    return TableData("pairs", "Paired bootstrap", columns, rows, caption)


def _pair_cells(a: str, b: str, kind: str, test: BootstrapResult) -> list[str]:
    return [
        a,
        b,
        _KIND_NAMES[kind],
        str(test.n),
        _mean(kind, test.mean_a) if test.n else "n/a",
        _mean(kind, test.mean_b) if test.n else "n/a",
        _p(test.p_a_better),
        _p(test.p_b_better),
    ]


def _failures_table(report: Report) -> TableData:
    labels = REPORTED_LABELS
    rows = []
    for s in report.summaries:
        counts = s.failures or {}
        total = sum(counts.values())
        rows.append(
            [
                s.name,
                str(total),
                *(f"{counts.get(label, 0)} ({_pct(counts.get(label, 0) / total if total else 0)})" for label in labels),
            ]
        )
    caption = (
        "Failed: ended in an error, judge below 3, or code match below 0.8; labelled by an LLM from the gold "
        "description, the failing tests, the coverage and the trajectory (the paper's categories)."
    )
    return TableData("failures", "Failure modes", ["run", "failed", *labels], rows, caption)


# -- layouts ------------------------------------------------------------------------------------


def print_report(report: Report, console: Console | None = None) -> None:
    """Print every table and the notes to the terminal, each table laid out to fit its width.

    A table wider than the terminal is turned (one column per run) and, if that is still too wide, shown as
    one block per run; nothing is cut off with an ellipsis. The full tables are in the Markdown, CSV and HTML.
    """
    console = console or Console()
    for data in report_tables(report):
        console.print(_fitted(data, console))
    for note in report.notes:
        console.print(f"- {note}", markup=False, highlight=False)


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], title: str | None, caption: str) -> Table:
    table = Table(title=title, caption=caption or None, title_justify="left", caption_justify="left")
    for column in columns:
        # Fold, never an ellipsis: a value broken over two lines can still be read, "100.…" cannot.
        table.add_column(Text(column), overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a run named "[x]" is not rich markup
    return table


def _fits(console: Console, renderable: RenderableType) -> bool:
    # Measured against unlimited room: a table measured against the terminal reports at most its width.
    natural = Measurement.get(console, console.options.update_width(1_000_000), renderable).maximum
    return natural <= console.width


def _fitted(data: TableData, console: Console) -> RenderableType:
    """The table whole if it fits; else turned, one column per row; else one block of label and value per row.

    Only a table whose first column names each row once (a run) is turned; the others go to blocks.
    """
    whole = _table(data.columns, data.rows, data.title, data.caption)
    if _fits(console, whole) or not data.rows:
        return whole
    keys = [row[0] for row in data.rows]
    if len(set(keys)) == len(keys):
        turned = _table(
            [data.columns[0], *keys],
            [[column, *(row[index] for row in data.rows)] for index, column in enumerate(data.columns) if index],
            data.title,
            data.caption,
        )
        if _fits(console, turned):
            return turned
    blocks = []
    for row in data.rows:
        block = Table(show_header=False)
        block.add_column(overflow="fold")
        block.add_column(overflow="fold")
        for column, cell in zip(data.columns, row, strict=True):
            block.add_row(Text(column), Text(cell))
        blocks.append(block)
    parts: list[RenderableType] = [Text(data.title, style="table.title"), Columns(blocks, padding=(0, 2))]
    if data.caption:
        parts.append(Text(data.caption, style="table.caption"))
    return Group(*parts)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    """The report as Markdown: a heading, one pipe table per table, then the notes."""
    parts = ["# PAU evaluation report", "", f"Runs: {', '.join(s.name for s in report.summaries) or '(none)'}", ""]
    for data in report_tables(report):
        parts += [f"## {data.title}", ""]
        parts.append("| " + " | ".join(_md_cell(c) for c in data.columns) + " |")
        parts.append("|" + "|".join("---" for _ in data.columns) + "|")
        parts += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in data.rows]
        if data.caption:
            parts += ["", data.caption]
        parts.append("")
    parts += ["## Notes", ""] + [f"- {note}" for note in report.notes]
    return "\n".join(parts) + "\n"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 80em; }
div.table { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 0.3em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.num { text-align: right; }
th { background: #f3f3f3; }
p.caption { color: #555; font-size: 0.85em; margin-top: 0; }
figure { margin: 0.5em 0 1.5em; }
img { max-width: 100%; display: block; }
"""

#: A cell that reads as a number: counts, means, shares, differences, p-values, ``done/planned``, n/a.
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:%|/\d+)?(?: \*)?|n/a|")  # one way to match: linear


def _numeric_columns(data: TableData) -> list[bool]:
    """Which columns hold numbers only (right-aligned, as numbers are read); text stays left-aligned."""
    return [
        bool(data.rows)
        and all(_NUMBER.fullmatch(row[index].strip()) for row in data.rows)
        and any(row[index].strip() not in ("", "n/a") for row in data.rows)
        for index in range(len(data.columns))
    ]


def to_html(report: Report, plots: Sequence[Plot] = ()) -> str:
    """One self-contained page: tables, notes and plots embedded as base64 PNG (no external files or scripts).

    Text columns are left-aligned and numbers right-aligned; a table wider than the window scrolls inside its own
    box, so the page never does; a figure is its picture alone (its title is drawn in it, not repeated above).
    """
    e = html.escape
    body = [f"<h1>PAU evaluation report</h1><p>Runs: {e(', '.join(s.name for s in report.summaries))}</p>"]
    for data in report_tables(report):
        align = [' class="num"' if numeric else "" for numeric in _numeric_columns(data)]
        head = "".join(f"<th{a}>{e(c)}</th>" for a, c in zip(align, data.columns, strict=True))
        rows = "".join(
            "<tr>" + "".join(f"<td{a}>{e(c)}</td>" for a, c in zip(align, row, strict=True)) + "</tr>"
            for row in data.rows
        )
        body.append(
            f'<h2>{e(data.title)}</h2><div class="table"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>"
        )
        if data.caption:
            body.append(f'<p class="caption">{e(data.caption)}</p>')
    body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(note)}</li>" for note in report.notes) + "</ul>")
    if plots:
        body.append("<h2>Figures</h2>")
    for plot in plots:
        data_uri = "data:image/png;base64," + base64.b64encode(plot.png).decode("ascii")
        body.append(f'<figure><img alt="{e(plot.title)}" src="{data_uri}"></figure>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><title>PAU evaluation report</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# -- CSV ----------------------------------------------------------------------------------------


def run_rows(report: Report) -> list[dict[str, Any]]:
    """One flat row of raw numbers per run (counts, not shares, for the distributions), every score kind included."""
    return [_run_row(report, s) for s in report.summaries]


def _run_row(report: Report, s: RunSummary) -> dict[str, Any]:
    judge = s.scores["judge"]
    row: dict[str, Any] = {
        "run": s.name, "kind": s.kind, "protocol": s.protocol, "model": s.model, "agent": s.agent, "mode": s.mode,
        "suite": s.suite,
        "planned": s.planned, "done": s.done, "failed": s.failed, "unfinished": s.unfinished,
        "unscored_as_one": int(report.unscored_as_one),
        "judge_n": judge.n, "judge_mean": judge.mean, "judge_std": judge.std, "judge_share_ge3": judge.share_good,
    }  # fmt: skip
    row |= {f"judge_{score}": judge.distribution.get(str(score), 0) for score in JUDGE_SCORES}
    row |= {"judge_unscored": s.judge_unscored, "judge_missing": s.missing["judge"]}
    for kind in FRACTION_KINDS:
        stats = s.scores[kind]
        row |= {
            f"{kind}_n": stats.n, f"{kind}_mean": stats.mean, f"{kind}_std": stats.std,
            f"{kind}_share_perfect": stats.share_good, f"{kind}_share_below_0_8": stats.share_bad,
        }  # fmt: skip
        row |= {f"{kind}_{suffix}": stats.distribution.get(bucket, 0) for bucket, suffix in _BUCKET_SUFFIXES.items()}
        row[f"{kind}_missing"] = s.missing[kind]
    row |= {
        "queries_mean": s.queries_mean, "concluded_share": _blank(s.concluded_share),
        "input_tokens": s.input_tokens, "output_tokens": s.output_tokens, "cost_usd": s.cost_usd,
    }  # fmt: skip
    row |= s.conduct.as_dict()
    if s.failures is not None:
        row |= {f"failure_{label}": count for label, count in s.failures.items()}
    return row


def method_rows(report: Report) -> list[dict[str, Any]]:
    """One row per run and method (per submission, in a run without episodes): state, every score, costs."""
    rows = []
    for run in report.runs:
        labels = report.failure_labels.get(run.name, {})
        for m in run.methods:
            row: dict[str, Any] = {
                "run": run.name, "protocol": run.protocol, "model": run.setting("model"), "agent": run.setting("agent"),
                "mode": run.mode,
                "method_id": m.method_id, "state": m.state,
            }  # fmt: skip
            for kind in KINDS:
                row[f"{kind}_status"] = m.status(kind) or ""
                row[kind] = _blank(run.counted(m, kind, report.unscored_as_one))
            row |= {
                "concluded": _blank(None if m.concluded is None else int(m.concluded)), "queries": _blank(m.queries),
                "malformed_actions": _blank(m.conduct.malformed_actions if m.conduct else None),
                "invalid_arguments": _blank(m.conduct.invalid_arguments if m.conduct else None),
                "refusals": _blank(m.conduct.refusals if m.conduct else None),
                "input_tokens": m.input_tokens, "output_tokens": m.output_tokens, "cost_usd": m.cost_usd,
                "failure": labels.get(m.method_id, ""), "error": m.error or "",
                "observed_checked": _blank(m.contradiction[0] if m.contradiction else None),
                "observed_disagree": _blank(m.contradiction[1] if m.contradiction else None),
                "coverage_lines": _blank(m.covered("lines")), "coverage_branches": _blank(m.covered("branches")),
            }  # fmt: skip
            rows.append(row)
    return rows


def _blank(value: Any) -> Any:
    return "" if value is None else value


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Write dict rows as CSV (columns: the union of keys, in first-seen order)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
