"""Coverage of whole runs as a library call (``scoring.run_coverage.measure_runs``): a run not in the store is an
error as data, a run without episodes is named, and nothing makes a sandbox unless there is something to trace."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore
from pau_mcp.scoring.run_coverage import measure_runs
from wasm_runtime import Limits


def _no_sandbox() -> NoReturn:
    raise AssertionError("nothing to trace: no sandbox is made")


def test_a_run_not_in_the_store_is_an_error(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    found = measure_runs(store, ["nope"], manifests=ManifestStore(), sandbox=_no_sandbox, limits=Limits())
    assert found.status == "error" and "nope" in found.message


def test_runs_without_episodes_are_named_once_and_measure_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    store.ensure_run("served", "serve")
    found = measure_runs(store, ["served", "served"], manifests=ManifestStore(), sandbox=_no_sandbox, limits=Limits())
    assert found.status == "measured"
    assert found.empty == ["served"]
    assert [(run.run, run.episodes) for run in found.runs] == [("served", 0)]
