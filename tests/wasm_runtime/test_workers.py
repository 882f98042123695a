"""The worker-process sandbox: a dead worker is replaced and its call reported, not hung; workers never outlive
their parent; replies are read in linear time and bounded."""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import pytest

from wasm_runtime import InvalidInput, Limits, Outcome, Status, parse_arguments
from wasm_runtime.workers import WorkerSandbox, _frame, _reply_bound, _Worker


def test_a_worker_that_dies_is_replaced_and_the_call_reports_a_crash() -> None:
    box = WorkerSandbox(workers=1)
    try:
        assert box.call("def test_func(x):\n    return x", "(1,)").value == "1"
        worker = box._idle.queue[0]
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=60)
        lost = box.call("def test_func(x):\n    return x", "(2,)")
        assert lost.status is Status.CRASH and lost.error_type == "WorkerDied"
        assert box.call("def test_func(x):\n    return x * 3", "(3,)").value == "9"
        assert box._idle.queue[0].process.pid != worker.process.pid
    finally:
        box.close()


def test_workers_exit_when_their_parent_closes_the_pipe() -> None:
    box = WorkerSandbox(workers=2)
    _start_both(box)
    processes = [w.process for w in list(box._idle.queue)]
    assert len(processes) == 2
    box.close()
    assert all(p.poll() is not None for p in processes)


SLOW = "def test_func(x):\n    while True:\n        pass"
ECHO = "def test_func(x):\n    return x"


def _start_both(box: WorkerSandbox) -> None:
    """Overlap two calls, so the second starts the second worker."""
    slow = threading.Thread(target=box.run, args=(SLOW, ["(1,)"]), kwargs={"limits": Limits(timeout_s=0.5)})
    slow.start()
    _wait(lambda: box._idle.qsize() == 0, "the slow call never took the first worker")
    assert box.call(ECHO, "(2,)").value == "2"
    slow.join(timeout=60)
    assert box.started == 2


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_one_worker_starts_with_the_sandbox_and_another_only_when_calls_overlap_up_to_the_most_allowed() -> None:
    box = WorkerSandbox(workers=2)
    try:
        assert (box.workers, box.started) == (2, 1)
        for n in range(5):  # calls one after another never need a second process
            assert box.call(ECHO, f"({n},)").value == str(n)
        assert box.started == 1 and box._idle.qsize() == 1
        _start_both(box)
        calls = [threading.Thread(target=box.run, args=(SLOW, ["(1,)"]), kwargs={"limits": Limits(timeout_s=0.3)})]
        calls += [threading.Thread(target=box.call, args=(ECHO, f"({n},)")) for n in range(3)]
        for thread in calls:
            thread.start()
        for thread in calls:
            thread.join(timeout=60)
        assert box.started == 2 and box._idle.qsize() == 2  # four calls at once shared the two: no third process
    finally:
        box.close()


def test_overlapping_async_calls_start_the_second_worker_without_blocking_the_event_loop() -> None:
    box = WorkerSandbox(workers=2)
    try:

        async def main() -> list[Outcome]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await anyio.sleep(0.01)

            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:
                    group.start_soon(tick)
                    results = await _gather(
                        box.acall(SLOW, "(1,)", limits=Limits(timeout_s=0.5)), box.acall(ECHO, "(7,)")
                    )
                    group.cancel_scope.cancel()
            assert ticks >= 10  # the loop went on while the second worker started
            return results

        slow, echoed = anyio.run(main)
        assert slow.status is Status.TIMEOUT and echoed.value == "7"
        assert box.started == 2
    finally:
        box.close()


async def _gather(*calls: Awaitable[Outcome]) -> list[Outcome]:
    results: list[Any] = [None] * len(calls)  # each slot is filled with its call's outcome

    async def one(index: int, call: Awaitable[Outcome]) -> None:
        results[index] = await call

    async with anyio.create_task_group() as group:
        for index, call in enumerate(calls):
            group.start_soon(one, index, call)
    return results


def test_an_async_call_to_a_dead_worker_also_reports_a_crash_and_recovers() -> None:
    import anyio

    box = WorkerSandbox(workers=1)
    try:
        worker = box._idle.queue[0]
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=60)

        async def main() -> tuple[Outcome, Outcome]:
            with anyio.fail_after(60):
                lost = await box.acall("def test_func(x):\n    return x", "(2,)")
                again = await box.acall("def test_func(x):\n    return x + 1", "(2,)")
            return lost, again

        lost, again = anyio.run(main)
        assert lost.status is Status.CRASH and again.value == "3"
    finally:
        box.close()


def test_a_worker_killed_in_the_middle_of_a_batch_fails_only_that_batch() -> None:
    box = WorkerSandbox(workers=2)
    try:
        slow = "def test_func(x):\n    while True:\n        pass"
        limits = Limits(timeout_s=5.0)
        results: dict[str, list[Outcome]] = {}
        _start_both(box)
        everyone = list(box._idle.queue)
        running = threading.Thread(
            target=lambda: results.setdefault("slow", box.run(slow, ["(1,)", "(2,)"], limits=limits))
        )
        running.start()
        busy = _busy_worker(box, everyone)
        os.kill(busy.process.pid, signal.SIGKILL)
        others = box.run("def test_func(x):\n    return -x", ["(1,)", "(2,)"])
        running.join(timeout=60)
        assert [o.value for o in others] == ["-1", "-2"]
        assert [(o.status, o.error_type) for o in results["slow"]] == [(Status.CRASH, "WorkerDied")] * 2
        assert results["slow"][0].error_message is not None
        assert "replaced" in results["slow"][0].error_message
        assert box.workers == 2 and box._idle.qsize() == 2
        assert [o.value for o in box.run("def test_func(x):\n    return x + 1", ["(1,)", "(2,)", "(3,)"])] == [
            "2",
            "3",
            "4",
        ]
    finally:
        box.close()


def _busy_worker(box: WorkerSandbox, workers: list[_Worker]) -> _Worker:
    """The worker not in the idle queue, once the slow call has taken it."""
    everyone = {w.process.pid: w for w in workers}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        idle = {w.process.pid for w in list(box._idle.queue)}
        if len(idle) < len(everyone):
            return next(w for pid, w in everyone.items() if pid not in idle)
        time.sleep(0.01)
    raise AssertionError("the slow call never took a worker")


def test_a_reply_is_read_in_time_linear_in_its_length() -> None:
    # 128 MB through a real pipe. Appending each 64 KB pipe read to the bytes read so far (as before) copies
    # about 130 GB on the way: minutes. Reading into one buffer of the announced size takes well under a second.
    payload = b"x" * (128 * 1024 * 1024)
    writer = subprocess.Popen(
        [sys.executable, "-c", "import pickle, struct, sys\n"
         "data = pickle.dumps(b'x' * (128 * 1024 * 1024), protocol=5)\n"
         "sys.stdout.buffer.write(struct.pack('!I', len(data)) + data)\nsys.stdout.buffer.flush()"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert writer.stdout is not None
        reader = _PipeReader(writer.stdout.fileno())
        with anyio.from_thread.start_blocking_portal() as portal:
            got = portal.call(_read_reply, reader, 1 << 30)
        assert got == payload
    finally:
        writer.kill()
        writer.wait()


def test_a_reply_announced_larger_than_any_outcome_can_be_is_refused_before_it_is_read() -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", "import struct, sys\nsys.stdout.buffer.write(struct.pack('!I', 3_000_000_000))\n"
         "sys.stdout.buffer.flush()\nimport time\ntime.sleep(30)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert writer.stdout is not None
        reader = _PipeReader(writer.stdout.fileno())
        with pytest.raises(EOFError, match="more than any reply can be"):
            reader._blocking(reader._receiving(_reply_bound(10, Limits())))
    finally:
        writer.kill()
        writer.wait()


class _PipeReader(_Worker):
    """The worker's pipe protocol, reading from any pipe (no worker process behind it)."""

    def __init__(self, fd: int) -> None:
        self._out = fd
        self._in = -1
        os.set_blocking(fd, False)


async def _read_reply(reader: _Worker, limit: int) -> Any:
    with anyio.fail_after(60):
        steps = reader._receiving(limit)
        try:
            while True:
                next(steps)
                await anyio.wait_readable(reader._out)
        except StopIteration as done:
            return done.value


_PARENT = """
import json, sys, threading, time
from wasm_runtime import Limits
from wasm_runtime.workers import WorkerSandbox
box = WorkerSandbox(workers=2)
# A second worker, started by a call that overlaps a slow one.
slow = "def test_func(x):\\n    while True:\\n        pass"
first = threading.Thread(target=box.run, args=(slow, ["(1,)"]), kwargs={"limits": Limits(timeout_s=0.5)})
first.start()
while box._idle.qsize():
    time.sleep(0.01)
box.run("def test_func(x):\\n    return x", ["(1,)"])
first.join()
assert box.started == 2
# Replace one worker from a thread that then ends, as the async API does: the worker must outlive the thread.
thread = threading.Thread(target=lambda: box._idle.put(box._replace(box._idle.get())))
thread.start()
thread.join()
time.sleep(0.5)
assert [o.value for o in box.run("def test_func(x):\\n    return x", ["(1,)"])] == ["1"]
pids = [w.process.pid for w in list(box._idle.queue)]
# One worker busy with a batch that would take minutes, the other idle.
threading.Thread(target=box.run, args=(slow, ["(1,)"] * 100), kwargs={"limits": Limits(timeout_s=2.0)}).start()
while box._idle.qsize() > 1:
    time.sleep(0.01)
time.sleep(0.5)
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill -9", "SIGTERM"])
def test_workers_die_with_their_parent_however_it_is_killed(signum: signal.Signals) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the parent process did not start its workers"
        workers = json.loads(line)
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
        os.kill(parent.pid, signum)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in workers)
    finally:
        parent.kill()
        parent.wait()


def test_a_call_after_a_cancelled_async_call_on_the_same_worker_gets_its_own_result() -> None:
    # The cancelled call's reply is still on its way through the worker's pipe; the next call must not take it.
    box = WorkerSandbox(workers=1)
    try:
        slow = "def test_func(x):\n    while True:\n        pass"

        async def main() -> tuple[Outcome, list[Outcome]]:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:
                    group.start_soon(lambda: box.arun(slow, ["(1,)"], limits=Limits(timeout_s=1.0)))
                    await anyio.wait_all_tasks_blocked()  # the request is in the worker, its reply awaited
                    assert box._idle.qsize() == 0
                    group.cancel_scope.cancel()
                fast = await box.acall("def test_func(x):\n    return x * 2", "(21,)")
                after = await box.arun("def test_func(x):\n    return -x", ["(1,)", "(2,)"])
            return fast, after

        fast, after = anyio.run(main)
        assert (fast.status, fast.value) == (Status.OK, "42")
        assert [o.value for o in after] == ["-1", "-2"]
        assert box._idle.qsize() == 1
    finally:
        box.close()


def test_a_reply_cut_off_by_a_cancellation_is_read_to_its_end_before_the_next_request_is_answered() -> None:
    # A reply half read when its caller was cancelled: the next request must resume it where it stopped, not
    # read the rest of it as a header of its own.
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    worker = _PipeReader(replies_read)
    worker._in = requests_write
    os.set_blocking(requests_write, False)
    stale, wanted = _frame(["stale"] * 1000), _frame("wanted")
    try:

        async def main() -> Any:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:
                    group.start_soon(worker.arequest, "first")
                    os.write(replies_write, stale[: len(stale) // 2])
                    await anyio.wait_all_tasks_blocked()  # half of the reply is read, the rest awaited
                    group.cancel_scope.cancel()
                os.write(replies_write, stale[len(stale) // 2 :] + wanted)
                return await worker.arequest("second")

        assert anyio.run(main) == "wanted"
        assert [_unframe(requests_read), _unframe(requests_read)] == ["first", "second"]
    finally:
        for fd in (requests_read, requests_write, replies_read, replies_write):
            os.close(fd)


def _unframe(fd: int) -> object:
    (size,) = struct.unpack("!I", os.read(fd, 4))
    return pickle.loads(os.read(fd, size))


def test_large_argument_literals_are_parsed_in_a_process_of_their_own() -> None:
    # Parsing in the caller's threads held its interpreter lock (and so its event loop) for tens of milliseconds
    # per 64 KiB literal. The worker sandbox parses them in one more process, with the same results and refusals.
    literal = "(" + repr(list(range(10_900))) + ", {'a': (1.5, b'x')})"

    async def parse(box: WorkerSandbox, text: str) -> tuple[Any, ...]:
        return await box.aparse_arguments(text)

    box = WorkerSandbox(workers=1)
    try:
        assert anyio.run(parse, box, literal) == parse_arguments(literal)
        assert len(box.pids) == 2  # the call worker and the parser
        with pytest.raises(InvalidInput) as refused:
            anyio.run(parse, box, "(__import__('os'),)")
        with pytest.raises(InvalidInput) as expected:
            parse_arguments("(__import__('os'),)")
        assert str(refused.value) == str(expected.value)
        pids = box.pids
    finally:
        box.close()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)
