"""When a file was first published: the oldest commit that added it, read from one `git log` of the folder; else
its modification time, said as such."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

from pau_mcp.creation.dating import _first_commits, date_files


def _commit(folder: Path, message: str, when: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}  # fmt: skip
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(folder), "commit", "-qm", message], check=True, env=env)


def test_a_files_first_commit_dates_it_even_when_it_was_removed_and_added_again(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "funcs").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    odd = "odd\nname @ 2026-01-01.py"  # a line break and a date in a name cannot pass for a commit's date
    (repo / "funcs" / "a.py").write_text("x = 1\n")
    (repo / "funcs" / odd).write_text("y = 1\n")
    _commit(repo, "first", "2025-02-03T23:30:00-05:00")  # 2025-02-04 in UTC
    (repo / "funcs" / "a.py").unlink()
    _commit(repo, "removed", "2025-06-01T00:00:00+00:00")
    (repo / "funcs" / "a.py").write_text("x = 2\n")
    (repo / "funcs" / "b.py").write_text("z = 1\n")
    _commit(repo, "again", "2026-04-05T10:00:00+00:00")
    (repo / "funcs" / "loose.py").write_text("w = 1\n")
    os.utime(repo / "funcs" / "loose.py", (0, datetime(2026, 7, 8, 12, tzinfo=UTC).timestamp()))
    files = sorted((repo / "funcs").iterdir())
    dated = {path.name: (d.day, d.by) for path, d in date_files(files, repo / "funcs").items()}
    assert dated == {
        "a.py": (date(2025, 2, 4), "git"), odd: (date(2025, 2, 4), "git"), "b.py": (date(2026, 4, 5), "git"),
        "loose.py": (date(2026, 7, 8), "mtime"),
    }  # fmt: skip


def test_a_folder_outside_git_is_dated_by_modification_time(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("x = 1\n")
    os.utime(tmp_path / "f.py", (0, datetime(2024, 1, 2, tzinfo=UTC).timestamp()))
    assert {p.name: (d.day, d.by) for p, d in date_files([tmp_path / "f.py"], tmp_path).items()} == {
        "f.py": (date(2024, 1, 2), "mtime")
    }


def test_git_output_that_makes_no_sense_dates_nothing() -> None:
    assert _first_commits("") == {}
    assert _first_commits("\0\0not a date\0\na.py\0") == {}
    assert _first_commits("a.py\0b.py\0") == {}  # names before any commit header
