"""Freezing, validating and finding methods as library calls (``manifests.freezing``, ``manifests.validation``,
``manifests.lookup``): a refusal is data with a status and a message that says what to do, made before any
sandbox is."""

from __future__ import annotations

from typing import NoReturn

import pytest

from pau_mcp.manifests import ManifestError, ManifestStore, tool_name
from pau_mcp.manifests.freezing import freeze_suites, packaged_suite
from pau_mcp.manifests.lookup import find_method, tools_for
from pau_mcp.manifests.validation import validate_suites


def _no_sandbox() -> NoReturn:
    raise AssertionError("a refused request must not make a sandbox")


def test_with_no_suite_of_your_own_there_is_nothing_to_freeze() -> None:
    frozen = freeze_suites(ManifestStore(), sandbox=_no_sandbox)
    assert frozen.status == "usage"
    assert "--manifests" in frozen.message


def test_a_packaged_suite_is_not_frozen_in_place() -> None:
    store = ManifestStore()
    assert packaged_suite(store, "builtin")
    frozen = freeze_suites(store, suites=("builtin",), sandbox=_no_sandbox)
    assert frozen.status == "error"
    assert "part of the pau-mcp installation" in frozen.message and "cp -r" in frozen.message


def test_validating_a_missing_suite_is_an_error() -> None:
    checked = validate_suites(ManifestStore(), ("no-such-suite",), sandbox=_no_sandbox)
    assert checked.status == "error"
    assert "no-such-suite" in checked.message


def test_a_method_is_found_by_its_tool_name_under_the_deployment_key() -> None:
    store = ManifestStore()
    tool = tool_name("k" * 32, "builtin/b001")
    assert find_method(store, tool, "k" * 32).id == "builtin/b001"
    with pytest.raises(ManifestError, match="--tool-key"):
        find_method(store, tool, "another key, other tool names")


def test_tools_for_names_the_unknown_and_keeps_the_order_given() -> None:
    key = "k" * 32
    chosen = tools_for(ManifestStore(), key, ["builtin/b002", tool_name(key, "builtin/b001"), "nope"])
    assert chosen.tools[:2] == [tool_name(key, "builtin/b002"), tool_name(key, "builtin/b001")]
    assert chosen.unknown == ["nope"]
