"""Every third-party module the code imports comes from a distribution pyproject.toml declares."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Modules whose distribution has another name, for when it is not installed here (an extra for another Python).
_DISTRIBUTION_OF = {"hydra": "hydra-core"}


def _imported() -> set[str]:
    names: set[str] = set()
    for package in ("pau_mcp", "wasm_runtime"):
        for path in (ROOT / package).rglob("*.py"):
            if "guest" in path.parts:  # runs inside the sandbox, built from the guest's own modules
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("pau_mcp", "wasm_runtime")}


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module in sorted(_imported()):
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [_DISTRIBUTION_OF.get(module, module)])}
        if not names & _declared():
            undeclared[module] = sorted(names)
    assert undeclared == {}


def test_the_mcp_sdk_is_a_range_within_its_major_version_not_a_pin() -> None:
    mcp = [
        r
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if r.startswith("mcp")
    ]
    assert "mcp>=2.3,<3" in mcp
