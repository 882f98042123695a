"""How ``pytest -n auto`` shares this suite out: a module stays on one worker, and so do the Ray cluster's tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="the test command runs pytest-xdist: pip install -e '.[test]'")

CONFTEST = Path(__file__).with_name("conftest.py")
# Each test appends the worker that ran it; three tests a module, so a split would show.
MODULE = """
import os

import pytest


@pytest.mark.parametrize("case", range(3))
def test_records_its_worker(case):
    with open(os.environ["WORKERS_LOG"], "a") as log:
        log.write(__name__ + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_each_module_and_the_whole_ray_cluster_unit_run_on_a_single_worker(tmp_path: Path) -> None:
    root = tmp_path / "suite"
    (root / "tests" / "pau_mcp" / "distributed").mkdir(parents=True)
    (root / "tests" / "conftest.py").write_text(CONFTEST.read_text())
    names = ["tests/test_one.py", "tests/test_two.py", "tests/test_three.py",
             "tests/pau_mcp/distributed/test_ray_a.py", "tests/pau_mcp/distributed/test_ray_b.py"]  # fmt: skip
    for name in names:
        (root / name).write_text(MODULE)
    (root / "pytest.ini").write_text("[pytest]\naddopts = --no-loadscope-reorder\n")
    log = tmp_path / "workers.log"
    # Only pytest-xdist among the installed plugins: loading the others would double what this test costs.
    env = {**os.environ, "WORKERS_LOG": str(log), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("CI", None)  # the copied conftest would insist on the numpy engine
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "2", "-p", "no:cacheprovider", "-q"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    workers: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        module, worker = line.split()
        workers.setdefault(module, set()).add(worker)
    assert sum(1 for _ in log.read_text().splitlines()) == 15
    assert all(len(seen) == 1 for seen in workers.values()), json.dumps({k: sorted(v) for k, v in workers.items()})
    assert workers["test_ray_a"] == workers["test_ray_b"]


def test_every_module_named_to_go_first_exists() -> None:
    # By path: `import conftest` gives whichever conftest.py was imported first under that name.
    named = re.findall(r'"(tests/[^"]+\.py)"', CONFTEST.read_text())
    assert len(named) >= 10
    assert [unit for unit in named if not (CONFTEST.parent.parent / unit).is_file()] == []
