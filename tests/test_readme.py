"""README.md as a newcomer reads it: its layout table matches the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_layout_table_names_every_package_top_level_module_and_folder() -> None:
    """A newcomer finds where each part lives from README.md's layout table."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([^`]+)`", table))
    parts = [f"pau_mcp/{p.name}/" for p in (ROOT / "pau_mcp").iterdir() if (p / "__init__.py").exists()]
    parts += [f"pau_mcp/{p.name}" for p in (ROOT / "pau_mcp").glob("*.py") if not p.name.startswith("__")]
    parts += [f"pau_mcp/{p.name}" for p in (ROOT / "pau_mcp").glob("*.json")]
    parts += [
        f"{p.name}/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".", "_")) and p.name != "pau_mcp"
    ]
    parts = [part for part in parts if not part.endswith(".egg-info/") and part not in ("build/", "dist/", "runs/")]
    assert sorted(part for part in parts if part not in named) == []
