"""The guest program: runs inside WebAssembly, never on the host.

componentize-py executes this module once at build time and snapshots the
interpreter. Everything imported here is in the snapshot; nothing can be
imported later, because the component has no file system at run time.

Per input, the guest gives the hidden function the state of a fresh process:
new globals, a fresh copy of the built-ins, reseeded ``random``, a fresh
output sink, and afterwards restores every module the function could have
changed. See docs/sandbox.md for what this does and does not cover.
"""

import sys

import _pau_stdlib

_IMPORTED = []
_ABSENT = {}
for _name in _pau_stdlib.modules_to_bundle(sys.stdlib_module_names):
    try:
        __import__(_name)
        _IMPORTED.append(_name)
    except BaseException as _exc:  # absent from this CPython build: reported by `sandbox info`
        _ABSENT[_name] = f"{type(_exc).__name__}: {_exc}"

import binascii
import builtins
import gc
import json
import marshal
import random
import struct
import time

import _pau_values
import wit_world
from wit_world.imports import host

_MISSING = object()
_ERROR_CHARS = 500
_REFLECTIVE = frozenset(
    {"sys", "builtins", "importlib", "gc", "inspect", "types", "ctypes", "runpy", "pkgutil", "site", "_imp"}
)


class OutputFlood(BaseException):
    """Raised when the function prints more than the flood limit."""


class _Sink:
    """Stands in for stdout and stderr: keeps the first bytes, counts the rest."""

    def __init__(self) -> None:
        self.reset(0, 0)

    def reset(self, keep: int, flood: int) -> None:
        self.parts = []
        self.kept = 0
        self.total = 0
        self.keep = keep
        self.flood = flood

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.total += len(text)
        if self.kept < self.keep:
            piece = text[: self.keep - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)
        if self.total > self.flood:
            raise OutputFlood()
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        return "".join(self.parts)


def _virtual_sleep(seconds) -> None:
    """time.sleep without waiting: the virtual clock moves, the host never blocks."""
    if not isinstance(seconds, (int, float)):
        raise TypeError(f"'{type(seconds).__name__}' object cannot be interpreted as an integer or float")
    if seconds != seconds:
        raise ValueError("Invalid value NaN (not a number)")
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    host.sleep(min(int(seconds * 1e9), 2**63 - 1))


def _seed(a=None, version=2) -> None:
    """random.seed with the fixed seed 0 in place of fresh entropy.

    The component runtime reseeds ``random`` from the host's entropy on the
    first call of every instance; results must not depend on entropy anyway,
    and seeding from 2.5 KB of host bytes is the slowest step of a fresh call.
    """
    _RANDOM_SEED(0 if a is None else a, version)


def _no_default(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C scanner and encoder, made once and kept in the snapshot. json.loads and
# json.dumps build a decoder or encoder object and walk several Python frames on
# every use, and each object they write to costs a fresh instance a copied page.
_SCAN_JSON = json.decoder.JSONDecoder().scan_once
_ENCODE_JSON = json.encoder.c_make_encoder(
    None, _no_default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
)


def _loads(text: str):
    value, end = _SCAN_JSON(text, 0)
    if end != len(text):
        raise ValueError("extra data after the settings")
    return value


def _dumps(value) -> str:
    return "".join(_ENCODE_JSON(value, 0))


_RANDOM_SEED = random._inst.seed
random.seed = _seed
time.sleep = _virtual_sleep
_SINK = _Sink()
sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _SINK
_BUILTINS = dict(builtins.__dict__)
_REAL_IMPORT = builtins.__import__
_SNAPSHOT = {}  # filled at the end of this module, once every name in it exists


class _Run:
    """Per-input bookkeeping: which modules the function imported."""

    def __init__(self) -> None:
        self.touched = set()
        self.full_restore = False

    def importer(self, name, globals=None, locals=None, fromlist=(), level=0):
        module = _REAL_IMPORT(name, globals, locals, fromlist, level)
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            self.touched.add(".".join(parts[:i]))
        for item in fromlist or ():
            self.touched.add(f"{name}.{item}")
        if parts[0] in _REFLECTIVE:
            self.full_restore = True
        return module


def _restore_dict(current: dict, snapshot: dict) -> None:
    if len(current) == len(snapshot):
        for key, value in snapshot.items():
            if current.get(key, _MISSING) is not value:
                break
        else:
            return
    for key in [key for key in current if key not in snapshot]:
        del current[key]
    current.update(snapshot)


def _restore(run: _Run) -> None:
    if not _SNAPSHOT:  # warming up before the snapshot exists
        return
    modules = sys.modules
    if len(modules) != len(_SNAPSHOT) or run.full_restore:
        for name in [name for name in modules if name not in _SNAPSHOT]:
            del modules[name]
        for name, (module, _) in _SNAPSHOT.items():
            if modules.get(name) is not module:
                modules[name] = module
    for name in _SNAPSHOT.keys() if run.full_restore else run.touched:
        entry = _SNAPSHOT.get(name)
        if entry is not None:
            _restore_dict(entry[0].__dict__, entry[1])


def _message(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        text = error.msg or ""
    else:
        try:
            text = str(error)
        except BaseException:
            text = "<the exception's message could not be shown>"
    return text[:_ERROR_CHARS]


# The lines and arcs of the hidden code the current input ran, while the host asks for a trace
# (``wasm_runtime.tracing``; coverage measured after the fact, never on a served call).
_TRACED = {"current": None}


def _outcome(status: str, **fields) -> dict:
    # The status comes first: the host reads it from the text's start to decide whether the instance goes on.
    outcome = {"status": status, **fields, "stdout": _SINK.text()}
    traced = _TRACED["current"]
    if traced is not None:
        lines, arcs = traced
        outcome["trace"] = {"lines": sorted(lines), "arcs": sorted([a, b] for a, b in arcs)}
    return outcome


def _traced(function, args, lines: set, arcs: set):
    """Call ``function``, recording in every frame of the hidden code each line run and each step between
    two lines (an arc; a frame enters from, and returns to, minus its first line, as coverage.py writes it).

    A Python trace function costs many times the traced code's own work; what the function returns, prints
    or raises is unchanged.
    """

    def enter(frame, event, arg):
        code = frame.f_code
        if code.co_filename != "<hidden>":
            return None
        previous = [-code.co_firstlineno]

        def step(frame, event, arg):
            if event == "line":
                line = frame.f_lineno
                if line is not None:
                    lines.add(line)
                    arcs.add((previous[0], line))
                    previous[0] = line
            elif event == "return":
                arcs.add((previous[0], -code.co_firstlineno))
            return step

        return step

    sys.settrace(enter)
    try:
        return function(*args)
    finally:
        sys.settrace(None)


def _call(code, error, entry: str, arguments: str, settings: dict) -> dict:
    _SINK.reset(settings["stdout_chars"], settings["flood_chars"])
    if error is not None:
        return _outcome("error", error_type=error[0], error_message=error[1])
    run = _Run()
    if settings.get("trace"):
        _TRACED["current"] = (set(), set())
    fresh = dict(_BUILTINS)
    fresh["__import__"] = run.importer
    globals_ = {"__name__": "__main__", "__builtins__": fresh}
    sys.setrecursionlimit(settings["recursion_limit"])
    try:
        args = marshal.loads(binascii.a2b_base64(arguments))
        exec(code, globals_)
        function = globals_.get(entry)
        if function is None:
            raise NameError(f"name '{entry}' is not defined")
        traced = _TRACED["current"]
        result = function(*args) if traced is None else _traced(function, args, *traced)
        encoded = _pau_values.encode(result, max_bytes=settings["max_output_bytes"])
        text = repr(result)
        if len(text) > settings["max_output_bytes"]:
            raise _pau_values.EncodingError("too_large", "the value is larger than the output limit")
        return _outcome("ok", value=text, value_type=_pau_values.type_name(result), encoded=encoded)
    except MemoryError:
        return _outcome("memory", error_type="MemoryError", error_message="the function ran out of memory")
    except OutputFlood:
        return _outcome(
            "output_limit", error_type="OutputLimit", error_message="the function printed more than the output limit"
        )
    except _pau_values.EncodingError as exc:
        return _outcome("output_limit", error_type="OutputLimit", error_message=str(exc))
    except BaseException as exc:
        return _outcome("error", error_type=type(exc).__name__, error_message=_message(exc))
    finally:
        _TRACED["current"] = None
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _SINK
        _restore(run)
        if run.touched:
            # Only code that imported something can have drawn from the shared
            # generator (directly, or through a module such as email.generator).
            _RANDOM_SEED(0)


# What `load` (or `prime`) prepared for `call`: the code object, or the error compiling it gave, and the settings.
_LOADED = {"code": None, "error": ("RuntimeError", "no function was loaded"), "entry": "test_func", "options": None}
# What the host takes next through `take`: the outcome of the last input, or the compiled code `load` offers. The host learns its size first and takes no more than that, and none of it when the size is
# more than it accepts.
_PIECE = 256
_WORDS = struct.Struct("<32Q")
_NOTHING = (0,) * 32
_HELD = [b""]


def _hold(text: str) -> int:
    data = text.encode("utf-8")
    _HELD[0] = data
    return len(data)


def _compile_source() -> tuple:
    """The code of this instance's function, from the host's one answer to ``source``: (code, error, code to offer)."""
    try:
        kind, _, text = host.source().partition(":")
        if kind == "marshal":
            return marshal.loads(binascii.a2b_base64(text)), None, None
        code = compile(text, "<hidden>", "exec")
        del text
        offer = binascii.b2a_base64(marshal.dumps(code), newline=False).decode() if kind == "cache" else None
        return code, None, offer
    except BaseException as exc:
        # Only the name and message are kept: the exception's traceback holds frames that held the source.
        return None, (type(exc).__name__, _message(exc)), None


class WitWorld(wit_world.WitWorld):
    def load(self, settings: str) -> int:
        options = _loads(settings)
        code, error, offer = _compile_source()
        _LOADED.update(code=code, error=error, entry=options["entry"], options=options)
        if offer is None:
            _HELD[0] = b""
            return 0
        return _hold(offer)

    def call(self, arguments: str) -> tuple:
        loaded = _LOADED
        outcome = _call(loaded["code"], loaded["error"], loaded["entry"], arguments, loaded["options"])
        return _hold(_dumps(outcome)), self.take(0)

    def take(self, index: int) -> tuple:
        held = _HELD[0]
        start = index * _PIECE
        if start + _PIECE <= len(held):
            return _WORDS.unpack_from(held, start)
        # The last piece, padded with zeros (a copy of at most one piece, never of the whole text).
        return _WORDS.unpack(held[start:].ljust(_PIECE, b"\0")) if start < len(held) else _NOTHING

    def prime(self, settings: str) -> None:
        # Run by the host on every new instance before its first real call: the pages one call touches are
        # copied now, in the host's background thread, instead of during the call. Every instance is primed
        # alike, so what a function can observe (ids, allocator state) is the same on every call.
        options = _loads(settings)
        _LOADED.update(code=marshal.loads(binascii.a2b_base64(_PRIME_BLOB)), error=None, entry="test_func",
                       options=options)  # fmt: skip

    def info(self) -> str:
        return json.dumps(
            {"python": sys.version.split()[0], "bundled": _IMPORTED, "absent": _ABSENT, "hash_probe": hash("pau-mcp")}
        )


def _warm_up() -> None:
    """Run the per-input path a few times before the snapshot.

    Every page of the snapshot that a call writes to is copied for each new
    instance, and first executions write a lot: the specialising interpreter
    rewrites bytecode, caches fill, strings get interned. Doing that work once
    here makes each fresh call cheaper.
    """
    sample = (
        "import math, re\n"
        "def test_func(a, b=None):\n"
        "    if isinstance(a, str):\n"
        "        return re.sub('[0-9]', '', a).upper(), len(a)\n"
        "    if isinstance(a, (list, tuple, set)):\n"
        "        return sorted(a), {str(x): x for x in a}, sum(a) / max(len(a), 1)\n"
        "    return [math.sqrt(abs(a)), a * 2, -a, a ** 2, None, True]\n"
    )
    settings = {"entry": "test_func", "recursion_limit": 1000, "max_output_bytes": 65536,
                "stdout_chars": 4096, "flood_chars": 1 << 20}  # fmt: skip
    code = compile(sample, "<hidden>", "exec")
    world = WitWorld()
    for args in ((3,), ("ab12c",), ([3, 1, 2],), ((1.5, 2.5),), ({1, 2},), (-7, "x")):
        arguments = binascii.b2a_base64(marshal.dumps(args), newline=False).decode()
        size = _hold(_dumps(_call(code, None, "test_func", arguments, settings)))
        for index in range((size + _PIECE - 1) // _PIECE):
            world.take(index)
    _hold(_dumps(_call(None, ("SyntaxError", "invalid syntax"), "test_func", arguments, settings)))
    for _ in range(3):
        blob = binascii.b2a_base64(marshal.dumps(compile(sample, "<hidden>", "exec")), newline=False).decode()
        marshal.loads(binascii.a2b_base64(blob))


_warm_up()
_HELD[0] = b""
_PRIME_BLOB = binascii.b2a_base64(
    marshal.dumps(compile("def test_func(a):\n    return a\n", "<hidden>", "exec")),
    newline=False,
).decode()
_RANDOM_SEED(0)  # every instance starts from the state every input starts from
gc.collect()
_SNAPSHOT.update(
    (name, (module, dict(module.__dict__))) for name, module in list(sys.modules.items()) if module is not None
)
# Objects alive now are never garbage: keep the collector from walking them on every call.
gc.freeze()
