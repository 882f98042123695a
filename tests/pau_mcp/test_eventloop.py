import asyncio
import importlib.util

import pytest

from pau_mcp import eventloop


async def _loop_module(value: int) -> tuple[int, str]:
    return value * 2, type(asyncio.get_running_loop()).__module__


def test_run_returns_the_result_of_the_coroutine() -> None:
    assert eventloop.run(_loop_module, 21)[0] == 42


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed on this platform")
def test_commands_run_on_uvloop_when_it_is_installed() -> None:
    assert eventloop.run(_loop_module, 1)[1].startswith("uvloop")
