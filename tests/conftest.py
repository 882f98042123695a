"""Shared fixtures: one real sandbox for the whole session (the component is built once and cached)."""

from __future__ import annotations

import pytest

from wasm_runtime import Sandbox


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """The real wasmtime sandbox with default limits."""
    return Sandbox()
