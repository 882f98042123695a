"""The environment in a process that runs threads and then forks (as RL trainers' workers do)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, threading
    from pau_mcp.manifests import ManifestStore
    from pau_mcp.rl import ExplorationEnv, ScriptedCritic

    method = ManifestStore(()).method("builtin/b005")

    class Awaiting(ScriptedCritic):  # waits as a model client does, so ratings go through the runtime's loop
        synchronous = False

        async def rate_reasoning(self, view, text):
            await asyncio.sleep(0)
            return await super().rate_reasoning(view, text)

    def episode():
        env = ExplorationEnv(method, Awaiting())
        env.reset()
        rewards = [env.step(reply).reward for reply in ("try 9", "INPUT: (9,)", "CONCLUDED: NO\\nHYPOTHESIS: steps")]
        return env.experiments[-1], rewards

    stop = threading.Event()
    parent = episode()

    def keep_stepping():
        while not stop.is_set():
            episode()

    threads = [threading.Thread(target=keep_stepping, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    children = []
    for _ in range(3):  # fork while the threads are inside the sandbox, the parser and the critic's loop
        pid = os.fork()
        if pid == 0:
            try:
                child = episode()
                os._exit(0 if child == parent else 3)
            except BaseException:
                os._exit(4)
        children.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    stop.set()
    print(parent[0], codes, flush=True)
    raise SystemExit(max(codes))
    """
)


def test_a_child_forked_while_threads_step_environments_steps_its_own_episode() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.startswith("test_func(9) -> returned 2 [0, 0, 0]")
