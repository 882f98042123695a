"""The server's limits travel as three typed groups, each made from ``Settings`` in one place (``pau_mcp.limits``):
a group reads exactly the settings it declares, and ``pau-mcp serve`` has a flag for each of them."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pau_mcp.cli.serve import serve
from pau_mcp.config import SETTINGS, Settings
from pau_mcp.limits import HTTPLimits, ProtocolLimits, ServiceLimits, message_limit

GROUPS = (ServiceLimits, ProtocolLimits, HTTPLimits)


class _Reads:
    """Settings that remember which of them were read."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self.settings, name)


@pytest.mark.parametrize("group", GROUPS, ids=lambda group: group.__name__)
def test_each_limits_group_reads_exactly_the_settings_it_declares(
    group: type[ServiceLimits] | type[ProtocolLimits] | type[HTTPLimits],
) -> None:
    reads = _Reads(Settings.from_options())
    group.from_settings(cast(Settings, reads))
    assert reads.read == set(group.SETTINGS)
    assert set(group.SETTINGS) <= set(SETTINGS)


def test_serve_takes_the_flag_of_every_limit_setting() -> None:
    flags = {param.name for param in serve.params}
    for group in GROUPS:
        assert set(group.SETTINGS) <= flags, group.__name__


def test_limits_set_by_their_settings_reach_their_groups() -> None:
    settings = Settings.from_options(
        budget=7, feedback_limit=2, max_argument_kb=2048, max_submissions=4, max_concurrent_calls=3, max_sessions=9,
        max_sessions_per_credential=2, session_idle_s=6, max_connections=30, read_timeout_s=1.5,
        allowed_hosts=["mcp.example.org"],
    )  # fmt: skip
    assert ServiceLimits.from_settings(settings) == ServiceLimits(7, 2, 2048 * 1024, 4)
    assert ProtocolLimits.from_settings(settings, page_size=5) == ProtocolLimits(
        message_limit(2048 * 1024), page_size=5, calls_running=3, calls_waiting=21
    )
    assert HTTPLimits.from_settings(settings) == HTTPLimits(
        message_limit(2048 * 1024), 9, 2, 6.0, 30, 1.5, ("mcp.example.org",)
    )


def test_a_message_holds_the_largest_arguments_escaped_and_never_less_than_a_mebibyte() -> None:
    assert message_limit(64 * 1024) == 1 << 20
    assert message_limit(2048 * 1024) == 2 * 2048 * 1024 + 64 * 1024
