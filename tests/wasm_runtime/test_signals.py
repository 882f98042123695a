"""A guest's trap stays an error result even when something installed a fatal-signal handler after the sandbox."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A stack overflow inside the guest: wasmtime reports it through the SIGILL handler it installed.
_SCRIPT = textwrap.dedent(
    """
    import faulthandler, logging, sys
    from wasm_runtime import Sandbox
    logging.basicConfig(level=logging.WARNING)
    source = (
        "import sys\\ndef test_func(n):\\n    sys.setrecursionlimit(10**6)\\n"
        "    def r(k):\\n        return r(k + 1)\\n    return r(0)"
    )
    with Sandbox(pool_size=0) as box:
        first = box.call(source, "(1,)")
        {late_handler}
        second = box.call(source, "(1,)")
        third = box.call("def test_func(n):\\n    return n + 1", "(1,)")
    print(first.status.value, second.status.value, third.value)
    """
)


@pytest.mark.parametrize(
    "late_handler",
    [
        "faulthandler.enable()",  # what Ray does in its workers
        "faulthandler.enable(); faulthandler.disable(); faulthandler.enable(all_threads=False)",
    ],
)
def test_a_fatal_signal_handler_installed_after_the_sandbox_does_not_let_a_trap_kill_the_process(
    late_handler: str,
) -> None:
    script = _SCRIPT.format(late_handler=late_handler)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, second, value = done.stdout.split()
    assert first == second != "crash" and value == "2"
    assert "put back" in done.stderr  # the operator is told once


def test_a_fatal_signal_handler_installed_before_the_sandbox_is_left_in_place() -> None:
    # python -X faulthandler: enabled first, so wasmtime's handlers already come first and nothing is replaced.
    script = _SCRIPT.format(late_handler="pass")
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "put back" not in done.stderr
