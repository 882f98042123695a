"""``pau-mcp runs list|show|export``: what the run store holds."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import click
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..config import options
from ..contract import RecordStatus, ToolStatus
from ..runstore import CallRow, EpisodeRow, RunStore, StoreError, SubmissionRow
from .common import existing_run_store, settings_from

__all__ = ["runs"]


def _open(values: dict[str, Any]) -> RunStore:
    return existing_run_store(settings_from(values), " yet; serve or evaluate first, or point --db at one")


def _literal(text: object, keep_lines: bool = False) -> str:
    """Agent-supplied text as it was written: Rich markup escaped, and every control or format character
    (terminal escapes, bells, bidirectional overrides) shown as a Python escape instead of acting on the terminal."""
    text = str(text)
    if text.isprintable():  # no control, format, surrogate or line-separator character: nothing to escape
        return text
    out = []
    for ch in text:
        if keep_lines and ch in "\n\t":
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(ascii(ch)[1:-1])
        else:
            out.append(ch)
    return "".join(out)


def _print_uncut(table: Table, whole: str) -> None:
    """Print a table with the cells of column ``whole`` never cut (a name is what a user copies into the next
    command): as a boxed table where that fits the terminal, else without borders and as wide as it must be, so that
    the terminal wraps the long lines instead of Rich cutting names with an ellipsis. Other columns wrap."""
    console = Console()
    for column in table.columns:
        if column.header == whole:
            column.no_wrap = True
            column.min_width = max((cell_len(Text.from_markup(str(cell)).plain) for cell in column.cells), default=1)

    def needed() -> int:
        return Measurement.get(console, console.options.update_width(1_000_000), table).minimum

    if needed() > console.width:
        table.box = None
        console = Console(width=needed())
    console.print(table, crop=False)


@click.group()
def runs() -> None:
    """Inspect and export recorded runs."""


@runs.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@options("db", "data_dir")
def list_(as_json: bool, **values: object) -> None:
    """List runs, newest first."""
    store = _open(values)
    rows = store.runs()
    if as_json:
        for row in rows:
            click.echo(json.dumps({k: v for k, v in asdict(row).items() if k != "config"}))
        return
    table = Table("run", "kind", "created", "sessions", "calls", "submissions")
    for row in rows:
        table.add_row(
            escape(_literal(row.name)),  # a client may name a run (?run=)
            row.kind,
            row.created_at,
            str(row.sessions),
            str(row.calls),
            str(row.submissions),
        )
    _print_uncut(table, "run")


@runs.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print calls and submissions as JSON.")
@options("db", "data_dir")
def show(name: str, as_json: bool, **values: object) -> None:
    """Show the calls and submissions of run NAME."""
    store = _open(values)
    try:
        run_id = store.run_id(name)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _show_json(store, run_id)
        return
    # One table per session under its key in full (a key is what a user copies), in the order the sessions first
    # called. The calls are read a page at a time and printed in plain aligned columns, _TABLE_ROWS at a time:
    # a run of a million calls is shown in the memory of one page, in seconds (Rich took 0.45 ms a row).
    out = sys.stdout
    for session_id, key, count in store.call_sessions(run_id):
        out.write(f"session {_literal(key)} ({count} calls)\n")
        chunk: list[list[str]] = []
        for c in store.iter_call_rows(run_id, session_id):
            status = c["status"]
            result = (
                c["value"]
                if status in (ToolStatus.OK, RecordStatus.COUNTEREXAMPLE)
                else f"{c['error_type'] or ''}: {c['error_message'] or ''}"
            )
            chunk.append([_literal(c["method_id"]), _literal(c["arguments"]), _literal(status),
                          _literal((result or "")[:60]), "yes" if c["counted"] else "no"])  # fmt: skip
            if len(chunk) >= _TABLE_ROWS:
                _write_columns(out, chunk)
                chunk = []
        if chunk:
            _write_columns(out, chunk)
    for s in store.iter_submissions(run_id):
        # Printed as written, only control characters shown as escapes.
        out.write(
            f"\nsubmission {s.id} for {s.method_id} (session {_literal(s.session_key)}):\n"
            f"  {_literal(s.description, keep_lines=True)}\n"
        )


#: Rows printed under one header by ``runs show``, their columns as wide as their widest cell (up to _PAD_CELLS).
_TABLE_ROWS = 500
_PAD_CELLS = 40
_CALL_COLUMNS = ["method", "arguments", "status", "result", "counted"]


def _write_columns(out: Any, rows: list[list[str]]) -> None:
    """Rows under the calls' header, in columns two spaces apart; a cell wider than _PAD_CELLS is printed whole and
    pushes the rest of its row to the right (nothing is ever cut)."""
    lines = [_CALL_COLUMNS, *rows]
    widths = [min(_PAD_CELLS, max(_cells(row[i]) for row in lines)) for i in range(len(_CALL_COLUMNS) - 1)]
    out.write(
        "".join(
            "  ".join(
                [*(cell + " " * (width - _cells(cell)) for cell, width in zip(row, widths, strict=False)), row[-1]]
            )
            + "\n"
            for row in lines
        )
    )


def _cells(text: str) -> int:
    """Terminal cells ``text`` takes (a wide character two)."""
    return len(text) if text.isascii() else cell_len(text)


def _show_json(store: RunStore, run_id: int) -> None:
    """``runs show --json``: the JSON document ``{"calls": [...], "submissions": [...]}``, a row a line, written a
    row at a time."""
    out = sys.stdout
    out.write("{\n")
    calls = (_stored_call(row) for row in store.iter_call_rows(run_id))
    for name, rows in (("calls", calls), ("submissions", map(_stored, store.iter_submissions(run_id)))):
        out.write(f'  "{name}": [')
        first = True
        for row in rows:
            text = json.dumps(row, default=str)  # one line a row: the C encoder (indent is pure Python)
            out.write(("\n    " if first else ",\n    ") + text)
            first = False
        out.write("]" if first else "\n  ]")
        out.write(",\n" if name == "calls" else "\n")
    out.write("}\n")


@runs.command("export")
@click.argument("name")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@click.option(
    "--episodes", is_flag=True, help="Export evaluation episodes with their full trajectories and scores instead."
)
@options("db", "data_dir")
def export(name: str, output: Path | None, episodes: bool, **values: object) -> None:
    """Export run NAME as JSONL: the reference benchmark's predictions layout, or (--episodes) every episode's trajectory."""
    store = _open(values)
    try:
        run_id = store.run_id(name)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    if not episodes and not store.submission_count(run_id):
        calls = store.run(run_id)
        click.echo(
            f"run {_literal(name)} has no submissions, so there are no predictions to export"
            f" ({calls.calls if calls else 0} calls recorded: `pau-mcp runs show {_literal(name)}` lists them)",
            err=True,
        )
        return
    handle = output.open("w", encoding="utf-8") if output else sys.stdout
    count = 0
    if episodes:
        for episode in store.episodes(run_id, with_trajectories=True):
            handle.write(json.dumps(_stored(episode), default=str) + "\n")
            count += 1
    else:
        for record, examples in store.iter_predictions(run_id):
            _write_prediction(handle, record, examples)
            count += 1
    if output:
        handle.close()
        click.echo(f"wrote {count} {'episodes' if episodes else 'predictions'} to {output}", err=True)


def _write_prediction(handle: Any, record: dict[str, Any], examples: Iterator[list[str]]) -> None:
    """One line of the predictions layout (``RunStore.predictions``' record, as ``json.dumps`` writes it), its
    examples written as they are read: a session's calls are not all held at once."""
    head = {key: record[key] for key in ("id", "predicted_description", "num_queries")}
    handle.write(json.dumps(head, default=str)[:-1] + ', "all_examples": [')
    for index, pair in enumerate(examples):
        handle.write((", " if index else "") + json.dumps(pair, default=str))
    handle.write("], " + json.dumps({"code": record["code"], "session": record["session"]}, default=str)[1:] + "\n")


_CALL_FIELDS = [f.name for f in fields(CallRow)]


def _stored_call(row: Any) -> dict[str, Any]:
    """A call as the database holds it (``RunStore.iter_call_rows``), with the fields of ``_stored`` in its order."""
    return {name: row[name] for name in _CALL_FIELDS}


def _stored(row: CallRow | SubmissionRow | EpisodeRow) -> dict[str, Any]:
    """A row as the store holds it, for JSON: flags as 0 and 1, a call's outcome as its JSON text."""
    # Calls and submissions are flat: read their fields as they are (asdict copies deeply, which a run of a million
    # calls pays a million times); an episode holds its scores as rows of their own.
    stored = asdict(row) if isinstance(row, EpisodeRow) else {f.name: getattr(row, f.name) for f in fields(row)}
    for flag in ("counted", "feedback", "concluded"):
        if isinstance(stored.get(flag), bool):
            stored[flag] = int(stored[flag])
    if isinstance(row, CallRow) and row.outcome is not None:
        stored["outcome"] = json.dumps(row.outcome)
    return stored
