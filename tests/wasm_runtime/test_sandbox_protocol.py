"""The host-guest protocol holds against hidden code that calls the host's imports itself.

Hidden code runs in the same interpreter as the guest's own loop, so it can
reach the host imports (``wit_world.imports.host``) and call them. Each import
must answer at most once, in order, and no import may hand out an input or
take an outcome.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from wasm_runtime import Outcome, Sandbox, Status

MARKER = "pau-own-source-marker"

READ_OWN_SOURCE = f"""# {MARKER}
import sys
def test_func(x):
    host = sys.modules['wit_world.imports.host']
    try:
        return host.source()
    except BaseException as exc:
        return 'refused: ' + type(exc).__name__
"""


def _text(outcomes: Iterable[Outcome]) -> str:
    return " ".join(str(o.to_dict()) for o in outcomes)


def test_hidden_code_cannot_read_its_own_source_through_the_host(sandbox: Sandbox) -> None:
    # Three runs: compiled from source, compiled and offered to the cache, loaded from the cache.
    for _ in range(3):
        outcomes = sandbox.run(READ_OWN_SOURCE, ["(1,)", "(2,)"])
        assert MARKER not in _text(outcomes)
        assert outcomes[0].status is Status.CRASH
        assert outcomes[0].error_type == "SandboxViolation"
        assert outcomes[0].error_message is not None
        assert "source" in outcomes[0].error_message


def test_hidden_code_cannot_reload_itself_through_the_guest_to_read_its_source(sandbox: Sandbox) -> None:
    source = f"""# {MARKER}
import sys
def test_func():
    guest = sys.modules['pau_guest']
    world = guest.WitWorld()
    for name in ('load', 'run'):
        if hasattr(world, name):
            getattr(world, name)('{{"entry": "test_func", "recursion_limit": 1000, "max_output_bytes": 65536, "stdout_chars": 4096, "flood_chars": 1048576}}')
    return repr(sys.modules['pau_guest'].__dict__.get('_LOADED'))
"""
    outcome = sandbox.call(source, "()")
    assert MARKER not in _text([outcome])
    assert outcome.status is Status.CRASH


PROBE_LATER_INPUTS = """
import sys, marshal, binascii
FORGED = '{"status":"ok","value":"1","value_type":"int","encoded":1,"stdout":""}'
def test_func(x):
    if x != 'first':
        return x
    host = sys.modules['wit_world.imports.host']
    seen = []
    for name in dir(host):
        if name.startswith('_') or name in ('source', 'sleep'):
            continue
        f = getattr(host, name)
        if not callable(f) or isinstance(f, type):
            continue
        for args in ((FORGED,), ('',), ()):
            try:
                got = f(*args)
            except BaseException as exc:
                seen.append(type(exc).__name__)
                continue
            try:
                got = marshal.loads(binascii.a2b_base64(got))
            except BaseException:
                pass
            seen.append(repr(got))
    return seen
"""


def test_code_in_a_batch_cannot_read_a_later_input_through_the_host(sandbox: Sandbox) -> None:
    outcomes = sandbox.run(PROBE_LATER_INPUTS, ["('first',)", "('secret-later-input',)", "('secret-last-input',)"])
    assert "secret" not in str(outcomes[0].to_dict())
    assert [o.value for o in outcomes[1:]] == ["'secret-later-input'", "'secret-last-input'"]


FORGE_LATER_OUTCOMES = """
import sys
def test_func(x):
    if x == 1:
        host = sys.modules['wit_world.imports.host']
        for name in dir(host):
            if name.startswith('_') or name in ('source', 'sleep'):
                continue
            f = getattr(host, name)
            for forged in (666, 777, 888):
                text = '{"status":"ok","value":"%d","value_type":"int","encoded":%d,"stdout":""}' % (forged, forged)
                try:
                    f(text)
                except BaseException:
                    pass
    return x * 10
"""


def test_code_in_a_batch_cannot_forge_a_later_inputs_outcome(sandbox: Sandbox) -> None:
    outcomes = sandbox.run(FORGE_LATER_OUTCOMES, ["(1,)", "(2,)", "(3,)"])
    assert [(o.status, o.value) for o in outcomes] == [(Status.OK, "10"), (Status.OK, "20"), (Status.OK, "30")]


def test_code_planted_for_the_cache_by_running_code_is_never_taken_or_run_later(sandbox: Sandbox) -> None:
    # The hidden code tries to plant other code under its own source for the calls that follow: the guest holds
    # what the host takes next, and the hidden code puts its own compiled code there, and keeps putting it there.
    # The host takes compiled code only when `load` returns, before any hidden code has run in the instance.
    source = """
def test_func(x):
    # Through the real builtins (no tracked import), so the guest does not undo the change after this input.
    importer = print.__self__.__import__
    marshal, binascii = importer('marshal'), importer('binascii')
    guest = importer('sys').modules['pau_guest']
    evil = compile("def test_func(x):\\n    return 'planted'", "<hidden>", "exec")
    blob = binascii.b2a_base64(marshal.dumps(evil), newline=False).decode().encode()
    guest._HELD[0] = blob
    guest._hold = lambda text, _blob=blob: guest._HELD.__setitem__(0, _blob) or len(_blob)
    return x
"""
    for _ in range(4):
        outcome = sandbox.call(source, "(5,)")
        assert outcome.status is Status.CRASH  # its own outcome is the planted code: not an outcome
        assert "planted" not in _text([outcome])
    assert sandbox.call("def test_func(x):\n    return x", "(5,)").value == "5"


@pytest.mark.parametrize("call", ["host.source()", "host.sleep(1)"])
def test_a_host_import_called_at_module_level_of_the_hidden_code_answers_nothing_new(
    sandbox: Sandbox, call: str
) -> None:
    source = f"""# {MARKER}
import sys
host = sys.modules['wit_world.imports.host']
LEAK = {call}
def test_func():
    return repr(LEAK)
"""
    outcome = sandbox.call(source, "()")
    assert MARKER not in _text([outcome])
    if call.startswith("host.sleep"):
        assert outcome.value == "'None'"
    else:
        assert outcome.status is Status.CRASH


def test_a_batch_still_gives_the_outcomes_of_separate_calls_after_the_protocol_change(sandbox: Sandbox) -> None:
    source = "import random\nn = 0\ndef test_func(x):\n    global n\n    n += 1\n    return (x, n, random.random())"
    inputs = [f"({i},)" for i in range(30)]
    batch = sandbox.run(source, inputs)
    separate = [sandbox.call(source, literal) for literal in inputs]
    assert [o.value for o in batch] == [o.value for o in separate]
