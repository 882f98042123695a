"""Parsing literals in a process forked while another thread was parsing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_CHILD = textwrap.dedent(
    """
    import os, threading, time
    from wasm_runtime import literals

    held = threading.Event()
    release = threading.Event()

    def parse_forever():
        with literals._AST_LOCK:  # a parse in progress at the moment of the fork
            held.set()
            release.wait()

    threading.Thread(target=parse_forever, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        print(literals.parse_arguments("(1, 'a')"), flush=True)
        os._exit(0)
    release.set()
    _, status = os.waitpid(pid, 0)
    raise SystemExit(os.waitstatus_to_exitcode(status))
    """
)


def test_a_forked_child_parses_although_a_parent_thread_held_the_parser_lock() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 'a')"
