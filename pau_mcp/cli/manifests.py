"""``pau-mcp manifests list|show|freeze|validate``."""

from __future__ import annotations

import json
import sys
from collections import Counter

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config import SettingsError, options
from ..manifests import ManifestError, Method, call_text, dump_method, tool_name
from ..manifests.checks import check_methods, freeze_methods
from .common import bar, err, settings_from, step_printer

__all__ = ["manifests"]


def _store(values: dict):
    settings = settings_from(values)
    return settings, settings.manifest_store()


def _key(settings) -> str:  # type: ignore[no-untyped-def]
    """The deployment key, which names the tools as this deployment's servers do."""
    try:
        return settings.deployment_key()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def _selected(store, suites: tuple[str, ...]) -> list[str]:
    names = list(suites) or store.names()
    if not names:
        raise click.UsageError("no suites found; add a directory with --manifests")
    return names


@click.group()
def manifests() -> None:
    """List, inspect, freeze and validate hidden-method suites."""


@manifests.command("list")
@click.option("--suite", "suites", multiple=True, help="Only this suite (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per method.")
@options("manifests", "data_dir", "tool_key")
def list_(suites: tuple[str, ...], as_json: bool, **values: object) -> None:
    """List suites, or the methods of the given suites (with their tool names in this deployment)."""
    settings, store = _store(values)
    try:
        if not suites and not as_json:
            table = Table("suite", "methods", "frozen", "arity 1/2/3/4+", "path")
            for name in store.names():
                suite = store.suite(name)
                arity = Counter(min(m.tags.arity, 4) for m in suite.methods.values())
                frozen = sum(m.frozen for m in suite.methods.values())
                table.add_row(
                    name,
                    str(len(suite.methods)),
                    str(frozen),
                    "/".join(str(arity[k]) for k in (1, 2, 3, 4)),
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
@click.argument("method_id")
@click.option("--hidden", is_flag=True, help="Show everything, including source, gold description and tests.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@options("manifests", "data_dir", "tool_key")
def show(method_id: str, hidden: bool, as_json: bool, **values: object) -> None:
    """Show what an agent would see of METHOD_ID (suite/name), or everything with --hidden."""
    settings, store = _store(values)
    try:
        method = store.method(method_id)
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
    """Run every example and test input in the sandbox and store the outcomes."""
    settings, store = _store(values)
    try:
        names = _selected(store, suites)
        methods = [store.method(i) for i in method_ids] if method_ids else list(store.methods(names))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    sandbox = settings.sandbox(progress=step_printer())
    with bar("freezing", len(methods)) as advance:
        frozen = freeze_methods(methods, sandbox, progress=advance)
    changed = 0
    for old, new in zip(methods, frozen, strict=False):
        if dump_method(old) != dump_method(new):
            store.suite(new.suite).save(new)
            changed += 1
    statuses = Counter(c.outcome.status for m in frozen for c in (*m.examples, *m.tests) if c.outcome)
    click.echo(
        f"froze {len(frozen)} methods ({changed} changed); outcomes: "
        + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    )


@manifests.command("validate")
@click.option("--suite", "suites", multiple=True, help="Only this suite (repeatable; default: all).")
@options("manifests", "timeout_s", "memory_mb", "cache_dir")
def validate(suites: tuple[str, ...], **values: object) -> None:
    """Check every method: compiles, arity, every input runs, outcomes reproduce, anonymous. Exit 1 on any failure."""
    settings, store = _store(values)
    try:
        methods: list[Method] = list(store.methods(_selected(store, suites)))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    sandbox = settings.sandbox(progress=step_printer())
    with bar("validating", len(methods)) as advance:
        results = check_methods(methods, sandbox, progress=advance)
    failed = {mid: problems for mid, problems in results.items() if problems}
    for problems in failed.values():
        for problem in problems:
            err.print(f"[red]FAIL[/red] {escape(str(problem))}")
    by_check = Counter(p.check for problems in failed.values() for p in problems)
    summary = f"{len(methods)} methods checked, {len(methods) - len(failed)} passed, {len(failed)} failed"
    if by_check:
        summary += " (" + ", ".join(f"{check}: {n}" for check, n in by_check.most_common()) + ")"
    click.echo(summary)
    sys.exit(1 if failed else 0)
