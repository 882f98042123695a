"""The worker-process sandbox: a dead worker is replaced and its call reported, not hung."""

from __future__ import annotations

import os
import signal

from wasm_runtime import Status
from wasm_runtime.workers import WorkerSandbox


def test_a_worker_that_dies_is_replaced_and_the_call_reports_a_crash():
    box = WorkerSandbox(workers=1)
    try:
        assert box.call("def test_func(x):\n    return x", "(1,)").value == "1"
        worker = box._idle.queue[0]
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=10)
        lost = box.call("def test_func(x):\n    return x", "(2,)")
        assert lost.status is Status.CRASH and lost.error_type == "WorkerDied"
        assert box.call("def test_func(x):\n    return x * 3", "(3,)").value == "9"
        assert box._idle.queue[0].process.pid != worker.process.pid
    finally:
        box.close()


def test_workers_exit_when_their_parent_closes_the_pipe():
    box = WorkerSandbox(workers=2)
    processes = [w.process for w in list(box._idle.queue)]
    box.close()
    assert all(p.poll() is not None for p in processes)


def test_an_async_call_to_a_dead_worker_also_reports_a_crash_and_recovers():
    import anyio

    box = WorkerSandbox(workers=1)
    try:
        worker = box._idle.queue[0]
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=10)

        async def main() -> tuple:
            with anyio.fail_after(60):
                lost = await box.acall("def test_func(x):\n    return x", "(2,)")
                again = await box.acall("def test_func(x):\n    return x + 1", "(2,)")
            return lost, again

        lost, again = anyio.run(main)
        assert lost.status is Status.CRASH and again.value == "3"
    finally:
        box.close()
