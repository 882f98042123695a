"""A method whose engine this server lacks: the call is refused in one line, does not count, and says who can fix it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
from conftest import TEST_KEY

from pau_mcp.limits import ServiceLimits
from pau_mcp.manifests.store import ManifestStore
from pau_mcp.runstore import RunStore
from pau_mcp.server.catalog import Catalog
from pau_mcp.server.service import MethodService
from pau_mcp.server.sessions import SessionState
from wasm_runtime import EngineUnavailable, Limits, Outcome, SandboxInterface


class NoNumpyEngine(SandboxInterface):
    """A sandbox on a machine without the numpy engine: every call needs it (as a pinned method's would)."""

    def __init__(self) -> None:
        self.limits = Limits()
        self.engines: list[str | None] = []

    def run(
        self, source: str, inputs: Iterable[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        self.engines.append(engine)
        raise EngineUnavailable("this function needs the numpy engine, which is not installed")

    def info(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def test_a_call_needing_an_absent_engine_does_not_count_and_names_the_operator(
    secret_manifests: Path, tmp_path: Path
) -> None:
    catalog = Catalog(ManifestStore([secret_manifests], include_packaged=False), ["secret"], key=TEST_KEY)
    store = RunStore(tmp_path / "runs.sqlite")
    run_id = store.ensure_run("missing-engine", kind="serve")
    state = SessionState(key="s", store_id=store.ensure_session(run_id, "s", "stdio"))
    sandbox = NoNumpyEngine()
    service = MethodService(catalog, sandbox, store, ServiceLimits(budget=5))
    exposed = next(e for e in catalog if e.method.id == "secret/m1")

    reply = anyio.run(service.call, state, exposed, {"arg0": "ab"})

    assert reply.is_error
    assert "cannot run on this server" in reply.text and "operator" in reply.text
    assert "try again" not in reply.text  # retrying cannot help: the engine is missing, not busy
    assert store.budget_spent(state.store_id, exposed.method.id) == (0, 0)
    assert sandbox.engines == [exposed.method.engine]  # the method's pin (None here) reached the sandbox
