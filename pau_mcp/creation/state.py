"""The state file of a creation run: what is decided survives a kill, so a second run goes on where the first stopped.

A JSON-lines file: a header line with the run's options, then one line per function, written (and flushed to
disk) the moment the function is decided. A killed run leaves at worst half a line, which is ignored; functions
in flight at the kill are done again, their model replies coming from the response cache. The state holds
sources and gold descriptions: it lives in the operator's data directory (``DATA_DIR/creation/``) and is never
published.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .outcomes import Record

__all__ = ["StateError", "StateFile"]

_VERSION = 1


class StateError(ValueError):
    """The state file belongs to a run with other options; the message says how to go on."""


class StateFile:
    """The state of one creation run.

    Args:
        path: The file (made with its directory on first write).
        options: What makes the run the run it is (source, models, seed, thresholds, ...): a resumed run must
            have the same.
        restart: Forget what the file holds and start again.

    Raises:
        StateError: The file records a run with different options (and ``restart`` is off).
    """

    def __init__(self, path: Path, options: dict[str, Any], restart: bool = False) -> None:
        self.path = path
        self.options = {"version": _VERSION, **options}
        self.done: dict[str, Record] = {}
        if restart and path.exists():
            path.unlink()
        if path.exists():
            self._read()
        else:
            self._write_line({"options": self.options})

    def _read(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        header = _parse(lines[0]) if lines else None
        if header is None or "options" not in header:
            raise StateError(f"{self.path} is not a state file of pau-mcp create; remove it or pass --restart")
        if header["options"] != self.options:
            changed = sorted(
                k for k in set(header["options"]) | set(self.options) if header["options"].get(k) != self.options.get(k)
            )
            shown = ", ".join(f"{k} was {header['options'].get(k)!r}" for k in changed)
            raise StateError(
                f"{self.path} holds a run with other options ({shown}); give the same options to resume it, "
                "--restart to begin again, or another --suite"
            )
        for line in lines[1:]:
            data = _parse(line)  # a line cut short by a kill does not parse: that function is done again
            if data is not None and "key" in data:
                record = Record.from_dict(data)
                self.done[record.key] = record

    def record(self, record: Record) -> None:
        """Keep one decided function, on disk before this returns."""
        self._write_line(record.to_dict())
        self.done[record.key] = record

    def _write_line(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, ensure_ascii=False) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            if handle.tell() > 0 and not self._ends_with_newline():
                handle.write("\n")  # after half a line left by a kill: the next record starts on its own line
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"


def _parse(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
