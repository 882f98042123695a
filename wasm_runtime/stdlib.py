"""Which standard-library modules the sandbox bundles, and why some are left out.

Hidden functions may import any standard-library module that works without
files, network, processes, threads or a terminal. The guest imports all of
them at build time (only modules imported then are in the component). This
module is pure standard library: the guest build imports a copy of it.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ABSENT_FROM_WASI_BUILD", "EXCLUDED", "modules_to_bundle"]

#: Modules deliberately not bundled, each with the reason.
EXCLUDED: dict[str, str] = {
    "__phello__": "a test package of CPython's freezing machinery",
    "antigravity": "opens a web browser",
    "this": "prints a poem when imported",
    "idlelib": "the IDLE editor: needs a GUI",
    "tkinter": "needs a GUI",
    "turtle": "needs a GUI",
    "turtledemo": "needs a GUI",
    "pydoc": "an interactive help browser and HTTP server",
    "pydoc_data": "data for pydoc",
    "ensurepip": "installs pip: needs files and processes",
    "venv": "creates virtual environments: needs files and processes",
    "lib2to3": "a source translator that reads grammar files",
    "msilib": "Windows only",
}


#: Modules the guest's CPython (built for WASI by componentize-py) does not have at all: their C
#: parts were not compiled for WebAssembly, or they wrap an operating-system facility WASI lacks.
#: The guest tries to import them anyway; ``pau-mcp sandbox info`` lists what is absent.
ABSENT_FROM_WASI_BUILD: dict[str, str] = {
    "bz2": "the _bz2 C extension (libbz2) is not in the WASI build",
    "lzma": "the _lzma C extension (liblzma) is not in the WASI build",
    "ctypes": "calls native code: impossible in WebAssembly",
    "curses": "needs a terminal library",
    "readline": "needs a terminal library",
    "termios": "needs a terminal",
    "tty": "needs termios",
    "pty": "needs termios and processes",
    "fcntl": "file-descriptor control is not part of WASI",
    "mmap": "memory-mapped files are not part of WASI",
    "resource": "process resource limits are not part of WASI",
    "grp": "no user database in WASI",
    "pwd": "no user database in WASI",
    "syslog": "no system logger in WASI",
    "ssl": "the _ssl C extension (OpenSSL) is not in the WASI build",
    "msvcrt": "Windows only",
    "nt": "Windows only",
    "winreg": "Windows only",
    "winsound": "Windows only",
}


def modules_to_bundle(stdlib_module_names: Iterable[str]) -> list[str]:
    """Return the public top-level modules to import at build time.

    Args:
        stdlib_module_names: ``sys.stdlib_module_names`` of the interpreter
            that will run the modules (the guest's, not the host's).

    Returns:
        Sorted names without a leading underscore and not in ``EXCLUDED``.
        Some of them may still be absent from a given CPython build; the
        guest skips those and reports them.
    """
    return sorted(name for name in stdlib_module_names if not name.startswith("_") and name not in EXCLUDED)
