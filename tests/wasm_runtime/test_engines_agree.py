"""One function, one answer: code that runs in both engines gives the same outcome in both.

The same submitted code scored 1.0, or 0.33 with an added ``import numpy``: the engines iterated sets of strings
in different orders (they hashed strings with different algorithms), and disagreed on self-referencing values,
``os._exit``, ``random.seed()`` and CPU time. Every attack of the adversarial suite and every fidelity probe here
runs in the python engine and pinned to the numpy engine, and the two outcomes must be equal in every field an
agent or the scorer sees (status, value and its encoding and type, error type and message, printed text).
"""

from __future__ import annotations

import pytest
from test_sandbox_adversarial import CASES, LIMITS, NUMPY_CASES

from wasm_runtime import Outcome, Sandbox

#: Where the engines differ by construction (docs/sandbox.md, "Known differences"): each case still runs in both,
#: and both must end with the same status, but what they say may differ.
ENVIRONMENT = {
    "connect a TCP socket": "both refuse sockets, each C library with its own error",
    "bind a listening socket": "both refuse sockets, each C library with its own error",
    "resolve a host name": "both refuse name lookups, each C library with its own error",
    "import ctypes": "neither has ctypes, each says so its own way",
}

#: name -> (source of test_func, argument literals): what a hidden method or a submission may well do.
FIDELITY: dict[str, tuple[str, list[str]]] = {
    "a set of strings": (
        "def test_func(words):\n    return list(set(words)), ''.join(set(words[0])), sorted(set(words))",
        ["(['pear', 'apple', 'fig', 'kiwi', 'plum', 'banana', 'cherry'],)", "(['hello world', 'x'],)"],
    ),
    "frozensets and dict views of strings": (
        "def test_func(s):\n    return str(frozenset(s.split())), list({w: 1 for w in s.split()}.keys() - {'a'})",
        ["('the quick brown fox jumps over the lazy dog',)"],
    ),
    "hashes of strings, bytes, numbers and tuples": (
        "def test_func(x):\n    return hash(x), hash(x.encode()), hash((x, 1, 2.5)), hash(-1), hash(2**61)",
        ["('pau-mcp',)", "('',)", "('a' * 300,)"],
    ),
    "a list that contains itself": ("def test_func(x):\n    a = [x]\n    a.append(a)\n    return a", ["(1,)"]),
    "a dict that contains itself": ("def test_func(x):\n    d = {'x': x}\n    d['me'] = d\n    return d", ["(1,)"]),
    "one list in two places": ("def test_func(x):\n    a = [x]\n    return [a, a, (a,)]", ["(1,)"]),
    "os._exit with success": ("import os\ndef test_func():\n    os._exit(0)", ["()"]),
    "os._exit with failure": ("import os\ndef test_func(code):\n    os._exit(code)", ["(1,)", "(3,)", "(255,)"]),
    "sys.exit": ("import sys\ndef test_func(code):\n    sys.exit(code)", ["(3,)", "('bye',)"]),
    "random.seed() without a seed": (
        "import random\ndef test_func():\n    random.seed()\n    return random.random(), random.randint(1, 100)",
        ["()"],
    ),
    "the shared random generator": (
        "import random\ndef test_func(n):\n    return [random.random() for _ in range(n)], random.sample(range(100), 5)",
        ["(3,)"],
    ),
    "a random generator of its own": (
        "import random\ndef test_func(seed):\n    r = random.Random(seed)\n    return r.random(), r.choice('abcdef'), r.getrandbits(70)",
        ["(42,)", "('text seed',)"],
    ),
    "os.urandom": ("import os\ndef test_func(n):\n    return os.urandom(n)", ["(16,)", "(300,)"]),
    "the clocks": (
        "import os, time\ndef test_func():\n"
        "    return (time.time(), time.monotonic(), time.perf_counter_ns(), time.process_time(), time.process_time_ns(),\n"
        "            time.gmtime()[:6], time.localtime()[:6], time.clock_getres(time.CLOCK_MONOTONIC), os.times()[:2])",
        ["()"],
    ),
    "dates": (
        "import datetime\ndef test_func():\n"
        "    now = datetime.datetime.now()\n"
        "    return str(now), str(datetime.date.today()), str(datetime.datetime.fromtimestamp(0))",
        ["()"],
    ),
    "sleeping moves the clock": (
        "import time\ndef test_func(s):\n    t = time.time()\n    time.sleep(s)\n    return round(time.time() - t, 3)",
        ["(2.5,)"],
    ),
    "exceptions and their messages": (
        "def test_func(kind):\n"
        "    if kind == 'zero':\n        return 1 / 0\n"
        "    if kind == 'key':\n        return {}['missing']\n"
        "    if kind == 'index':\n        return [][3]\n"
        "    if kind == 'type':\n        return 'a' + 1\n"
        "    if kind == 'value':\n        return int('x')\n"
        "    raise RuntimeError(kind)",
        ["('zero',)", "('key',)", "('index',)", "('type',)", "('value',)", "('other',)"],
    ),
    "recursion": ("def test_func(n):\n    return test_func(n + 1)", ["(0,)"]),
    "printing": ("def test_func(n):\n    for i in range(n):\n        print(i, 'é', sep='-')\n    return n", ["(3,)"]),
    "numbers": (
        "import math, fractions, decimal\ndef test_func(x):\n"
        "    return (x / 3, x ** 0.5, math.pi * x, 10 ** 30 // 7, -0.0, float('nan'), complex(x, -1),\n"
        "            fractions.Fraction(x, 6), decimal.Decimal(x) / 7, round(2.675, 2), divmod(-7, 2))",
        ["(5,)"],
    ),
    "containers and subclasses": (
        "import collections\ndef test_func(s):\n"
        "    return (collections.Counter(s), collections.OrderedDict.fromkeys(s), sorted(set(s)), tuple(s),\n"
        "            collections.defaultdict(int, {'a': 1}), bytearray(s.encode()), {1: 'a', 'b': (2, 3)})",
        ["('mississippi',)"],
    ),
    "strings": (
        "import re\ndef test_func(s):\n"
        "    return s.title(), s[::-1], re.findall(r'\\w+', s), s.encode('utf-8'), ascii(s), '%r' % s, f'{s!r:>30}'",
        ["('héllo wörld, 42 times',)"],
    ),
    "a value at the output limit": ("def test_func(n):\n    return 'x' * n", ["(65000,)", "(70000,)"]),
    "a value nested deep": (
        "def test_func(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x",
        ["(150,)", "(250,)"],
    ),
    "the environment": (
        "import os, sys\ndef test_func():\n    return dict(os.environ), sys.argv[1:], os.getcwd(), sys.platform, sys.maxsize",
        ["()"],
    ),
}


def _seen(outcome: Outcome) -> tuple[object, ...]:
    """Every field of an outcome that an agent or the scorer sees (not the time or fuel it took)."""
    return (
        outcome.status,
        outcome.value,
        outcome.encoded,
        outcome.value_type,
        outcome.error_type,
        outcome.error_message,
        outcome.stdout,
    )


@pytest.fixture(scope="module")
def engines(sandbox: Sandbox, request: pytest.FixtureRequest) -> Sandbox:
    request.getfixturevalue("numpy_box")  # skips when the numpy engine is not installed
    return sandbox


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_attack_ends_the_same_in_both_engines(engines: Sandbox, name: str) -> None:
    source = CASES[name][0]
    arguments = "(9,)" if "def test_func(port)" in source else "()"  # nothing listens there: both must refuse
    first = engines.call(source, arguments, limits=LIMITS, engine="python")
    # The same attack; only one that calls the host's bridge itself is written for each engine's own bridge.
    second = engines.call(NUMPY_CASES[name][0], arguments, limits=LIMITS, engine="numpy")
    if name in ENVIRONMENT:
        assert first.status is second.status, (ENVIRONMENT[name], first, second)
    else:
        assert _seen(first) == _seen(second)


@pytest.mark.parametrize("name", sorted(FIDELITY))
def test_the_same_function_gives_the_same_outcomes_in_both_engines(engines: Sandbox, name: str) -> None:
    source, inputs = FIDELITY[name]
    first = engines.run(source, inputs, engine="python")
    second = engines.run(source, inputs, engine="numpy")
    assert [_seen(o) for o in first] == [_seen(o) for o in second]
