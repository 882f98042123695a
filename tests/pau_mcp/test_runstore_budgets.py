"""Budgets in the run store: one count per session and method for every process that shares the store.

A reservation is atomic whoever makes it: threads with connections of their own, and separate processes on one
SQLite file (as several `pau-mcp serve` replicas would), never take more than the budget between them.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

from pau_mcp.contract import ToolStatus
from pau_mcp.runstore import MIGRATIONS, CallRecord, RunStore

ROOT = Path(__file__).resolve().parents[2]


def _session(store: RunStore, key: str = "agent") -> int:
    session = store.claim_session(store.ensure_run("r", kind="serve"), key, "token", "http")
    assert session is not None
    return session


def test_of_many_concurrent_reservations_on_a_budget_of_ten_exactly_ten_succeed(
    store_at: Callable[[str], Path | str],
) -> None:
    db = store_at("runs")
    first = RunStore(db)
    session = _session(first)
    stores = [first] + [RunStore(db) for _ in range(5)]  # a connection each, as separate processes have
    taken: list[int | None] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def reserve(store: RunStore) -> None:
        start.wait(timeout=30)
        for _ in range(4):
            got = store.reserve_call(session, "builtin/b001", 10)
            with lock:
                taken.append(got)

    threads = [threading.Thread(target=reserve, args=(stores[i % len(stores)],)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(taken) == 48
    assert sorted(t for t in taken if t is not None) == list(range(1, 11))
    assert first.budget_spent(session, "builtin/b001") == (10, 0)
    for store in stores:
        store.close()


_RESERVER = textwrap.dedent(
    """
    import sys
    from pau_mcp.runstore import RunStore

    store = RunStore(sys.argv[1])
    session = int(sys.argv[2])
    sys.stdin.readline()  # every process starts reserving at once
    got = [store.reserve_call(session, "builtin/b001", 10) for _ in range(8)]
    print(" ".join(str(g) for g in got if g is not None))
    """
)


def test_processes_sharing_one_store_never_take_more_than_the_budget_between_them(
    store_at: Callable[[str], Path | str],
) -> None:
    db = store_at("runs")
    store = RunStore(db)
    session = _session(store)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _RESERVER, str(db), str(session)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(4)
    ]
    outputs = [p.communicate(input="go\n", timeout=120) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err[-2000:] for _, err in outputs]
    taken = sorted(int(n) for out, _ in outputs for n in out.split())
    assert taken == list(range(1, 11))
    assert store.budget_spent(session, "builtin/b001") == (10, 0)
    store.close()


def test_a_released_query_can_be_taken_again_and_a_count_never_goes_below_zero(
    store_at: Callable[[str], Path | str],
) -> None:
    store = RunStore(store_at("runs"))
    session = _session(store)
    assert [store.reserve_call(session, "m/a", 2) for _ in range(3)] == [1, 2, None]
    store.release_call(session, "m/a")
    assert store.reserve_call(session, "m/a", 2) == 2
    for _ in range(5):
        store.release_call(session, "m/a")
        store.release_call(session, "m/never-reserved")
    assert store.budget_spent(session, "m/a") == (0, 0)
    assert store.budget_spent(session, "m/never-reserved") == (0, 0)
    store.close()


def test_without_a_budget_every_query_is_still_counted(store_at: Callable[[str], Path | str]) -> None:
    store = RunStore(store_at("runs"))
    session = _session(store)
    assert [store.reserve_call(session, "m/a", 0) for _ in range(25)] == list(range(1, 26))
    store.close()


def test_feedback_answers_stop_at_their_limit_and_a_limit_of_zero_gives_none(
    store_at: Callable[[str], Path | str],
) -> None:
    store = RunStore(store_at("runs"))
    session = _session(store)
    assert [store.reserve_feedback(session, "m/a", 2) for _ in range(3)] == [1, 2, None]
    store.release_feedback(session, "m/a")
    assert store.reserve_feedback(session, "m/a", 2) == 2
    assert store.reserve_feedback(session, "m/b", 0) is None
    assert store.budget_spent(session, "m/a") == (0, 2) and store.budget_spent(session, "m/b") == (0, 0)
    store.close()


def test_a_session_belongs_to_the_kind_of_credential_that_claimed_it_first(
    store_at: Callable[[str], Path | str],
) -> None:
    db = store_at("runs")
    store, other = RunStore(db), RunStore(db)
    run = store.ensure_run("contest", kind="serve")
    owned = store.claim_session(run, "team-a", "token", "http", "client 1")
    assert owned is not None
    assert other.claim_session(run, "team-a", "token", "http") == owned
    assert other.claim_session(run, "team-a", "label", "http") is None
    assert other.claim_session(other.ensure_run("another", kind="serve"), "team-a", "label", "http") not in (
        None,
        owned,
    )
    store.close()
    other.close()


def test_a_store_from_before_budgets_keeps_what_its_sessions_spent(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    conn = sqlite3.connect(db)
    for script in MIGRATIONS[:4]:
        conn.executescript(script if isinstance(script, str) else script.sqlite)
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO runs (name, kind, created_at) VALUES ('old', 'serve', 'then')")
    conn.execute("INSERT INTO sessions (run_id, key, transport, started_at) VALUES (1, 'alice', 'http', 'then')")
    for counted, method in ((1, "m/a"), (1, "m/a"), (0, "m/a"), (1, "m/b")):
        conn.execute(
            "INSERT INTO calls (session_id, method_id, tool, arguments, counted, status, at)"
            " VALUES (1, ?, 'fn', '(1,)', ?, 'ok', 'then')",
            (method, counted),
        )
    conn.execute(
        "INSERT INTO submissions (session_id, method_id, description, feedback, at) VALUES (1, 'm/a', 'd', 1, 'then')"
    )
    conn.commit()
    conn.close()
    store = RunStore(db)
    assert store.version == len(MIGRATIONS)
    assert store.budget_spent(1, "m/a") == (2, 1) and store.budget_spent(1, "m/b") == (1, 0)
    assert store.claim_session(1, "alice", "label", "http") == 1  # recorded before ownership: the first claim owns it
    assert store.claim_session(1, "alice", "token", "http") is None
    store.record_call(1, CallRecord("m/a", "fn", "(2,)", True, ToolStatus.OK))
    store.close()
