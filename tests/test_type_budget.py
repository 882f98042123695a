"""The tests' type gate (tests/type_budget.py): over the budget fails, under it asks for a lower one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import type_budget


@pytest.fixture
def budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A budget of 5 errors (3 in a.py, 2 in b.py), in a file of the test's own."""
    path = tmp_path / "type_budget.json"
    path.write_text(json.dumps({"errors": 5, "files": {"tests/a.py": 3, "tests/b.py": 2}}))
    monkeypatch.setattr(type_budget, "BUDGET", path)
    return path


def _count(monkeypatch: pytest.MonkeyPatch, **errors: int) -> None:
    found = {
        f"tests/{name}.py": [f"tests/{name}.py:{i}: error: wrong  [misc]" for i in range(n)]
        for name, n in errors.items()
    }
    monkeypatch.setattr(type_budget, "find_errors", lambda: found)


def test_errors_over_the_budget_fail_and_name_the_files_that_grew(
    budget: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _count(monkeypatch, a=3, b=1, c=2)
    assert type_budget.main([]) == 1
    out = capsys.readouterr().out
    assert "6 mypy --strict errors in tests/, over the budget of 5" in out
    assert "tests/c.py: 0 -> 2\n  tests/c.py:0: error: wrong  [misc]\n  tests/c.py:1: error" in out
    assert "tests/a.py" not in out and "tests/b.py" not in out


def test_errors_under_the_budget_pass_and_ask_for_it_to_be_lowered(
    budget: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _count(monkeypatch, a=1, b=2)
    assert type_budget.main([]) == 0
    assert "under the budget of 5: lower it with `python tests/type_budget.py --write`" in capsys.readouterr().out
    assert json.loads(budget.read_text())["errors"] == 5


def test_write_lowers_the_budget_and_never_raises_it(budget: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _count(monkeypatch, a=1, b=2)
    assert type_budget.main(["--write"]) == 0
    assert json.loads(budget.read_text())["errors"] == 3
    assert json.loads(budget.read_text())["files"] == {"tests/a.py": 1, "tests/b.py": 2}
    _count(monkeypatch, a=4)
    assert type_budget.main(["--write"]) == 1
    assert json.loads(budget.read_text())["errors"] == 3


def test_the_test_files_are_checked_once_each_with_their_own_conftest() -> None:
    batches = type_budget._batches()
    files = [p for batch in batches for p in batch]
    assert len(files) == len(set(files)) == len([p for p in type_budget.TESTS.rglob("*.py") if ".venv" not in p.parts])
    for batch in batches:
        conftests = [p for p in batch if p.name == "conftest.py"]
        assert len(conftests) == 1
        assert all(p.parent == conftests[0].parent for p in batch) or conftests[0].parent == type_budget.TESTS
