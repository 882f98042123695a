"""A stand-in sandbox for tests whose subject is what code does around the sandbox, not the sandbox itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wasm_runtime import Limits, Outcome, SandboxInterface


class RefusingSandbox(SandboxInterface):
    """A sandbox whose every ``run`` raises ``error``: a dead worker (``OSError``), or, by default, a failed test when
    the code under test should not have run anything. Subclasses give it an ``arun`` of their own to hand back
    forged outcomes.

    Args:
        error: What each ``run`` raises.
    """

    limits = Limits()
    error: BaseException = AssertionError("nothing should have run in this sandbox")

    def __init__(self, error: BaseException | None = None) -> None:
        if error is not None:
            self.error = error

    def run(
        self, source: str, inputs: Iterable[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        raise self.error

    def info(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass
