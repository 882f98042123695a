"""Fixtures of the RL tests: methods from the packaged suites, a runtime over the session's real sandbox."""

from __future__ import annotations

import pytest

from pau_mcp.manifests import ManifestStore
from pau_mcp.rl import Runtime
from wasm_runtime import Sandbox


@pytest.fixture(scope="session")
def manifests() -> ManifestStore:
    return ManifestStore(())


@pytest.fixture(scope="session")
def runtime(sandbox: Sandbox) -> Runtime:
    return Runtime(lambda: sandbox)
