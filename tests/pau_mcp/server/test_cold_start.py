"""A stdio server is started the way hosts start one: it answers ``initialize`` (and ``server/discover``) at once, even
on the first start of a machine whose cache lacks the sandbox, which it builds meanwhile in a process of its own.

Hosts wait 5 s (the SDK's default) to 60 s for the handshake; the first build takes minutes. What is held here is the
server's own CPU up to its answer (under 2 s, of which the imports are most) and that it answers while the build is
still going, not the wall time, which depends on what else the machine runs (docs/clients.md gives it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from conftest import ROOT

from pau_mcp.config import Settings
from pau_mcp.sandboxing import BackgroundSandbox, SandboxNotReady, background
from wasm_runtime import SandboxInterface
from wasm_runtime.build import artifacts

HANDSHAKES = {
    "initialize": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}},
    "server/discover": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }},
}  # fmt: skip


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("method", list(HANDSHAKES))
def test_a_stdio_server_answers_the_handshake_before_its_first_sandbox_build_is_done(
    tmp_path: Path, method: str
) -> None:
    cache = tmp_path / "empty-cache"
    command = [sys.executable, "-m", "pau_mcp", "serve", "--db", str(tmp_path / "runs.db"), "--cache-dir", str(cache)]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert server.stdin is not None and server.stdout is not None
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": HANDSHAKES[method]}
        server.stdin.write(json.dumps(request).encode() + b"\n")
        server.stdin.flush()
        answered: list[bytes] = []
        stdout = server.stdout  # narrowed above; a lambda would see the attribute, which may be None
        reader = threading.Thread(target=lambda: answered.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=120)
        assert answered, "no answer to the handshake"
        cpu = _cpu_s(server.pid)
        reply = json.loads(answered[0])
        assert reply["id"] == 1 and "result" in reply
        assert reply["result"]["capabilities"]["tools"] is not None
        assert not artifacts(cache).built  # answered while the build goes on
        assert cpu < 2.0, f"the server spent {cpu:.2f} s of CPU before answering"
        # The build runs below the server in the CPU's queue, so that it does not take the CPU the server answers with.
        builders = [pid for pid in _children(server.pid) if b"sandbox\0build" in _command_line(pid)]
        assert builders, "no build running"
        assert os.getpriority(os.PRIO_PROCESS, builders[0]) >= os.getpriority(os.PRIO_PROCESS, server.pid) + 10
    finally:
        if server.stdin is not None:
            server.stdin.close()  # as a host that quits: the server exits, and takes its unfinished build with it
        server.wait(timeout=60)
    stderr = server.stderr.read().decode() if server.stderr is not None else ""
    assert "building the sandbox in the background" in stderr


def test_a_call_during_the_build_waits_for_it_then_is_refused_without_counting(tmp_path: Path) -> None:
    released = threading.Event()
    made: list[SandboxInterface] = []

    def maker(
        settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
    ) -> SandboxInterface:  # the real sandbox's maker, held back until released
        from pau_mcp.sandboxing import make_sandbox

        released.wait(30)
        box = make_sandbox(settings)
        made.append(box)
        return box

    settings = Settings(cache_dir=None)  # the machine's cache, built: only the maker is slow here
    sandbox = BackgroundSandbox(settings, maker, wait_s=0.5)
    try:
        assert not sandbox.ready
        # The component is built here: only the sandbox's start is slow, and the refusal says so.
        with pytest.raises(
            SandboxNotReady, match=r"still starting \(\d+ s so far\): this call did not run and does not"
        ):
            anyio.run(sandbox.acall, "def test_func(a):\n    return a + 1\n", "(1,)")
        assert anyio.run(sandbox.aparse_arguments, "(1, 'a')") == (1, "a")  # parsing needs no sandbox
        released.set()
        assert sandbox.call("def test_func(a):\n    return a + 1\n", "(1,)").value == "2"  # waits, then runs
        assert anyio.run(sandbox.acall, "def test_func(a):\n    return a * 3\n", "(2,)").value == "6"
    finally:
        released.set()
        sandbox.close()
    assert made and made[0]._closed


def test_with_a_built_sandbox_a_stdio_server_does_not_wait_for_its_first_worker_before_serving() -> None:
    # The stdio server made its sandbox before it read its first request: with the component built, that was the
    # wait for a worker process to start (0.2-0.5 s of the handshake's wall time on a busy machine). Now the worker
    # starts beside the handshake, and a call waits for it.
    released = threading.Event()
    entered = threading.Event()

    def maker(
        settings: Settings, progress: Callable[[str], None] | None = None, processes: bool = False
    ) -> SandboxInterface:  # the real sandbox's maker, its worker slow to start
        from pau_mcp.sandboxing import make_sandbox

        entered.set()
        released.wait(30)
        return make_sandbox(settings)

    settings = Settings(cache_dir=None)  # the machine's cache, built
    assert artifacts(settings.cache_dir).built
    made: list[SandboxInterface] = []
    making = threading.Thread(target=lambda: made.append(background(maker)(settings, processes=True)), daemon=True)
    making.start()
    try:
        assert entered.wait(30)
        making.join(timeout=10)
        assert made, "the server waited for its sandbox before serving"
        sandbox = made[0]
        assert isinstance(sandbox, BackgroundSandbox) and not sandbox.ready
        released.set()
        assert anyio.run(sandbox.acall, "def test_func(a):\n    return a + 1\n", "(1,)").value == "2"
    finally:
        released.set()
        making.join(timeout=30)
        for box in made:
            box.close()


def test_a_server_start_imports_neither_the_oauth_library_nor_a_schema_validator_nor_the_model_clients() -> None:
    # Each cost a stdio handshake 30-50 ms of CPU at every start, for a feature that start may never use: OAuth
    # (joserfc, with cryptography), tool argument checks (jsonschema: on the first call instead) and `--docs`
    # (pau_mcp.llm, through the description checks).
    script = (
        "import sys; import pau_mcp.cli.serve, pau_mcp.server, pau_mcp.documentation, pau_mcp.oauth; "
        "print(sorted({'joserfc', 'jsonschema', 'pau_mcp.llm'} & set(sys.modules)))"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert shown.stdout.strip() == "[]", shown.stdout + shown.stderr
