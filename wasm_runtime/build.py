"""Builds the guest component from the project's guest source, and caches it.

Two steps, each cached under the user cache directory and keyed by the guest
source, the tool versions and the engine settings:

1. ``componentize-py`` turns ``guest/pau_guest.py`` (with the encoding and the
   standard-library policy) into a WebAssembly component (.wasm, ~30 MB).
2. wasmtime compiles it to native code (.cwasm), loaded later in milliseconds.

The build process gets a constant entropy source and frozen clocks
(``deterministic_build.c``, preloaded) so that what the snapshot keeps of the
build machine (CPython's string hash secret, the C library's start time,
modules' import times) is the same on every machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime.component import Component

from ._integrity import CacheError, check_private, seal, seal_problem
from ._signals import remember_trap_handlers

__all__ = [
    "BuildError",
    "CacheError",
    "GuestArtifacts",
    "Progress",
    "artifacts",
    "default_cache_dir",
    "ensure_built",
    "load_component",
    "new_engine",
]

Progress = Callable[[str], None]
_log = logging.getLogger(__name__)

_GUEST_DIR = Path(__file__).parent / "guest"
_SHARED_MODULES = {
    "_pau_values.py": Path(__file__).parent / "values.py",
    "_pau_stdlib.py": Path(__file__).parent / "stdlib.py",
}
_GUEST_FILES = [_GUEST_DIR / "pau_guest.py", _GUEST_DIR / "guest.wit", _GUEST_DIR / "deterministic_build.c"]
# Settings that change the compiled code: part of the .cwasm cache key.
_ENGINE_SETTINGS = {"consume_fuel": True, "epoch_interruption": True, "max_wasm_stack": 2 * 1024 * 1024}


# componentize-py runs in a child process that must not outlive the process that asked for the build (kill -9
# included). PR_SET_PDEATHSIG fires when the thread that started the child ends; that thread waits in
# subprocess.run until the child is done, so here it means the parent process.
_COMPONENTIZE = (
    "import ctypes, os, signal, sys\n"
    "parent = int(sys.argv.pop(1))\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != parent:\n"
    "    sys.exit('the process that started this build has ended')\n"
    "from componentize_py import script\n"
    "sys.argv[0] = 'componentize-py'\n"
    "sys.exit(script())\n"
)


#: componentize-py takes about 10 s (a minute on a loaded machine); a build still running after this is stopped.
_COMPONENTIZE_TIMEOUT_S = 900


class BuildError(RuntimeError):
    """Building the guest component failed; the message says what to do."""


def new_engine() -> wasmtime.Engine:
    """An engine configured for the sandbox: fuel metering and epoch interruption on."""
    config = wasmtime.Config()
    config.consume_fuel = _ENGINE_SETTINGS["consume_fuel"]
    config.epoch_interruption = _ENGINE_SETTINGS["epoch_interruption"]
    config.max_wasm_stack = _ENGINE_SETTINGS["max_wasm_stack"]
    engine = wasmtime.Engine(config)
    remember_trap_handlers()  # the first engine installed wasmtime's trap handlers (_signals)
    return engine


def default_cache_dir() -> Path:
    """The user cache directory for built components (``~/.cache/pau-mcp/sandbox`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("pau-mcp")) / "sandbox"


def _versions() -> dict[str, str]:
    from importlib import metadata  # 15-20 ms to import: a worker handed its parent's artifacts never needs it

    return {"componentize-py": metadata.version("componentize-py"), "wasmtime": metadata.version("wasmtime")}


@dataclass(frozen=True)
class GuestArtifacts:
    """Where the build outputs of one guest version live.

    Attributes:
        key: Hash of the guest source and the tool versions.
        wasm: The component built by componentize-py.
        cwasm: The component compiled by wasmtime for this machine.
        meta: JSON metadata written next to the component.
    """

    key: str
    wasm: Path
    cwasm: Path
    meta: Path

    @property
    def built(self) -> bool:
        """True when the compiled component exists."""
        return self.cwasm.exists() and self.meta.exists()

    def metadata(self) -> dict[str, Any]:
        """The metadata of the build, or an empty dict before the first build."""
        try:
            data: dict[str, Any] = json.loads(self.meta.read_text())
            return data
        except (OSError, ValueError):
            return {}


def artifacts(cache_dir: Path | None = None) -> GuestArtifacts:
    """The artifact paths for the current guest source and tool versions."""
    digest = hashlib.sha256()
    for path in [*_GUEST_FILES, *_SHARED_MODULES.values()]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(json.dumps(_versions(), sort_keys=True).encode())
    key = digest.hexdigest()[:16]
    engine_key = hashlib.sha256(
        json.dumps([_ENGINE_SETTINGS, sys.platform, os.uname().machine], sort_keys=True).encode()
    ).hexdigest()[:8]
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return GuestArtifacts(
        key=key,
        wasm=root / f"guest-{key}.wasm",
        cwasm=root / f"guest-{key}-{engine_key}.cwasm",
        meta=root / f"guest-{key}.json",
    )


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """Serialises builds across processes: parallel test workers all want the same component."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as handle:
        try:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: builds may overlap; outputs are still written atomically
            pass
        yield


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _compile_build_shim(work_dir: Path, say: Progress) -> Path | None:
    """Compile the preload library of constant entropy and frozen clocks into the build's own private directory.

    It is compiled for every build, never taken from the cache: whatever library the build preloads runs on
    this host, and a file planted in a shared cache directory must never be one.

    Returns:
        The library, or None when that is impossible here (not Linux, no C compiler, or it does not compile).
    """
    if not sys.platform.startswith("linux"):
        say("note: deterministic builds need Linux (LD_PRELOAD); this build's string hash order and clocks vary")
        return None
    source = _GUEST_DIR / "deterministic_build.c"
    compiler = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if compiler is None:
        say("note: no C compiler found (set CC or install gcc): this build's string hash order and clocks vary")
        return None
    target = work_dir / "deterministic_build.so"
    result = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(target), str(source)], capture_output=True, text=True
    )
    if result.returncode != 0:
        say(f"note: compiling the build shim failed ({result.stderr.strip()[:200]}): string hash order and clocks vary")
        return None
    return target


def _componentize(art: GuestArtifacts, say: Progress) -> bool:
    with tempfile.TemporaryDirectory(prefix="pau-guest-") as work:  # private to this user (mode 0700)
        work_dir = Path(work)
        shim = _compile_build_shim(work_dir, say)
        shutil.copy(_GUEST_DIR / "pau_guest.py", work_dir / "pau_guest.py")
        for name, path in _SHARED_MODULES.items():
            shutil.copy(path, work_dir / name)
        (work_dir / "wit").mkdir()
        shutil.copy(_GUEST_DIR / "guest.wit", work_dir / "wit" / "guest.wit")
        out = work_dir / "guest.wasm"
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        if shim is not None:
            env["LD_PRELOAD"] = str(shim)
        command = [
            sys.executable,
            "-c",
            _COMPONENTIZE,
            str(os.getpid()),
            "-d", str(work_dir / "wit"), "-w", "guest", "componentize", "pau_guest",
            "-p", str(work_dir), "-o", str(out),
        ]  # fmt: skip
        try:
            # With the clocks frozen, a wait with a time-out inside componentize-py would never time out: bounded here.
            result = subprocess.run(
                command, cwd=work_dir, env=env, capture_output=True, text=True, timeout=_COMPONENTIZE_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"componentize-py did not finish within {_COMPONENTIZE_TIMEOUT_S} s (it takes about 10 s); check "
                "that componentize-py and wasmtime are installed at the versions pyproject.toml pins (another version "
                "may wait on a clock the build freezes, see guest/deterministic_build.c), then run the build again"
            ) from None
        if result.returncode != 0 or not out.exists():
            detail = (result.stderr or result.stdout).strip()
            if len(detail) > 3000:  # the guest's own error comes first; the Rust backtrace after it is noise
                detail = detail[:2500] + "\n...\n" + detail[-400:]
            raise BuildError(
                f"componentize-py could not build the guest component (exit {result.returncode}):\n{detail}\n"
                "Check that componentize-py and wasmtime are installed at the versions pyproject.toml pins."
            )
        _atomic_write(art.wasm, out.read_bytes())
    return shim is not None


def ensure_built(
    cache_dir: Path | None = None, progress: Progress | None = None, force: bool = False
) -> GuestArtifacts:
    """Build and compile the guest component unless the cache already has it.

    Args:
        cache_dir: Where to keep the artifacts; ``default_cache_dir()`` when None.
        progress: Called with a line of text at each step (1 to 2 minutes in all on first use on 2 cores).
        force: Rebuild even when cached.

    Returns:
        The artifact paths, with ``cwasm`` ready to load.

    Raises:
        BuildError: componentize-py or the compiler failed.
        CacheError: The cache directory is not private to this user (``_integrity``).
    """
    say = progress or (lambda _line: None)
    art = artifacts(cache_dir)
    if art.built and not force:
        return art
    art.wasm.parent.mkdir(parents=True, exist_ok=True)
    check_private(art.wasm.parent)
    with _build_lock(art.wasm.parent):
        if art.built and not force:  # another process finished it while we waited
            return art
        meta = {} if force else art.metadata()
        if force or not art.wasm.exists():
            say("building the guest component with componentize-py (about 10 s)...")
            started = time.perf_counter()
            deterministic = _componentize(art, say)
            meta = {
                "key": art.key,
                "versions": _versions(),
                "deterministic_hash": deterministic,
                "build_seconds": round(time.perf_counter() - started, 1),
            }
        say("compiling the component to native code with wasmtime (about 10 s)...")
        started = time.perf_counter()
        component = Component(new_engine(), art.wasm.read_bytes())
        _atomic_write(art.cwasm, bytes(component.serialize()))
        meta["compile_seconds"] = round(time.perf_counter() - started, 1)
        meta.setdefault("seals", {})[art.cwasm.name] = seal(art.cwasm)
        _atomic_write(art.meta, json.dumps(meta, indent=2).encode())
        say(f"sandbox ready: {art.cwasm}")
    return art


def load_component(
    engine: wasmtime.Engine,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    known: GuestArtifacts | None = None,
) -> tuple[Component, GuestArtifacts]:
    """Load the compiled component, building it first when needed.

    ``known`` is the artifacts another process of this installation resolved (a sandbox worker gets its
    parent's): used as they are while built, so the worker skips reading the tools' versions and the guest's files.
    The integrity check below runs either way.

    A compiled file is loaded only from a private cache and with the digest
    recorded when it was compiled (``_integrity``); one that fails the check,
    or that this wasmtime cannot load (another version or CPU), is removed and
    compiled again from the cached .wasm, with a warning saying why.

    Raises:
        CacheError: The cache directory or the file is not private to this user.
        BuildError: Building failed.
    """
    art = known if known is not None and known.built else ensure_built(cache_dir, progress)
    problem = _load_problem(art)
    if problem is None:
        try:
            return Component.deserialize_file(engine, str(art.cwasm)), art
        except wasmtime.WasmtimeError:
            problem = "cannot be loaded by this wasmtime (another version or CPU)"
    note = f"the compiled sandbox {art.cwasm} {problem}: it was removed and is compiled again from the cached component"
    _log.warning("%s", note)
    if progress is not None:
        progress(note)
    art.cwasm.unlink(missing_ok=True)
    art = ensure_built(cache_dir, progress)
    problem = _load_problem(art)
    if problem is not None:
        raise CacheError(f"the compiled sandbox {art.cwasm} {problem} right after it was built; run `pau-mcp sandbox "
                         "build --force`, and check what else writes to the cache directory")  # fmt: skip
    return Component.deserialize_file(engine, str(art.cwasm)), art


def _load_problem(art: GuestArtifacts) -> str | None:
    """What stops ``art.cwasm`` from being loaded as it is (see ``_integrity``), or None."""
    check_private(art.cwasm.parent)
    check_private(art.cwasm)
    seals = art.metadata().get("seals")
    return seal_problem(art.cwasm, seals.get(art.cwasm.name) if isinstance(seals, dict) else None)
