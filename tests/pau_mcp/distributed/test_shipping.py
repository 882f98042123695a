"""What a Ray worker takes from the driver decides what the run does on every node."""

from __future__ import annotations

from pau_mcp.config import Settings
from pau_mcp.distributed.shipping import pack


def test_a_worker_follows_the_drivers_protocol_so_its_scorer_and_agent_agree(tmp_path):
    driver = Settings(protocol="reference", budget=7, db=tmp_path / "driver.db")
    worker = pack(driver).settings(tmp_path / "worker")
    assert worker.protocol == "reference" and worker.budget == 7
    assert worker.db_path == tmp_path / "worker" / "runs.db"
