"""The guest component is built once per source and tool version, cached, and recovered when damaged; a build
never outlives the process that started it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wasm_runtime import CacheError, Sandbox, _integrity, build


def test_the_cache_key_follows_the_guest_source_and_tool_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = build.artifacts(tmp_path)
    assert first == build.artifacts(tmp_path)
    monkeypatch.setattr(build, "_versions", lambda: {"componentize-py": "0.0.0", "wasmtime": "0.0.0"})
    assert build.artifacts(tmp_path).key != first.key


def test_a_built_cache_is_used_without_building_again(sandbox: Sandbox) -> None:
    steps: list[str] = []
    Sandbox(cache_dir=sandbox.artifacts.wasm.parent, progress=steps.append)
    assert steps == []


def test_a_damaged_compiled_file_is_never_loaded(sandbox: Sandbox, tmp_path: Path) -> None:
    # What happens next (compiled again from the cached component, then used) is the same path as for a file changed
    # by one bit: test_a_compiled_file_changed_after_its_build_is_never_loaded_but_compiled_again runs it.
    art = _copy_built(sandbox, tmp_path / "cache")
    art.cwasm.write_bytes(b"not a compiled component")
    assert "does not match the digest recorded when it was built" in (build._load_problem(art) or "")


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
def test_a_build_in_progress_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
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


# --- What the cache may hold (issue 32: planted files) ----------------------------------------------------------


_PLANTED_LIBRARY = """
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("ran", f); fclose(f); }
}
"""


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler to make the planted library")
def test_a_library_planted_in_the_cache_never_runs_during_a_build(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    marker = tmp_path / "planted-ran"
    source = tmp_path / "planted.c"
    source.write_text(_PLANTED_LIBRARY % marker)
    shim = build._GUEST_DIR / "deterministic_build.c"
    names = [f"deterministic-{hashlib.sha256(shim.read_bytes()).hexdigest()[:12]}.so", "deterministic_build.so"]
    for name in names:  # where earlier versions kept the build's preload library, and its name in the build
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(cache / name), str(source)], check=True)
    art = build.artifacts(cache)
    assert build._componentize(art, lambda _line: None) is True  # the build's own library was preloaded
    assert art.wasm.exists()
    assert not marker.exists(), "a library planted in the cache ran on the host during the build"


def _copy_built(sandbox: Sandbox, folder: Path) -> build.GuestArtifacts:
    folder.mkdir(mode=0o700)
    for path in (sandbox.artifacts.wasm, sandbox.artifacts.cwasm, sandbox.artifacts.meta):
        shutil.copy2(path, folder / path.name)
    return build.artifacts(folder)


@pytest.mark.slow
def test_a_compiled_file_changed_after_its_build_is_never_loaded_but_compiled_again(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    art = _copy_built(sandbox, tmp_path / "cache")
    data = bytearray(art.cwasm.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of the native code, size and times kept
    status = art.cwasm.stat()
    art.cwasm.write_bytes(bytes(data))
    os.utime(art.cwasm, ns=(status.st_atime_ns, status.st_mtime_ns))
    steps: list[str] = []
    box = Sandbox(cache_dir=art.cwasm.parent, progress=steps.append, pool_size=0)
    try:
        assert any("does not match the digest recorded when it was built" in step for step in steps), steps
        assert any("compiling the component" in step for step in steps)
        assert not any("componentize-py" in step for step in steps), "compiled from the cached component, not built"
        assert art.cwasm.read_bytes() != bytes(data)
        assert box.call("def test_func():\n    return 'alive'", "()").value == "'alive'"
    finally:
        box.close()


def test_a_compiled_file_without_a_recorded_digest_is_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    art = _copy_built(sandbox, tmp_path / "cache")
    meta = json.loads(art.meta.read_text())
    meta.pop("seals", None)
    art.meta.write_text(json.dumps(meta))
    assert "has no recorded digest" in (build._load_problem(art) or "")


@pytest.mark.parametrize("handed", [False, True], ids=["resolved-here", "handed-by-a-parent"])
def test_a_cache_directory_other_users_can_write_is_refused_before_anything_is_loaded(
    sandbox: Sandbox, tmp_path: Path, handed: bool
) -> None:
    # A worker process starts from its parent's artifacts (WorkerSandbox), skipping the version lookup, never this.
    art = _copy_built(sandbox, tmp_path / "cache")
    given = art if handed else None
    art.cwasm.parent.chmod(0o777)
    with pytest.raises(CacheError, match="not private: .* can be written by other users.*--cache-dir"):
        Sandbox(cache_dir=art.cwasm.parent, pool_size=0, artifacts=given)
    art.cwasm.parent.chmod(0o700)
    art.cwasm.chmod(0o666)
    with pytest.raises(CacheError, match="can be written by other users"):
        Sandbox(cache_dir=art.cwasm.parent, pool_size=0, artifacts=given)


def test_a_sealed_file_is_hashed_again_only_when_its_stamp_changes(tmp_path: Path) -> None:
    path = tmp_path / "file.cwasm"
    path.write_bytes(b"compiled code" * 1000)
    recorded = _integrity.seal(path)
    assert _integrity.seal_problem(path, recorded) is None
    path.write_bytes(b"Compiled code" * 1000)  # same size; the change time moves
    assert "does not match the digest" in (_integrity.seal_problem(path, recorded) or "")
    assert "no recorded digest" in (_integrity.seal_problem(path, None) or "")


def test_a_compiled_file_handed_by_a_parent_is_checked_against_its_digest_before_loading(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    art = _copy_built(sandbox, tmp_path / "cache")
    meta = json.loads(art.meta.read_text())
    meta["seals"][art.cwasm.name] = {"sha256": "0" * 64, "stamp": None}  # hashed again, and another digest
    art.meta.write_text(json.dumps(meta))

    class Refused(Exception):
        pass

    def stop(line: str) -> None:  # the note comes before the compile again, which this test does not need to run
        raise Refused(line)

    with pytest.raises(Refused, match="does not match the digest recorded when it was built"):
        build.load_component(build.new_engine(), art.cwasm.parent, stop, known=art)
