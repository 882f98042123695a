"""The settings and request of a test server, written as ``pau-mcp serve``'s flags.

The server tests name their servers the way an operator starts one (``"--db", path, "--budget", "3"``): a test
reads like the command line it stands for. Here those flags become the two values ``pau_mcp.server_assembly``
builds a server from, without the command's parser: every setting's flag is the one ``pau_mcp.config.SETTINGS``
gives it, its ``PAU_*`` variable is read when the flag is absent (a flag beats the variable, as in the command),
and the values are validated by ``Settings`` itself. The command's own parsing is tested through the command
(``tests/pau_mcp/server/test_cli_server.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pau_mcp.config import SETTINGS, Settings
from pau_mcp.server_assembly import DEFAULT_SUITES, ServeRequest

#: ``serve``'s own options (not settings): the request field each sets.
_REQUEST_FLAGS = {
    "--transport": "transport", "--host": "host", "--port": "port", "--run": "run", "--feedback": "feedback",
    "--page-size": "page_size", "--docs": "docs",
}  # fmt: skip
_REQUEST_LISTS = {"--suite": "suites", "--methods": "methods"}
_REQUEST_SWITCHES = {"--stateless": "stateless"}
_SETTING_FLAGS = {spec.flag: spec for spec in SETTINGS.values()}


def serve_parts(args: Sequence[str]) -> tuple[Settings, ServeRequest]:
    """The settings and request ``pau-mcp serve ARGS`` stands for.

    Raises:
        ValueError: a flag ``serve`` does not have, or one without its value.
        pau_mcp.config.SettingsError: a setting's value is refused (the message names its flag and variable).
    """
    settings: dict[str, Any] = {}
    request: dict[str, Any] = {}
    lists: dict[str, list[str]] = {}
    given = list(args)
    while given:
        flag = given.pop(0)
        if flag in _REQUEST_SWITCHES:
            request[_REQUEST_SWITCHES[flag]] = True
            continue
        if not given:
            raise ValueError(f"{flag} needs a value")
        value = given.pop(0)
        if flag in _REQUEST_FLAGS:
            field = _REQUEST_FLAGS[flag]
            request[field] = int(value) if field in ("port", "page_size") else value
        elif flag in _REQUEST_LISTS:
            lists.setdefault(_REQUEST_LISTS[flag], []).append(value)
        elif flag in _SETTING_FLAGS:
            spec = _SETTING_FLAGS[flag]
            if spec.multiple:
                settings.setdefault(spec.name, []).append(value)
            else:
                settings[spec.name] = value
        else:
            raise ValueError(f"pau-mcp serve has no flag {flag}")
    methods = [item.strip() for value in lists.get("methods", []) for item in value.split(",") if item.strip()]
    return Settings.from_options(**{**_from_environment(), **settings}), ServeRequest(
        suites=tuple(lists.get("suites", ())) or DEFAULT_SUITES, methods=tuple(methods), **request
    )


def _from_environment() -> dict[str, Any]:
    """The settings this process's ``PAU_*`` variables give, as the command reads them."""
    values: dict[str, Any] = {}
    for spec in SETTINGS.values():
        raw = os.environ.get(spec.env)
        if raw:
            values[spec.name] = raw.split(os.pathsep) if spec.multiple else raw
    return values
