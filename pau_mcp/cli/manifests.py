"""``pau-mcp manifests list|show|freeze|validate|commit|verify``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config import Settings, SettingsError, options
from ..manifests import ManifestError, ManifestStore, call_text, dump_method, tool_name
from ..manifests.commitment import (
    SALT_FILE,
    commit_suite,
    new_salt,
    read_commitment,
    read_salt,
    verdict_lines,
    verify_suite,
    write_salt,
)
from ..manifests.freezing import freeze_suites, packaged_suite
from ..manifests.lookup import find_method
from ..manifests.validation import validate_suites
from .common import bar, err, make_sandbox, manifest_store, settings_from, step_printer

__all__ = ["manifests"]


def _store(values: dict[str, object]) -> tuple[Settings, ManifestStore]:
    settings = settings_from(values)
    return settings, manifest_store(settings)


def _key(settings: Settings) -> str:
    """The deployment key, which names the tools as this deployment's servers do."""
    try:
        return settings.deployment_key()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def _selected(store: ManifestStore, suites: tuple[str, ...]) -> list[str]:
    names = list(suites) or store.names()
    if not names:
        raise click.UsageError("no suites found; add a directory with --manifests")
    return names


@click.group()
def manifests() -> None:
    """List, inspect, freeze and validate hidden-method suites; commit to a private one and verify it once revealed."""


@manifests.command("list")
@click.option("--suite", "suites", multiple=True, help="Only this suite (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per method.")
@options("manifests", "data_dir", "tool_key")
def list_(suites: tuple[str, ...], as_json: bool, **values: object) -> None:
    """List suites, or the methods of the given suites (with their tool names in this deployment)."""
    settings, store = _store(values)
    try:
        if not suites and not as_json:
            table = Table("suite", "methods", "frozen", "arity 1/2/3/4+", "tasks", "path")
            for name in store.names():
                suite = store.suite(name)
                arity = Counter(min(m.tags.arity, 4) for m in suite.methods.values())
                frozen = sum(m.frozen for m in suite.methods.values())
                table.add_row(
                    name,
                    str(len(suite.methods)),
                    str(frozen),
                    "/".join(str(arity[k]) for k in (1, 2, 3, 4)),
                    str(len(suite.tasks)),
                    str(suite.path),
                )
            Console().print(table)
            return
        methods = list(store.methods(_selected(store, suites)))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    key = _key(settings)
    if as_json:
        for m in methods:
            click.echo(json.dumps({
                "id": m.id, "tool": tool_name(key, m.id), "header": m.header, "arity": m.tags.arity, "examples": len(m.examples),
                "tests": len(m.tests), "frozen": m.frozen, "difficulty": m.tags.difficulty,
                "hidden_behaviour": m.tags.hidden_behaviour, "dataset": m.provenance.dataset,
            }))  # fmt: skip
        return
    table = Table("id", "tool", "header", "tests", "frozen", "difficulty", "hidden behaviour")
    for m in methods:
        table.add_row(m.id, tool_name(key, m.id), m.header, str(len(m.tests)), "yes" if m.frozen else "no",
                      m.tags.difficulty or "", ", ".join(m.tags.hidden_behaviour))  # fmt: skip
    Console().print(table)


@manifests.command("show")
@click.argument("target", metavar="METHOD")
@click.option("--hidden", is_flag=True, help="Show everything, including source, gold description and tests.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@options("manifests", "data_dir", "tool_key")
def show(target: str, hidden: bool, as_json: bool, **values: object) -> None:
    """Show what an agent would see of METHOD, or everything with --hidden.

    METHOD is a method id (suite/name), a tool name as this deployment serves it (fn_...), or a manifest file.
    """
    settings, store = _store(values)
    try:
        method = find_method(store, target, _key(settings))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    if hidden:
        click.echo(dump_method(method) if not as_json else json.dumps(method.model_dump(mode="json")))
        return
    view = method.agent_view(_key(settings))
    if as_json:
        click.echo(json.dumps(view, indent=2))
        return
    click.echo(f"tool:   {view['tool']}\nheader: {view['header']}\nexamples:")
    for example in view["examples"]:
        shown = example["output"] if example["output"] is not None else "(not frozen)"
        click.echo(f"  {call_text(method.entry, example['input'])} -> {shown}")


@manifests.command("freeze")
@click.option("--suite", "suites", multiple=True, help="Only this suite (repeatable; default: all).")
@click.option("--method", "method_ids", multiple=True, help="Only this method id (repeatable).")
@options("manifests", "timeout_s", "memory_mb", "cache_dir")
def freeze(suites: tuple[str, ...], method_ids: tuple[str, ...], **values: object) -> None:
    """Run every example and test input in the sandbox and store the outcomes, and each task's chain of gold
    functions to store its answer. Exit 1 when a task's chain cannot answer it (each is named with why)."""
    settings, store = _store(values)
    frozen = freeze_suites(
        store, suites=suites, method_ids=method_ids, sandbox=lambda: make_sandbox(settings, progress=step_printer()),
        progress=bar,
    )  # fmt: skip
    if frozen.status == "usage":
        raise click.UsageError(frozen.message)
    if frozen.status == "error":
        raise click.ClickException(frozen.message)
    click.echo(
        f"froze {frozen.methods} methods ({frozen.changed} changed); outcomes: "
        + ", ".join(f"{k} {v}" for k, v in frozen.outcomes.items())
    )
    if not frozen.tasks:
        return
    for task_id, problem in frozen.failures:
        err.print(f"[red]FAIL[/red] {escape(task_id)}: {escape(problem)}")
    failed = len(frozen.failures)
    click.echo(
        f"froze {frozen.tasks - failed} tasks ({frozen.tasks_changed} changed)"
        + (f"; {failed} could not be answered" if failed else "")
    )
    if failed:
        sys.exit(1)


@manifests.command("validate")
@click.option("--suite", "suites", multiple=True, help="Only this suite (repeatable; default: all).")
@options("manifests", "timeout_s", "memory_mb", "cache_dir")
def validate(suites: tuple[str, ...], **values: object) -> None:
    """Check every method: compiles, arity, every input runs, outcomes reproduce, anonymous; and every task: its answer
    reproduces, its question gives no method away. Exit 1 on any failure."""
    settings, store = _store(values)
    checked = validate_suites(
        store, suites, sandbox=lambda: make_sandbox(settings, progress=step_printer()), progress=bar
    )  # fmt: skip
    if checked.status == "usage":
        raise click.UsageError(checked.message)
    if checked.status == "error":
        raise click.ClickException(checked.message)
    failed = checked.failed
    for problems in failed.values():
        for problem in problems:
            err.print(f"[red]FAIL[/red] {escape(str(problem))}")
    methods, tasks = checked.methods, checked.tasks
    summary = f"{methods} methods checked, {methods - len(failed)} passed, {len(failed)} failed"
    if tasks:
        summary = f"{methods} methods and {tasks} tasks checked, {len(checked.results) - len(failed)} passed, {len(failed)} failed"
    if checked.by_check:
        summary += " (" + ", ".join(f"{check}: {n}" for check, n in checked.by_check.most_common()) + ")"
    click.echo(summary)
    sys.exit(1 if failed else 0)


def _salt_path(store: ManifestStore, name: str, salt: Path | None) -> Path:
    return salt if salt is not None else store.suite(name).path / SALT_FILE


@manifests.command("commit")
@click.argument("suite_name", metavar="SUITE")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the public commitment goes (default: ./SUITE.commitment.json).",
)
@click.option(
    "--salt",
    "salt_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The salt file to use, made if missing (default: {SALT_FILE} in the suite's folder).",
)
@click.option("--replace", is_flag=True, help="Overwrite an existing commitment file.")
@options("manifests")
def commit(suite_name: str, out: Path | None, salt_file: Path | None, replace: bool, **values: object) -> None:
    """Write a public commitment to SUITE: salted SHA-256 digests of its suite.json, each method and each task, one
    for the suite, and the dates. It reveals nothing of the methods; publish it before any model is scored on the
    suite, keep the suite and its salt private until the reveal, then `pau-mcp manifests verify` proves the revealed
    suite is this one."""
    _, store = _store(values)
    target = out or Path(f"{suite_name}.commitment.json")
    try:
        suite = store.suite(suite_name)
        if packaged_suite(store, suite_name):
            raise click.UsageError(
                f"suite {suite_name!r} is part of the pau-mcp installation and public: there is nothing to commit to"
            )
        where = _salt_path(store, suite_name, salt_file)
        if target.exists() and not replace:
            raise click.UsageError(f"{target} exists; choose another --out or pass --replace")
        made = not where.exists()
        if made:
            write_salt(where, new_salt())
        committed = commit_suite(suite, read_salt(where), datetime.now(UTC))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    target.write_text(committed.dump(), encoding="utf-8")
    click.echo(
        f"committed to suite {suite_name} ({len(committed.methods)} methods, {len(committed.tasks)} tasks) in {target}\n"
        f"suite digest {committed.suite_digest}\n"
        f"salt: {where} ({'made now' if made else 'kept'}): keep it private with the suite, reveal both together"
    )


@manifests.command("verify")
@click.argument("suite_name", metavar="SUITE")
@click.argument("commitment_file", metavar="COMMITMENT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--salt",
    "salt_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"The revealed salt file (default: {SALT_FILE} in the suite's folder).",
)
@options("manifests")
def verify(suite_name: str, commitment_file: Path, salt_file: Path | None, **values: object) -> None:
    """Check that the revealed SUITE is the one COMMITMENT committed to; name every method, task or suite.json that
    differs. Exit 0 when it is, 1 when anything differs or cannot be checked."""
    _, store = _store(values)
    try:
        committed = read_commitment(commitment_file)
        suite = store.suite(suite_name)
        found = verify_suite(suite, committed, read_salt(_salt_path(store, suite_name, salt_file)))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    for line in verdict_lines(found, committed):
        click.echo(line)
    sys.exit(0 if found.matches else 1)
