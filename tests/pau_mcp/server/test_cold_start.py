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
from pathlib import Path

import anyio
import pytest
from conftest import ROOT

from pau_mcp.config import Settings
from pau_mcp.sandboxing import BackgroundSandbox, SandboxNotReady
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


@pytest.mark.parametrize("method", list(HANDSHAKES))
def test_a_stdio_server_answers_the_handshake_before_its_first_sandbox_build_is_done(tmp_path: Path, method) -> None:
    cache = tmp_path / "empty-cache"
    command = [sys.executable, "-m", "pau_mcp", "serve", "--db", str(tmp_path / "runs.db"), "--cache-dir", str(cache)]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert server.stdin is not None and server.stdout is not None
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": HANDSHAKES[method]}
        server.stdin.write(json.dumps(request).encode() + b"\n")
        server.stdin.flush()
        answered: list[bytes] = []
        reader = threading.Thread(target=lambda: answered.append(server.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=120)
        assert answered, "no answer to the handshake"
        cpu = _cpu_s(server.pid)
        reply = json.loads(answered[0])
        assert reply["id"] == 1 and "result" in reply
        assert reply["result"]["capabilities"]["tools"] is not None
        assert not artifacts(cache).built  # answered while the build goes on
        assert cpu < 2.0, f"the server spent {cpu:.2f} s of CPU before answering"
    finally:
        if server.stdin is not None:
            server.stdin.close()  # as a host that quits: the server exits, and takes its unfinished build with it
        server.wait(timeout=60)
    stderr = server.stderr.read().decode() if server.stderr is not None else ""
    assert "building the sandbox in the background" in stderr


def test_a_call_during_the_build_waits_for_it_then_is_refused_without_counting(tmp_path: Path) -> None:
    released = threading.Event()
    made: list[object] = []

    def maker(settings, progress=None, processes=False):  # the real sandbox's maker, held back until released
        from pau_mcp.sandboxing import make_sandbox

        released.wait(30)
        box = make_sandbox(settings)
        made.append(box)
        return box

    settings = Settings(cache_dir=None)  # the machine's cache, built: only the maker is slow here
    sandbox = BackgroundSandbox(settings, maker, wait_s=0.5)
    try:
        assert not sandbox.ready
        with pytest.raises(SandboxNotReady, match="still being built .* did not run and does not count"):
            anyio.run(sandbox.acall, "def test_func(a):\n    return a + 1\n", "(1,)")
        assert anyio.run(sandbox.aparse_arguments, "(1, 'a')") == (1, "a")  # parsing needs no sandbox
        released.set()
        assert sandbox.call("def test_func(a):\n    return a + 1\n", "(1,)").value == "2"  # waits, then runs
        assert anyio.run(sandbox.acall, "def test_func(a):\n    return a * 3\n", "(2,)").value == "6"
    finally:
        released.set()
        sandbox.close()
    assert made and made[0]._closed  # type: ignore[attr-defined]
