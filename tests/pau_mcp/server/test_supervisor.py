"""`pau-mcp serve --processes N`: one port served by N server processes under one supervisor.

Each process builds its own server after the fork and takes the connections the kernel hands its socket; the run
store they share keeps budgets exact whichever process answers. The supervisor starts a process again when one
ends, stops them all when stopped, and none outlives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from conftest import ROOT, TEST_KEY, ran, tool_of
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from mcp_types.version import LATEST_MODERN_VERSION
from pau_command import run_pau

from pau_mcp.config import Settings
from pau_mcp.server import ProcessesError, TokenSigner, serve_processes
from pau_mcp.server_assembly import AssemblyError, ServeRequest, prepare_processes
from pau_mcp.tls import shared_context

B001 = "builtin/b001"
MAIN = "main-token-0123456789"
WAIT_S = 60


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _servers(supervisor: int) -> list[int]:
    """The server processes of a supervisor (its children that are not sandbox workers)."""
    return [pid for pid in _children(supervisor) if "wasm_runtime.workers" not in _command(pid)]


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _sockets(pid: int) -> int:
    """How many sockets a process holds open (its listening socket, its event loop's, and its connections)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def _pipes(pid: int, skip_standard: bool = False) -> set[str]:
    """The pipes a process holds open."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if skip_standard and int(fd) <= 2:
            continue
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("pipe:"):
                found.add(target)
    return found


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"{what} within {WAIT_S} s"
        time.sleep(0.05)


@contextlib.contextmanager
def _supervised(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`pau-mcp serve --transport http --port 0 --processes 2 --stateless ARGS`, launched; yields it and its URL
    once both server processes run."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--launched",
         "--processes", "2", "--stateless", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        url = json.loads(line)["ready"]

        def both_running() -> bool:
            if process.poll() is not None:  # ended: say why, not "no servers within a minute"
                said = process.stderr.read() if process.stderr else ""
                raise AssertionError(f"the supervisor ended ({process.returncode}): {said[-3000:]}")
            return len(_servers(process.pid)) == 2

        _wait_for(both_running, "two server processes")
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=WAIT_S)


def _store_args(tmp_path: Path, budget: int) -> list[str]:
    return ["--db", str(tmp_path / "runs.db"), "--token", MAIN, "--budget", str(budget), "--methods", B001,
            "--workers", "1", "--run", "processes"]  # fmt: skip


async def _calls(
    url: str, token: str, arguments: range, during: Callable[[], None] | None = None
) -> list[CallToolResult]:
    """Calls of b001 with each argument, all at once (each on a connection of its own), as one credential."""
    results: list[CallToolResult] = []
    async with httpx2.AsyncClient(
        verify=shared_context(), headers={"Authorization": f"Bearer {token}"}, timeout=120
    ) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=LATEST_MODERN_VERSION, cache=None) as c:

            async def one(i: int) -> None:
                results.append(await c.call_tool(tool_of(B001), {"arg0": i}))

            with anyio.fail_after(240):
                async with anyio.create_task_group() as group:
                    for i in arguments:
                        group.start_soon(one, i)
            if during is not None:
                during()
    return results


def test_two_processes_on_one_port_both_answer_and_run_exactly_the_budget_of_24_concurrent_calls(
    tmp_path: Path,
) -> None:
    token = TokenSigner(TEST_KEY).issue("agent", run="processes")
    with _supervised(*_store_args(tmp_path, 10)) as (process, url):
        servers = _servers(process.pid)
        idle = {pid: _sockets(pid) for pid in servers}
        held: dict[int, int] = {}
        results = anyio.run(_calls, url, token, range(24), lambda: held.update({p: _sockets(p) for p in servers}))
    assert len(results) == 24
    assert sorted(r.structured_content["queries_used"] for r in results if ran(r)) == list(range(1, 11))
    assert all(r.structured_content["status"] == "over_budget" for r in results if not ran(r))
    # Each process holds connections of the client's: the kernel spread them over both.
    assert all(held[pid] > idle[pid] for pid in servers), (idle, held)


def test_a_killed_server_process_is_started_again_and_the_port_keeps_answering(tmp_path: Path) -> None:
    token = TokenSigner(TEST_KEY).issue("agent", run="processes")
    with _supervised(*_store_args(tmp_path, 100)) as (process, url):
        first = _servers(process.pid)
        os.kill(first[0], signal.SIGKILL)
        _wait_for(lambda: len(_servers(process.pid)) == 2 and first[0] not in _servers(process.pid), "a replacement")
        # The supervisor's own pipes (its wake-up pipe: not its stdin, stdout, stderr) stay out of every server.
        own = _pipes(process.pid, skip_standard=True)
        assert own and all(not own & _pipes(server) for server in _servers(process.pid))
        results = anyio.run(_calls, url, token, range(12))
        assert process.poll() is None
    assert len(results) == 12 and all(ran(r) for r in results)
    assert process.stderr is not None and "starting it again" in process.stderr.read()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["terminated", "killed"])
def test_the_supervisor_stopped_or_killed_leaves_no_server_or_sandbox_process_behind(
    tmp_path: Path, stop: signal.Signals
) -> None:
    token = TokenSigner(TEST_KEY).issue("agent", run="processes")
    with _supervised(*_store_args(tmp_path, 100)) as (process, url):
        anyio.run(_calls, url, token, range(4))  # sandbox workers started in each process
        below = [*_servers(process.pid)]
        below += [worker for server in below for worker in _children(server)]
        assert len(below) >= 4
        process.send_signal(stop)
        assert process.wait(timeout=WAIT_S) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
        _wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") and _command(pid) for pid in below), "no process left")


def test_several_processes_are_refused_for_stdio_and_without_stateless_before_anything_starts(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    stdio = run_pau("serve", "--processes", "2", "--db", db)
    assert stdio.returncode == 2 and "--processes 2 serves HTTP: add --transport http" in stdio.stderr
    env = {**os.environ, "PAU_MCP_PROCESSES": "3"}
    sessions = run_pau("serve", "--transport", "http", "--port", "0", "--db", db, env=env)
    assert sessions.returncode == 2 and "--processes 3 needs --stateless" in sessions.stderr
    assert not Path(db).exists()


def test_several_processes_are_refused_off_linux_with_the_replicas_to_run_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    request = ServeRequest(transport="http", stateless=True)
    with pytest.raises(AssemblyError, match="needs Linux.*Replicas") as refused:
        prepare_processes(Settings.from_options(processes=2), request)
    assert refused.value.usage
    assert prepare_processes(Settings.from_options(processes=1), request) is request


def test_a_start_every_process_would_refuse_ends_the_supervisor_with_the_reason_and_no_restart(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "serve", "--transport", "http", "--port", "0", "--processes", "2",
         "--stateless", "--db", str(tmp_path / "runs.db"), "--suite", "no-such-suite"],
        capture_output=True, text=True, timeout=WAIT_S, cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no-such-suite" in done.stderr and "starting it again" not in done.stderr


def test_processes_that_keep_ending_stop_the_supervisor_with_status_1() -> None:
    script = textwrap.dedent(
        """
        import logging, os, sys
        from pau_mcp.server import serve_processes
        logging.basicConfig()
        sys.exit(serve_processes(2, lambda index: os._exit(1)))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_S, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert "starting it again" in done.stderr and "stopping them all" in done.stderr


def test_forking_server_processes_beside_another_thread_is_refused() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="a-thread-holding-locks")
    thread.start()
    try:
        with pytest.raises(ProcessesError, match="a-thread-holding-locks"):
            serve_processes(2, lambda index: None)
    finally:
        release.set()
        thread.join()


def test_a_server_process_starts_without_the_supervisors_signal_pipe() -> None:
    # Left set, a signal in the server would write a byte to whatever file took the closed pipe's number next.
    script = textwrap.dedent(
        """
        import os, signal, sys
        from pau_mcp.server import serve_processes

        def serve_one(index):
            print("wakeup fd", signal.set_wakeup_fd(-1), flush=True)
            os.kill(os.getppid(), signal.SIGTERM)

        sys.exit(serve_processes(1, serve_one))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_S, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["wakeup", "fd", "-1"]
