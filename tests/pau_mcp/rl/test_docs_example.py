"""docs/training.md's worked example runs offline, as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_worked_example_rolls_out_and_exports_offline_with_no_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "rl_offline.py"), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unclosed" not in done.stderr  # aiohttp's warning for an SDK client left open (one per loop switch)
    assert "episode builtin/b" in done.stdout and "reason   reward +0.667" in done.stdout
    assert (tmp_path / "trajectories" / "steps.parquet").exists()
    examples = [json.loads(line) for line in (tmp_path / "sft" / "train.jsonl").read_text().splitlines()]
    assert len(examples) == 24 and examples[0]["messages"][-1]["role"] == "assistant"
    assert "docs/examples/rl_offline.py" in (ROOT / "docs" / "training.md").read_text()
