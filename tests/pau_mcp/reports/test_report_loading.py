"""A report's numbers are computed without loading what only some reports need."""

from __future__ import annotations

import subprocess
import sys


def test_building_a_report_loads_no_classifier_no_plotting_no_sandbox_and_no_model_client() -> None:
    probe = (
        "import sys, pau_mcp.reports.build, pau_mcp.reports.render; "
        "print(sorted(m for m in ('pau_mcp.reports.failures', 'matplotlib', 'wasmtime', 'openai', 'anthropic', "
        "'pau_mcp.harness', 'pau_mcp.server') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
