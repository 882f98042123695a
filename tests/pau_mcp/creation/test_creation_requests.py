"""Creation requests as library calls (``creation.requests``): a request that cannot be carried out comes back as
data with a status and a message that says what to do, before any model is asked or any sandbox made."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from pau_mcp.config import Settings
from pau_mcp.creation.requests import TasksRequest, make_tasks
from pau_mcp.creation.tasks import TaskOptions


def _no_sandbox() -> NoReturn:
    raise AssertionError("a refused request must not make a sandbox")


def test_tasks_are_not_written_into_a_packaged_suite(tmp_path: Path) -> None:
    settings = Settings.from_options(data_dir=tmp_path)
    made = make_tasks(TasksRequest("builtin", TaskOptions(model="openai/m")), settings, sandbox=_no_sandbox)
    assert made.status == "usage" and made.report is None
    assert "cp -r" in made.message and "--manifests DIR" in made.message


def test_tasks_for_a_missing_suite_are_an_error(tmp_path: Path) -> None:
    settings = Settings.from_options(data_dir=tmp_path)
    made = make_tasks(TasksRequest("no-such-suite", TaskOptions(model="openai/m")), settings, sandbox=_no_sandbox)
    assert made.status == "error"
    assert "no-such-suite" in made.message
