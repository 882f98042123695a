"""What `pau-mcp create` costs in CPU per method, and `--variants-of` per kept variant, with an instant model.

The model is the instant scripted server in its own process (benchmarks/_instant_llm.py): it answers at once, its
descriptions carry the function's source and its code writer unpacks them, so every gold check passes and what is
measured is the pipeline's own work (reading, slicing, the sandbox runs, coverage, freezing, validation, the code
match). Each stage is one `pau-mcp create` process, measured with `wait4` (its CPU and that of any process it
waited for); the model's CPU is not counted.

Stages, on one machine, in one run:

1. `create FOLDER`: the 65 builtin functions written as 13 files of 5 public functions each (each function under
   its own name, with its inputs and gold in sidecars), as a user's own modules are;
2. `create --variants-of` that suite: its sources as stage 1 made them;
3. `create --variants-of builtin`: the target, under 2 s of CPU per kept variant.

With `--baseline REF` the same stages also run with the code of the git commit REF (exported with `git archive`),
side by side, and the ratios are given. Target: stage 3 under 2 s of CPU per kept variant.

    python benchmarks/creation.py [--baseline REF] [--limit N] [--write]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _markdown import write_section  # noqa: E402 (this script's own directory)

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from pau_mcp.manifests import ManifestStore, Method  # noqa: E402

MODEL = "openai/instant"
PER_FILE = 5
TARGET_S = 2.0


@dataclass
class Stage:
    """One `pau-mcp create` process: its CPU and what it decided."""

    name: str
    cpu_s: float
    wall_s: float
    functions: int
    kept: int
    tries: int

    @property
    def per_function(self) -> float:
        return self.cpu_s / max(1, self.functions)

    @property
    def per_kept(self) -> float:
        return self.cpu_s / max(1, self.kept)


def _rename(method: Method, name: str) -> str:
    """The method's source with ``test_func`` named ``name`` and its other module-level names suffixed, so five
    functions share a file without clashing."""
    tree = ast.parse(method.source)
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    own |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    mapping = {old: (name if old == "test_func" else f"{old}_{name}") for old in own}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in mapping:
            node.name = mapping[node.name]
    return ast.unparse(tree) + "\n"


def write_folder(folder: Path, methods: list[Method]) -> None:
    """The builtin functions as files of ``PER_FILE`` public functions, with inputs and gold in sidecars."""
    folder.mkdir(parents=True)
    for start in range(0, len(methods), PER_FILE):
        group = methods[start : start + PER_FILE]
        stem = f"module{start // PER_FILE:02d}"
        names = [m.name for m in group]
        (folder / f"{stem}.py").write_text("\n\n".join(_rename(m, n) for m, n in zip(group, names, strict=True)))
        inputs = {n: [c.input for c in (*m.examples, *m.tests)] for m, n in zip(group, names, strict=True)}
        (folder / f"{stem}.inputs.json").write_text(json.dumps(inputs))
        (folder / f"{stem}.descriptions.json").write_text(
            json.dumps({n: m.description for m, n in zip(group, names, strict=True)})
        )


def export(ref: str, into: Path) -> Path:
    """The tree of commit ``ref``, importable as pau_mcp (its packaged suites mapped as an install maps them)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle) as tar:
            tar.extractall(into, filter="data")
    (into / "pau_mcp" / "_suites").symlink_to(into / "manifests")
    return into


def run_stage(name: str, code: Path | None, env: dict[str, str], args: list[str], logs: Path) -> Stage:
    """One `pau-mcp create ... --json` with the code of ``code`` (None: this checkout), measured with wait4."""
    command = [sys.executable, "-m", "pau_mcp", "create", *args, "--model", MODEL, "--no-cache", "--json"]
    stage_env = {**env, "PYTHONPATH": str(code)} if code is not None else env
    out, err = logs / f"{len(list(logs.glob('*.out')))}.out", logs / f"{len(list(logs.glob('*.err')))}.err"
    started = time.perf_counter()
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(command, env=stage_env, cwd=code or ROOT, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    try:
        report = json.loads(out.read_text())
    except json.JSONDecodeError:
        tail = err.read_text()[-2000:]
        raise SystemExit(f"{name}: pau-mcp create ended with status {status} without a whole report:\n{tail}") from None
    tries = sum(1 for r in report["records"] for s in r["steps"] if s["step"] == "variant")
    return Stage(
        name, usage.ru_utime + usage.ru_stime, wall, report["functions"], len(report["kept"]), tries
    )  # fmt: skip


def stages(code: Path | None, work: Path, url: str, limit: int | None) -> list[Stage]:
    """The three stages with the code of ``code`` (None: this checkout), in a data directory of their own."""
    data = work / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_", "AZURE_"))}
    env |= {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "bench", "PAU_MCP_DATA_DIR": str(data)}
    # The sandbox component of that code, built (or found in the shared cache) before any clock starts.
    build = [sys.executable, "-m", "pau_mcp", "sandbox", "build"]
    subprocess.run(build, env={**env, "PYTHONPATH": str(code)} if code else env, cwd=code or ROOT, check=True,
                   capture_output=True)  # fmt: skip
    suites = str(work / "suites")
    limited = ["--limit", str(limit)] if limit else []
    logs = work / "logs"
    logs.mkdir(parents=True)
    folder = str(work.parent / "folder")
    return [
        run_stage("create FOLDER", code, env, [folder, "--suite", "files", "--manifests", suites], logs),
        run_stage(
            "variants of FOLDER's suite", code, env, ["--variants-of", "files", "--manifests", suites, *limited], logs
        ),
        run_stage(
            "variants of builtin", code, env, ["--variants-of", "builtin", "--manifests", suites, *limited], logs
        ),
    ]


def table(current: list[Stage], baseline: list[Stage] | None, ref: str | None) -> str:
    head = "| stage | functions | kept | tries | CPU | CPU per function | CPU per kept |"
    rule = "|---|---|---|---|---|---|---|"
    if baseline is not None:
        head += f" CPU per kept at `{(ref or '')[:12]}` | ratio |"
        rule += "---|---|"
    lines = [head, rule]
    for position, stage in enumerate(current):
        row = (
            f"| {stage.name} | {stage.functions} | {stage.kept} | {stage.tries or ''} | {stage.cpu_s:.1f} s | "
            f"{stage.per_function:.2f} s | **{stage.per_kept:.2f} s** |"
        )
        if baseline is not None:
            old = baseline[position]
            row += f" {old.per_kept:.2f} s ({old.kept} kept, {old.tries or '-'} tries) | {old.per_kept / stage.per_kept:.1f}x |"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", metavar="REF", help="also run the stages with the code of this git commit")
    parser.add_argument("--limit", type=int, help="only the first N methods in the variant stages")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    methods = list(ManifestStore([]).suite("builtin").methods.values())
    if options.smoke:  # one file of five functions; one method in each variant stage
        options.limit, methods = 1, methods[:5]
    model = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert model.stdout is not None
    url = model.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            write_folder(root / "folder", methods)
            load = os.getloadavg()[0]
            current = stages(None, root / "current", url, options.limit)
            baseline = None
            if options.baseline:
                code = export(options.baseline, root / "baseline-code")
                baseline = stages(code, root / "baseline", url, options.limit)
            load = max(load, os.getloadavg()[0])
    finally:
        assert model.stdin is not None
        model.stdin.close()
        model.wait()
    body = table(current, baseline, options.baseline)
    variants = current[-1]
    verdict = "met" if variants.per_kept < TARGET_S else "NOT met"
    note = (
        f"\n\nMeasured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average up to {load:.1f} while it ran (other work shared the cores; the CPU "
        f"counted is each `pau-mcp create` process's own). Target: the variant step under {TARGET_S:.0f} s of CPU per "
        f"kept variant on the builtin suite: **{verdict}** ({variants.per_kept:.2f} s)."
    )
    print(body + note)
    if options.write:
        write_section("creation", body + note)


if __name__ == "__main__":
    main()
