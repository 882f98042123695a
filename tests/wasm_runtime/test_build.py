"""The guest component is built once per source and tool version, cached, and recovered when damaged."""

from __future__ import annotations

import shutil

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
