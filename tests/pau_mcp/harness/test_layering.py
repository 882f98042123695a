"""The harness's modules import in one direction, and code nothing calls is gone."""

from __future__ import annotations

import subprocess
import sys


def test_the_report_loads_without_the_failure_classifier_which_imports_the_report():
    probe = "import sys, pau_mcp.harness.report; print('pau_mcp.harness.failures' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def test_code_nothing_calls_is_gone():
    from pau_mcp.harness import runner
    from pau_mcp.runstore import RunStore
    from pau_mcp.server.catalog import Catalog

    assert not hasattr(RunStore, "counted_calls")
    assert not hasattr(Catalog, "tools")
    assert not hasattr(runner, "_ROOT")
