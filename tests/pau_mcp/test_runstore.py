"""The run store when its disk fills up: a refused write is a StoreError, and the store works again once there is room."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from pau_mcp.runstore import CallRecord, RunStore, StoreError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    store = RunStore(sys.argv[1])
    session = store.ensure_session(store.ensure_run("r", kind="serve"), "s", "stdio")
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    written, refused = 0, None
    for i in range(100):
        try:
            store.record_call(session, CallRecord("m/x", "fn_x", "x" * 50_000, True, "ok"))
            written += 1
        except StoreError as exc:
            refused = {"reason": exc.reason, "message": str(exc)}
            break
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    store.record_call(session, CallRecord("m/x", "fn_x", "(1,)", True, "ok"))
    rows = len(store.calls(store.run_id("r")))
    print(json.dumps({"written": written, "refused": refused, "rows": rows}))
    """
)


def test_a_write_the_disk_cannot_take_is_refused_and_the_store_recovers_when_there_is_room(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "runs.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["refused"] is not None, "the store never filled up"
    assert "runs.db" in report["refused"]["message"] and "\n" not in report["refused"]["message"]
    assert report["refused"]["reason"] in ("disk I/O error", "database or disk is full")
    assert report["rows"] == report["written"] + 1
