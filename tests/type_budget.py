"""The tests' type gate: ``mypy --strict`` over ``tests/`` may find no more errors than ``tests/type_budget.json`` allows.

The packages are held to zero errors (``mypy --strict``, pyproject.toml); the tests are on their way there. This
script counts their strict errors, with the configuration of pyproject.toml (the pydantic plugin among it), and
fails when the count is over the budget, printing the files whose count grew. Under the budget, it says so and asks
for the budget to be lowered (``--write``), so what was fixed stays fixed. Run it from the checkout's root::

    python tests/type_budget.py          # check (.ci/run, the README's gates)
    python tests/type_budget.py --write  # record a lower count (never a higher one)

pytest imports each test module by its file name from its own directory (and ``tests/``), so mypy is given the
same: every test directory is on its search path, and each test file is a top-level module. The ``conftest.py``
files would then share one module name, and a test's ``from conftest import ...`` means its own directory's: a
directory with a conftest.py is checked in a run of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
BUDGET = TESTS / "type_budget.json"
# Client libraries of extras the test extra does not install (interop, trl), which only tests import: read as Any, as
# Ray is, so the count is the same with or without them (the README's install, CI's).
_EXTRAS = ["inspect_ai", "agents", "pydantic_ai", "langchain_mcp_adapters", "langchain_core", "transformers", "trl"]
_ERROR = re.compile(r"[^:]+\.py:\d+(?::\d+)?: error: ")


def _batches() -> list[list[Path]]:
    """The files of each mypy run: a directory with a conftest.py of its own is a run (its tests import it as
    ``conftest``); every other test file goes with the top conftest.py."""
    files = sorted(p for p in TESTS.rglob("*.py") if ".venv" not in p.parts and "node_modules" not in p.parts)
    own = sorted({p.parent for p in files if p.name == "conftest.py" and p.parent != TESTS})
    batches = [[p for p in files if p.parent not in own], *([p for p in files if p.parent == d] for d in own)]
    return [b for b in batches if b]


def _search_path() -> str:
    """Every directory holding a test file, as pytest puts them on ``sys.path``: ``MYPYPATH`` for mypy."""
    dirs = sorted({p.parent for p in TESTS.rglob("*.py") if ".venv" not in p.parts})
    return os.pathsep.join(str(d.relative_to(ROOT)) for d in dirs)


def _config(directory: Path) -> Path:
    """pyproject.toml's mypy configuration, with the extras' packages read as Any (see ``_EXTRAS``)."""
    names = ", ".join(f'"{m}", "{m}.*"' for m in _EXTRAS)
    override = f"""
[[tool.mypy.overrides]]
module = [{names}]
follow_imports = "skip"
ignore_missing_imports = true
"""
    config = directory / "mypy.toml"
    config.write_text((ROOT / "pyproject.toml").read_text() + override)
    return config


def find_errors() -> dict[str, list[str]]:
    """The strict errors mypy finds in the tests (its lines), by file (paths relative to the checkout)."""
    env = {**os.environ, "MYPYPATH": _search_path()}
    errors: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as directory:
        config = _config(Path(directory))
        for batch in _batches():
            for line in _run_mypy(config, batch, env):
                errors.setdefault(line.split(":", 1)[0], []).append(line)
    return errors


def _run_mypy(config: Path, files: Sequence[Path], env: Mapping[str, str]) -> list[str]:
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--strict", "--no-error-summary"]
    if "MYPY_CACHE_DIR" not in env:  # a cache of its own: the packages' gate reads the extras with their types
        command += ["--cache-dir", str(ROOT / ".mypy_cache" / "type_budget")]
    command += ["--no-pretty", *(str(p.relative_to(ROOT)) for p in files)]
    ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if ran.returncode not in (0, 1):  # 2: mypy could not check (a syntax error, a module found twice, a crash)
        raise SystemExit(f"mypy could not check the tests (exit {ran.returncode}); fix this first:\n"
                         f"{ran.stdout}{ran.stderr}")  # fmt: skip
    return [line for line in ran.stdout.splitlines() if _ERROR.match(line)]


def _recorded() -> tuple[int, dict[str, int]]:
    data = json.loads(BUDGET.read_text())
    return int(data["errors"]), {str(k): int(v) for k, v in data["files"].items()}


def _write(errors: Counter[str]) -> None:
    data = {
        "about": "mypy --strict errors in tests/ that tests/type_budget.py allows; lower it, never raise it",
        "errors": sum(errors.values()),
        "files": dict(sorted(errors.items())),
    }
    BUDGET.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Check the tests' error count against the budget (or record a lower one); the exit code says which way."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="record the count in tests/type_budget.json if lower")
    args = parser.parse_args(argv)
    found = find_errors()
    errors = Counter({path: len(lines) for path, lines in found.items()})
    total = sum(errors.values())
    budget, files = _recorded()
    if total > budget:
        grown = {f: (files.get(f, 0), n) for f, n in sorted(errors.items()) if n > files.get(f, 0)}
        print(f"tests/type_budget.py: {total} mypy --strict errors in tests/, over the budget of {budget}.")
        for path, (before, now) in grown.items():
            print(f"{path}: {before} -> {now}")
            print("\n".join(f"  {line}" for line in found[path]))
        print(
            "Fix the new errors (the files above, whose count grew, with all their errors); the budget is never raised."
        )
        return 1
    if args.write and total < budget:
        _write(errors)
        print(
            f"tests/type_budget.py: {total} mypy --strict errors in tests/; the budget is now {total} (was {budget})."
        )
    elif total < budget:
        print(f"tests/type_budget.py: {total} mypy --strict errors in tests/, under the budget of {budget}: lower it"
              " with `python tests/type_budget.py --write` and commit tests/type_budget.json.")  # fmt: skip
    else:
        print(f"tests/type_budget.py: {total} mypy --strict errors in tests/, the budget.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
