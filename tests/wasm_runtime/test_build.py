"""The guest component is built once per source and tool version, cached, and recovered when damaged; a build
never outlives the process that started it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from wasm_runtime import Sandbox, build


def test_the_cache_key_follows_the_guest_source_and_tool_versions(monkeypatch, tmp_path):
    first = build.artifacts(tmp_path)
    assert first == build.artifacts(tmp_path)
    monkeypatch.setattr(build, "_versions", lambda: {"componentize-py": "0.0.0", "wasmtime": "0.0.0"})
    assert build.artifacts(tmp_path).key != first.key


def test_a_built_cache_is_used_without_building_again(sandbox):
    steps: list[str] = []
    Sandbox(cache_dir=sandbox.artifacts.wasm.parent, progress=steps.append)
    assert steps == []


@pytest.mark.slow
def test_a_damaged_compiled_file_is_compiled_again_from_the_cached_component(sandbox, tmp_path):
    art = sandbox.artifacts
    shutil.copy(art.wasm, tmp_path / art.wasm.name)
    shutil.copy(art.meta, tmp_path / art.meta.name)
    (tmp_path / art.cwasm.name).write_bytes(b"not a compiled component")
    steps: list[str] = []
    box = Sandbox(cache_dir=tmp_path, progress=steps.append)
    assert any("compiling" in step for step in steps)
    assert not any("componentize-py" in step for step in steps)
    assert box.call("def test_func():\n    return 'alive'", "()").value == "'alive'"


def _processes_started_by(parent: int) -> dict[int, str]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] != "Z":
                found[int(entry)] = command
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_build_in_progress_ends_when_the_process_that_started_it_is_killed(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", f"from wasm_runtime import build\nbuild.ensure_built({str(tmp_path)!r})"]
    )
    try:
        deadline = time.monotonic() + 60
        builders: dict[int, str] = {}
        while not builders and time.monotonic() < deadline:
            builders = {p: c for p, c in _processes_started_by(parent.pid).items() if "componentize_py" in c}
            time.sleep(0.05)
        assert builders, "the build never started componentize-py"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(os.path.exists(f"/proc/{pid}") and _running(pid) for pid in builders):
            assert time.monotonic() < deadline, "componentize-py outlived the process that started it"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
