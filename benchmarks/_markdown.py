"""Writing a benchmark's table into its section of docs/benchmarks.md (between its start and end markers)."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["PAGE", "write_section"]

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(name: str, body: str, path: Path = PAGE) -> None:
    """Replace the text between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{path} has no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{body}\n{end}{tail}")
    print(f"updated {path}", file=sys.stderr)
