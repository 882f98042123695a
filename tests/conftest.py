"""Shared fixtures: one real sandbox for the whole session (the component is built once and cached)."""

from __future__ import annotations

import pytest

from wasm_runtime import Sandbox
from wasm_runtime.workers import WorkerSandbox


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
