"""Fixtures of the interop tests: each test gets its own data directory (run store, tool key by environment)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # interop_support, beside this file

from interop_support import KEY  # noqa: E402


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory for the servers of one test; commands in the test process use the same tool key."""
    monkeypatch.setenv("PAU_MCP_TOOL_KEY", KEY)
    path = tmp_path / "data"
    path.mkdir()
    return path
