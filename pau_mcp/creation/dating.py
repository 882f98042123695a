"""When each of your files was first published: the first commit that added it, in git, else its modification time.

``pau-mcp create FOLDER --after DAY`` takes only functions first published after ``DAY`` (a rotation: a split whose
functions no model released before that day can have read). A file's day is the committer date of the oldest commit
that added it at its path (``git log --diff-filter=A``), read with one ``git log`` for the whole folder; a file git
does not know (no repository, not committed, git not installed) is dated by its modification time, and every
function says which (``dated_by``: ``git`` or ``mtime``). Days are UTC. An mtime is only as good as the copy that
set it: a checkout or an extracted archive sets it anew.

git runs with its output capped and a deadline, and with the settings that could run a program (fsmonitor, hooks)
turned off; its output is read as NUL-separated names, so no file name can pass for a date.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

__all__ = ["Dated", "date_files"]

_GIT_DEADLINE_S = 60.0
_MAX_GIT_OUTPUT = 16 * 1024 * 1024
_HEADER = "%x00%x00%cI"  # two NULs (never inside a name) and the committer date: one commit's header


@dataclass(frozen=True)
class Dated:
    """A file's first publication: the day, and how it is known."""

    day: date
    by: Literal["git", "mtime"]


def _git_log(folder: Path) -> str | None:
    """``git log`` of the commits adding files under ``folder``, or None (no git, no repository, too long)."""
    git = shutil.which("git")
    if git is None:
        return None
    command = [
        git, "-C", str(folder), "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager", "log",
        "--diff-filter=A", "--no-renames", f"--format={_HEADER}", "--name-only", "--relative", "-z", "--", ".",
    ]  # fmt: skip
    try:
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        ) as git_log:
            assert git_log.stdout is not None
            try:
                data = git_log.stdout.read(_MAX_GIT_OUTPUT + 1)
                if len(data) > _MAX_GIT_OUTPUT:
                    git_log.kill()
                    return None
                code = git_log.wait(timeout=_GIT_DEADLINE_S)
            finally:
                if git_log.poll() is None:
                    git_log.kill()
    except (OSError, subprocess.SubprocessError):
        return None
    return data.decode("utf-8", "surrogateescape") if code == 0 else None


def _first_commits(log: str) -> dict[str, date]:
    """Each path's oldest adding commit's day, from ``_git_log``'s output (newest commit first)."""
    found: dict[str, date] = {}
    tokens = log.split("\0")
    day: date | None = None
    first = False
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token == "" and at + 2 < len(tokens) and tokens[at + 1] == "":
            try:
                day = datetime.fromisoformat(tokens[at + 2]).astimezone(UTC).date()
            except ValueError:
                day = None
            at, first = at + 3, True
            continue
        if token and day is not None:
            name = token[1:] if first and token.startswith("\n") else token  # git puts a line end before the list
            found[name] = day  # later tokens are older commits: the oldest wins
        first = False
        at += 1
    return found


def date_files(files: Sequence[Path], folder: Path) -> dict[Path, Dated]:
    """The first-publication day of each file of ``folder``: its first commit where git knows it, else its mtime."""
    log = _git_log(folder)
    committed = _first_commits(log) if log is not None else {}
    dated: dict[Path, Dated] = {}
    for file in files:
        day = committed.get(file.name)
        if day is not None:
            dated[file] = Dated(day, "git")
        else:
            try:
                modified = file.stat().st_mtime
            except OSError:  # a link to nowhere: its own time (reading it is refused later, with the reason)
                modified = file.lstat().st_mtime
            dated[file] = Dated(datetime.fromtimestamp(modified, UTC).date(), "mtime")
    return dated
