"""Code nothing calls is gone."""

from __future__ import annotations


def test_code_nothing_calls_is_gone() -> None:
    from pau_mcp.harness import runner
    from pau_mcp.runstore import RunStore
    from pau_mcp.server.catalog import Catalog

    assert not hasattr(RunStore, "counted_calls")
    assert not hasattr(Catalog, "tools")
    assert not hasattr(runner, "_ROOT")
