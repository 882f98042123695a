"""Hostile code, one attempt per case: each is contained within its limit and the host lives on.

Every case runs a function that tries to escape or exhaust the sandbox, checks
the status it ends with (and what it saw), then proves the host still works
by running an ordinary call.
"""

from __future__ import annotations

import os
import socket

import pytest

from wasm_runtime import Limits, Sandbox, SandboxInterface, Status

# An explicit CPU budget keeps the endless loops short; the calibrated default is tested in test_limits.py.
LIMITS = Limits(timeout_s=1.0, fuel=2_500_000_000, memory_bytes=160 * 1024 * 1024)
OK, ERROR, TIMEOUT, MEMORY, OUTPUT, CRASH = (
    Status.OK, Status.ERROR, Status.TIMEOUT, Status.MEMORY, Status.OUTPUT_LIMIT, Status.CRASH,
)  # fmt: skip

# name -> (source of test_func, allowed statuses, text that must appear in the value or error message, or None)
CASES: dict[str, tuple[str, set[Status], str | None]] = {
    "read /etc/passwd": ("def test_func():\n    return open('/etc/passwd').read()", {ERROR}, "No such file"),
    "write a file": ("def test_func():\n    open('/tmp/pau-escape', 'w').write('x')", {ERROR}, None),
    "list the root directory": ("import os\ndef test_func():\n    return os.listdir('/')", {ERROR}, None),
    "walk the working directory": ("import os\ndef test_func():\n    return list(os.walk('.'))", {OK}, "[]"),
    "open a relative path": ("def test_func():\n    return open('pyproject.toml').read()", {ERROR}, None),
    "read /dev/urandom": ("def test_func():\n    return open('/dev/urandom', 'rb').read(4)", {ERROR}, None),
    "connect a TCP socket": (
        "import socket\ndef test_func(port):\n    s = socket.socket()\n    s.connect(('127.0.0.1', port))\n    return 'connected'",
        {ERROR},
        None,
    ),
    "bind a listening socket": (
        "import socket\ndef test_func():\n    s = socket.socket()\n    s.bind(('0.0.0.0', 0))\n    s.listen()\n    return 'listening'",
        {ERROR},
        None,
    ),
    "resolve a host name": (
        "import socket\ndef test_func():\n    return socket.gethostbyname('example.com')",
        {ERROR},
        None,
    ),
    "run a subprocess": (
        "import subprocess\ndef test_func():\n    return subprocess.run(['id']).returncode",
        {ERROR},
        None,
    ),
    "os.system": ("import os\ndef test_func():\n    return os.system('id')", {ERROR}, None),
    "fork": ("import os\ndef test_func():\n    return os.fork()", {ERROR}, None),
    "exec a program": ("import os\ndef test_func():\n    os.execv('/bin/sh', ['sh'])", {ERROR}, None),
    "read the host environment": ("import os\ndef test_func():\n    return dict(os.environ)", {OK}, "{}"),
    "time.sleep(60)": ("import time\ndef test_func():\n    time.sleep(60)\n    return 'slept'", {OK}, "slept"),
    "wait on a timer with select": (
        "import select\ndef test_func():\n    select.select([], [], [], 60)",
        {CRASH},
        "timer",
    ),
    # Which limit stops a loop first (fuel or the wall clock) depends on the machine's load: either is contained.
    "infinite loop": ("def test_func():\n    while True:\n        pass", {TIMEOUT}, None),
    "loop that swallows every exception": (
        "def test_func():\n    while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass",
        {TIMEOUT},
        None,
    ),
    "string memory bomb": ("def test_func():\n    return len('a' * 10**9)", {MEMORY}, None),
    "list memory bomb": (
        "def test_func():\n    x = []\n    while True:\n        x.append(' ' * 10**6)",
        {MEMORY, TIMEOUT},
        None,
    ),
    "bytearray growth": (
        "def test_func():\n    b = bytearray()\n    while True:\n        b.extend(b'x' * 10**6)",
        {MEMORY},
        None,
    ),
    "dict memory bomb": (
        "def test_func():\n    return len({i: str(i) * 100 for i in range(10**8)})",
        {MEMORY, TIMEOUT},
        None,
    ),
    "deep recursion with a raised limit": (
        "import sys\ndef test_func():\n    sys.setrecursionlimit(10**6)\n    def r(n):\n        return r(n + 1)\n    return r(0)",
        {ERROR, TIMEOUT},  # a loaded machine may reach the wall-clock deadline before the stack runs out
        "recursion",
    ),
    "print flood": ("def test_func():\n    while True:\n        print('x' * 1000)", {OUTPUT}, None),
    "flood through file descriptor 1": (
        "import os\ndef test_func():\n    while True:\n        os.write(1, b'x' * 10000)",
        {TIMEOUT, ERROR},
        None,
    ),
    "huge return value": ("def test_func():\n    return 'a' * 10**7", {OUTPUT}, None),
    "huge integer": ("def test_func():\n    return 7 ** 10**6", {OUTPUT, ERROR, TIMEOUT}, None),
    "sys.exit": ("import sys\ndef test_func():\n    sys.exit(3)", {ERROR}, None),
    "os._exit": (
        "import os\ndef test_func():\n    os._exit(3)",
        {CRASH},
        "ended the process (os._exit) with a failure status",
    ),
    "raise KeyboardInterrupt": ("def test_func():\n    raise KeyboardInterrupt", {ERROR}, None),
    "walk __subclasses__ for file access": (
        "def test_func():\n"
        "    for cls in object.__subclasses__():\n"
        "        if cls.__name__ == 'FileIO':\n"
        "            return cls('/etc/passwd').read()\n"
        "    return 'not found'",
        {ERROR, OK},
        None,
    ),
    "reach builtins through a function's __self__": (
        "def test_func():\n    b = print.__self__\n    return b.open('/etc/hostname').read()",
        {ERROR},
        None,
    ),
    "search gc for the hidden source": (
        "import gc\n"
        "# pau-secret-comment: comments are in the source text only\n"
        "def test_func():\n"
        "    needle = 'pau-' + 'secret-comment'\n"
        "    hits = []\n"
        "    for o in gc.get_objects():\n"
        "        items = o.items() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()\n"
        "        for item in items:\n"
        "            for e in (item if isinstance(o, dict) else (item,)):\n"
        "                if isinstance(e, str) and o is not hits and e is not needle and needle in e:\n"
        "                    hits.append(e[:40])\n"
        "    return hits",
        {OK},
        "[]",
    ),
    "walk the frames for the source": (
        "import sys\n"
        "# pau-secret-comment\n"
        "def test_func():\n"
        "    needle = 'pau-' + 'secret-comment'\n"
        "    out = []\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        out += [k for k, v in f.f_locals.items() if isinstance(v, str) and v is not needle and needle in v]\n"
        "        f = f.f_back\n"
        "    return out",
        {OK},
        "[]",
    ),
    "read its own source with inspect": (
        "import inspect\ndef test_func():\n    return inspect.getsource(test_func)",
        {ERROR},
        None,
    ),
    "import a module that is not there": (
        "import no_such_module\ndef test_func():\n    return 1",
        {ERROR},
        "no_such_module",
    ),
    "import ctypes": ("def test_func():\n    import ctypes\n    return ctypes.CDLL(None)", {ERROR}, None),
    "start a thread": (
        "import threading\ndef test_func():\n    t = threading.Thread(target=print)\n    t.start()\n    return 'started'",
        {ERROR},
        None,
    ),
    "exception whose message never ends": (
        "class E(Exception):\n    def __str__(self):\n        while True:\n            pass\n"
        "def test_func():\n    raise E()",
        {TIMEOUT},
        None,
    ),
    "return value whose repr raises": (
        "class V:\n    def __repr__(self):\n        raise RuntimeError('no repr')\ndef test_func():\n    return V()",
        {ERROR},
        "no repr",
    ),
    "return value nested too deep": (
        "def test_func():\n    x = []\n    for _ in range(3000):\n        x = [x]\n    return x",
        {OUTPUT, ERROR},
        None,
    ),
    "ask the host for the source again": (
        "import wit_world.imports.host as h\ndef test_func():\n    return h.source()",
        {CRASH},
        "source is handed over once",
    ),
}


# What differs in the numpy engine: its own bridge to the host is the `_host` door, not `wit_world`.
NUMPY_CASES = CASES | {
    "ask the host for the source again": (
        "import _host\ndef test_func():\n    return _host.call(b'source')",
        {CRASH},
        "source is handed over once",
    ),
    "plant an outcome and silence the real one": (
        'import _host\ndef test_func():\n    _host.call(b\'outcome:{"status":"timeout"}\')\n    return 1',
        {CRASH},
        None,
    ),
    "import numpy's C internals": (
        "import numpy._core._multiarray_umath as m\ndef test_func():\n    return open('/etc/hostname').read()",
        {ERROR},
        None,
    ),
}


@pytest.fixture(params=["python", "numpy", "lean"], scope="module")
def box(request: pytest.FixtureRequest, sandbox: Sandbox) -> SandboxInterface:
    """The adversarial cases run against every engine."""
    if request.param == "python":
        return sandbox
    engine_box: SandboxInterface = request.getfixturevalue(f"{request.param}_box")
    return engine_box


# What differs in the lean engine: its door answers only sleeps and, once when asked, compiled code; the source
# and the outcome cross with the call itself. Its kept instance is reset after every call, WASI state included.
LEAN_CASES = CASES | {
    "ask the host for the source again": (
        "import _host\ndef test_func():\n    return _host.call(b'source')",
        {CRASH},
        "unknown request",
    ),
    "plant an outcome through the door": (
        'import _host\ndef test_func():\n    _host.call(b\'outcome:{"status":"timeout"}\')\n    return 1',
        {CRASH},
        "unknown request",
    ),
    "plant compiled code for the host's cache": (
        "import _host\ndef test_func():\n    _host.call(b'code:YWJj')\n    return 1",
        {CRASH},
        "compiled code is handed over once",
    ),
    "close the standard streams for the calls after": (
        "import os\ndef test_func():\n    for fd in (0, 1, 2):\n        os.close(fd)\n    return 'closed'",
        {OK},
        "closed",
    ),
    "renumber a stream": ("import os\ndef test_func():\n    os.dup2(2, 1)\n    return 'moved'", {OK, ERROR}, None),
}


def _cases(box: SandboxInterface) -> dict[str, tuple[str, set[Status], str | None]]:
    if isinstance(box, Sandbox):
        return LEAN_CASES if box.python_engine == "lean" else CASES
    return NUMPY_CASES


@pytest.mark.parametrize("name", list(NUMPY_CASES | LEAN_CASES))
def test_hostile_code_is_contained_and_the_host_lives_on(box: SandboxInterface, name: str) -> None:
    if name not in _cases(box):
        pytest.skip(f"{name!r} is a case for another engine's own bridge")
    source, allowed, needle = _cases(box)[name]
    arguments = "()"
    listener = None
    if "def test_func(port)" in source:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        arguments = f"({listener.getsockname()[1]},)"
    try:
        outcome = box.call(source, arguments, limits=LIMITS)
    finally:
        if listener is not None:
            listener.close()
    assert outcome.status in allowed, outcome
    if needle is not None and outcome.status is not TIMEOUT:
        assert needle in f"{outcome.value} {outcome.error_message}", outcome
    assert not os.path.exists("/tmp/pau-escape")
    follow_up = box.call("def test_func(x):\n    return x + 1", "(41,)")
    assert follow_up.value == "42"


def test_there_are_at_least_thirty_attempts() -> None:
    assert len(CASES) >= 30


_SPY = """
import gc
def test_func(x, needle_head):
    needle = needle_head + '-secret'
    hits = 0
    for o in gc.get_objects():
        items = list(o.keys()) + list(o.values()) if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
        hits += sum(1 for e in items if isinstance(e, str) and e is not needle and needle in e)
    return (x, hits)
"""


def test_a_call_cannot_see_the_inputs_of_earlier_calls(box: SandboxInterface) -> None:
    box.call(_SPY, "('top-secret-earlier-input', 'none')")
    assert box.call(_SPY, "('later', 'top')").decoded() == ("later", 0)


def test_an_input_in_a_batch_cannot_see_the_inputs_that_follow(box: SandboxInterface) -> None:
    outcomes = box.run(_SPY, ["('first', 'later')", "('later-secret-1', 'x')", "('later-secret-2', 'x')"])
    assert outcomes[0].decoded() == ("first", 0)


def test_sleeping_cannot_make_the_host_wait(box: SandboxInterface) -> None:
    # 1,000 sleeps: one that waited at all (60 ms each would do) adds up past the minute allowed, or the deadline.
    source = "import time\ndef test_func():\n    for _ in range(1_000):\n        time.sleep(100)\n    return 1"
    outcome = box.call(source, "()", limits=LIMITS)
    assert outcome.ok, outcome
    assert outcome.duration_ms < 60_000
