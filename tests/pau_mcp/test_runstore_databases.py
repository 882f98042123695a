"""The run store on PostgreSQL beside SQLite: one schema, one dialect for the store's SQL, writers in many threads
and processes at once, and databases that are missing, unreachable, dropped or newer than this pau-mcp.

The PostgreSQL server is the test session's own (``postgres`` in tests/conftest.py); each test gets new databases.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from postgres_server import PostgresServer

from pau_mcp._databases import open_database
from pau_mcp.contract import ToolStatus
from pau_mcp.runstore import MIGRATIONS, CallRecord, RunStore, StoreError

ROOT = Path(__file__).resolve().parents[2]

#: A budget reservation as the server's budget rule writes it: one row per credential and method, taken only while
#: under the limit, atomically (no second statement can slip between the check and the increment).
RESERVE = (
    "INSERT INTO reservations (credential, method_id, used) VALUES (?, ?, 1)"
    " ON CONFLICT (credential, method_id) DO UPDATE SET used = reservations.used + 1"
    " WHERE reservations.used < ? RETURNING used"
)


def _sqlite_schema(path: Path | str) -> dict[str, dict[str, tuple[str, bool]]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        schema: dict[str, dict[str, tuple[str, bool]]] = {}
        for table in tables:
            columns = list(db.execute(f"PRAGMA table_info({table})"))
            keys = sum(1 for *_, primary in columns if primary)
            # Only a table's one INTEGER PRIMARY KEY is a row id; a column of a composite key is an ordinary integer.
            schema[table] = {
                name: ("id" if primary and keys == 1 and kind == "INTEGER" else kind.lower(), bool(notnull or primary))
                for _, name, kind, notnull, _, primary in columns
            }
        return schema


def _postgres_schema(url: str) -> dict[str, dict[str, tuple[str, bool]]]:
    # What each PostgreSQL type stands for: an id is an identity column, integers of either width are "integer".
    kinds = {"bigint": "integer", "integer": "integer", "double precision": "real", "text": "text"}
    with psycopg.connect(url) as db:
        rows = db.execute(
            "SELECT table_name, column_name, data_type, is_identity, is_nullable FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name <> 'pau_mcp_schema'"
        ).fetchall()
    schema: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, kind, identity, nullable in rows:
        schema.setdefault(table, {})[column] = ("id" if identity == "YES" else kinds[kind], nullable == "NO")
    return schema


def test_both_databases_get_the_same_tables_columns_types_and_constraints(tmp_path: Path, postgres_url: str) -> None:
    RunStore(tmp_path / "runs.db").close()
    RunStore(postgres_url).close()
    sqlite_schema, postgres_schema = _sqlite_schema(tmp_path / "runs.db"), _postgres_schema(postgres_url)
    assert sqlite_schema == postgres_schema
    assert {"runs", "sessions", "calls", "submissions", "scores", "episodes"} <= set(postgres_schema)


def test_a_conditional_upsert_and_quoted_marks_run_unchanged_on_both_databases(
    store_at: Callable[[str], Path | str],
) -> None:
    database = open_database(store_at("runs"))
    with database.transaction() as conn:
        conn.execute(
            "CREATE TABLE reservations (credential TEXT NOT NULL, method_id TEXT NOT NULL, used INTEGER NOT NULL,"
            " PRIMARY KEY (credential, method_id))"
        )
    taken = []
    for _ in range(5):
        with database.transaction() as conn:
            row = conn.execute(RESERVE, ("agent-1", "builtin/b001", 3)).fetchone()
            taken.append(None if row is None else row["used"])
    assert taken == [1, 2, 3, None, None]  # the limit holds: refused reservations return no row
    [row] = database.read("SELECT '100%' AS literal, 'why?' AS asked, ? AS bound, ? AS flag", ("50%", True))
    assert (row["literal"], row["asked"], row["bound"], row["flag"]) == ("100%", "why?", "50%", 1)
    assert (row[0], len(row), dict(row)["bound"]) == ("100%", 4, "50%")  # by position too, as sqlite3.Row
    database.close()


def test_many_threads_writing_through_two_stores_on_one_postgresql_database_lose_nothing(postgres_url: str) -> None:
    stores = [RunStore(postgres_url), RunStore(postgres_url)]
    threads, calls_each = 16, 20
    start = threading.Barrier(threads)

    def write(n: int) -> tuple[int, int, list[int]]:
        store = stores[n % 2]
        start.wait(timeout=30)
        run = store.ensure_run("shared", kind="serve")  # every thread races to create the same run and sessions
        session = store.ensure_session(run, f"agent-{n % 4}", "http")
        ids = [store.record_call(session, CallRecord("builtin/b001", "fn_x", f"({n}, {i})", True, ToolStatus.OK, value="1"))
               for i in range(calls_each)]  # fmt: skip
        store.record_submission(session, "builtin/b001", f"thread {n}", None)
        return run, session, ids

    with ThreadPoolExecutor(threads) as pool:
        done = [future.result(timeout=120) for future in [pool.submit(write, n) for n in range(threads)]]

    assert len({run for run, _, _ in done}) == 1
    sessions = {n % 4: session for n, (_, session, _) in enumerate(done)}
    assert all(session == sessions[n % 4] for n, (_, session, _) in enumerate(done))  # one id per key, both stores
    ids = [i for _, _, mine in done for i in mine]
    assert len(set(ids)) == threads * calls_each
    [run] = stores[0].runs()
    assert (run.sessions, run.calls, run.submissions) == (4, threads * calls_each, threads)
    arguments = {c.arguments for c in stores[1].calls(run.id)}
    assert arguments == {f"({n}, {i})" for n in range(threads) for i in range(calls_each)}
    assert [c.method_id for c in stores[1].calls(run.id) if c.counted] == ["builtin/b001"] * (threads * calls_each)
    for store in stores:
        store.close()


def test_stores_opened_at_once_on_a_new_postgresql_database_migrate_it_exactly_once(postgres_url: str) -> None:
    start = threading.Barrier(6)

    def open_store(_: int) -> int:
        start.wait(timeout=30)
        store = RunStore(postgres_url)
        version = store.version
        store.close()
        return version

    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(open_store, range(6), timeout=120))
    assert versions == [len(MIGRATIONS)] * 6
    with psycopg.connect(postgres_url) as db:
        assert db.execute("SELECT version FROM pau_mcp_schema").fetchall() == [(len(MIGRATIONS),)]


def test_an_unreachable_postgresql_server_is_one_line_saying_what_to_do_without_the_password(
    postgres: PostgresServer,
) -> None:
    with contextlib.closing(__import__("socket").socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    with pytest.raises(StoreError) as info:
        RunStore(f"postgresql://pau:hunter2@127.0.0.1:{port}/runs")
    message = str(info.value)
    assert "\n" not in message and "hunter2" not in message
    assert message.startswith(f"cannot use the run store postgresql://pau:***@127.0.0.1:{port}/runs: ")
    assert "Connection refused" in message and "createdb" in message and "--db / PAU_MCP_DB" in message
    with pytest.raises(StoreError, match=r'database "nowhere" does not exist.*createdb -O USER DBNAME'):
        RunStore(postgres.url("nowhere"))


def test_a_postgresql_url_libpq_cannot_read_is_refused_with_the_form_it_takes(postgres: PostgresServer) -> None:
    with pytest.raises(StoreError, match=r"not a PostgreSQL URL libpq accepts .* postgresql://USER@HOST:PORT/DBNAME"):
        RunStore(postgres.url("runs") + "?colour=blue")


def test_without_psycopg_a_postgresql_store_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what `import psycopg` meets where it is not installed
    with pytest.raises(StoreError, match=r"psycopg is not installed: pip install 'pau-mcp\[postgres\]'"):
        RunStore("postgresql://pau@127.0.0.1:1/runs")


def test_text_postgresql_cannot_hold_is_stored_as_its_escape(postgres_url: str) -> None:
    store = RunStore(postgres_url)
    session = store.ensure_session(store.ensure_run("r", kind="serve"), "k", "http", client="agent\x00 1")
    store.record_call(
        session, CallRecord("m/x", "fn_x", "('\x00',)", True, ToolStatus.ERROR, error_message="bad \x00\udcff")
    )
    store.record_submission(session, "m/x", "nul \x00 and \ud800", "def f():\x00")
    run = store.run_id("r")
    [call], [submission] = store.calls(run), store.submissions(run)
    assert (call.arguments, call.error_message) == ("('\\x00',)", "bad \\x00\\udcff")
    assert (submission.description, submission.code) == ("nul \\x00 and \\ud800", "def f():\\x00")
    exported = store.export_session("r", "k")
    assert exported is not None and exported.client == "agent\\x00 1"


def test_a_connection_the_server_dropped_is_replaced_and_no_write_is_lost(postgres_url: str) -> None:
    store = RunStore(postgres_url)
    session = store.ensure_session(store.ensure_run("r", kind="serve"), "k", "http")
    store.record_call(session, CallRecord("m/x", "fn_x", "(1,)", True, ToolStatus.OK, value="1"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # as a server restart or a proxy would drop them
        dropped = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    assert dropped
    store.record_call(session, CallRecord("m/x", "fn_x", "(2,)", True, ToolStatus.OK, value="2"))
    assert [c.arguments for c in store.calls(store.run_id("r"))] == ["(1,)", "(2,)"]


def test_a_failed_statement_inside_a_postgresql_write_commits_nothing_even_if_caught(postgres_url: str) -> None:
    """PostgreSQL ends a transaction at its first error and COMMIT would roll it back silently: the store says so."""
    database = open_database(postgres_url)
    with database.transaction() as conn:
        conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    with pytest.raises(RuntimeError, match="nothing of it was written"), database.transaction() as conn:
        conn.execute("INSERT INTO t (n) VALUES (1)")
        with contextlib.suppress(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO t (n) VALUES (1)")
    assert database.read("SELECT COUNT(*) AS n FROM t")[0]["n"] == 0
    with database.transaction() as conn:  # the connection went back to the pool clean
        conn.execute("INSERT INTO t (n) VALUES (2)")
    assert database.read("SELECT n FROM t")[0]["n"] == 2
    database.close()


def test_a_store_newer_than_this_pau_mcp_is_refused_on_either_database(store_at: Callable[[str], Path | str]) -> None:
    where = store_at("runs")
    RunStore(where).close()
    if isinstance(where, str):
        with psycopg.connect(where) as db:
            db.execute("UPDATE pau_mcp_schema SET version = 99")
    else:
        with contextlib.closing(sqlite3.connect(where)) as db:
            db.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match=r"schema version 99, newer than this pau-mcp .*; upgrade pau-mcp"):
        RunStore(where)


def test_a_user_who_may_not_create_the_tables_is_told_what_to_do_in_one_line(
    postgres: PostgresServer, postgres_url: str
) -> None:
    visitor = postgres_url.rsplit("/", 1)[1] + "_visitor"  # a login that neither owns the database nor may create in it
    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {visitor} LOGIN")
    with pytest.raises(StoreError) as info:
        RunStore(postgres_url.replace("postgresql://pau@", f"postgresql://{visitor}@"))
    assert "\n" not in str(info.value) and "CREATE TABLE" not in str(info.value)  # the cause, not the statement
    assert "permission denied for schema public" in str(info.value) and "createdb -O USER DBNAME" in str(info.value)
    assert info.value.reason == "permission denied"


def test_a_urls_password_is_never_shown_in_the_stores_location() -> None:
    from pau_mcp._databases import shown

    assert shown("postgresql://pau:s3cret@db:5432/runs") == "postgresql://pau:***@db:5432/runs"
    assert shown("postgresql://db/runs?password=s3cret&sslmode=require") == (
        "postgresql://db/runs?password=***&sslmode=require"
    )
    assert shown("postgresql://pau@db/runs") == "postgresql://pau@db/runs"


def test_a_postgresql_store_nobody_closed_leaves_no_connection_behind_once_collected(postgres_url: str) -> None:
    import gc
    import warnings

    gc.collect()  # what earlier tests of this process left (an event loop's transports) is not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(3):  # as commands and tests leave their stores
            RunStore(postgres_url).ensure_run(f"r{n}", kind="serve")
        gc.collect()
    dropped = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert [m for m in dropped if "psycopg" in m or "onnection" in m] == []  # closed, not dropped
    with psycopg.connect(postgres_url) as admin:
        left = admin.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pau-mcp'"
        ).fetchone()
    assert left == (0,)


def test_processes_opening_one_new_sqlite_store_at_once_all_open_it(tmp_path: Path) -> None:
    # Replicas or `serve --processes` started together: switching the new file to WAL does not wait on the busy
    # handler, so one open in eight failed with "database is locked". Forked from a process of its own (this one
    # has threads), two at a time on a new file, 40 times.
    script = textwrap.dedent(
        """
        import os, sys, time
        from pau_mcp.runstore import RunStore

        failed = []
        for round in range(40):
            path = os.path.join(sys.argv[1], f"{round}.db")
            start_read, start_write = os.pipe()
            children = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    os.close(start_write)
                    os.read(start_read, 1)
                    try:
                        store = RunStore(path)
                        store.ensure_run("together", kind="serve", config={})
                        store.close()
                    except Exception as exc:
                        print(exc, flush=True)
                        os._exit(1)
                    os._exit(0)
                children.append(pid)
            os.close(start_read)
            time.sleep(0.05)  # both waiting at the pipe
            os.close(start_write)  # both start at once
            failed += [pid for pid in children if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
        print("failed", len(failed))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "failed 0", done.stdout[-2000:]
