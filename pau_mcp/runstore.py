"""The run store: every run, session, call, submission, score and episode, in SQLite or PostgreSQL.

A file path opens SQLite (embedded, the default); a ``postgresql://`` URL opens a PostgreSQL database that
several server processes (replicas) share. Every write is committed before the caller answers anyone, so a
crash loses nothing an agent saw. SQLite uses WAL, so a report can read while a server writes. The schema
evolves by numbered migrations (``MIGRATIONS``), applied in order under the write lock and recorded in
``PRAGMA user_version`` (SQLite) or the table ``pau_mcp_schema`` (PostgreSQL); never edit a released
migration, add the next one.

This module is the only one that writes SQL, once for both databases (``pau_mcp._databases`` translates). The
rules that SQL follows:

* ``?`` placeholders, never string formatting of values (``%`` is fine: it is escaped for psycopg).
* A new row's id from ``INSERT ... RETURNING id``, never ``lastrowid``; upserts as ``INSERT ... ON CONFLICT
  (columns) DO NOTHING`` or ``DO UPDATE SET ... [WHERE ...] [RETURNING ...]`` naming the conflict target, never
  ``INSERT OR IGNORE/REPLACE``.
* Values of the column's type: flags are INTEGER 0/1 (a Python bool binds as 0/1) and compared as ``= 1``, never
  used bare as a condition; times are ISO text from ``utc_now()``, never SQL date functions.
* Strings in single quotes (double quotes name columns in PostgreSQL); every selected column is grouped or
  aggregated; no ``?`` in comments.
* Inside a transaction, never catch an SQL error and carry on: PostgreSQL ends the transaction at its first
  failed statement (the store refuses to commit it).
* A migration that differs between the two is a ``Migration(sqlite=..., postgres=...)``: in PostgreSQL an id is
  ``BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY`` (SQLite: ``INTEGER PRIMARY KEY``), a float ``DOUBLE
  PRECISION`` (SQLite: ``REAL``), a count that may pass 2**31 ``BIGINT``; a plain string runs on both as written.

Writes are serialised on both databases (SQLite's single writer; an advisory lock in PostgreSQL), so a method may
read and then write in one transaction without racing another process. Only a transaction of plain inserts may
ask for ``_transaction(exclusive=False)``, which in PostgreSQL commits beside the others (the calls of many
sessions then share the database's disk flushes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

from ._databases import Connection, StoreBusy, StoreError, is_postgres_url, open_database
from .contract import (
    CallStatus,
    EpisodeEnd,
    EpisodeState,
    RecordStatus,
    ScoreStatus,
    TaskStatus,
    TerminalTaskStatus,
    ToolStatus,
)

__all__ = [
    "MIGRATIONS",
    "CallRecord",
    "CallRow",
    "EpisodeResult",
    "EpisodeRow",
    "Migration",
    "PAGE_ROWS",
    "RunRow",
    "RunStore",
    "ScoreRow",
    "SessionRecord",
    "StoreBusy",
    "StoreError",
    "SubmissionRow",
    "TERMINAL_STATUSES",
    "TaskRow",
    "is_postgres_url",
    "shown_outcome",
    "utc_now",
]


#: Rows a streaming reader (``iter_calls``, ``iter_submissions``) takes from the database at once.
PAGE_ROWS = 2000


@dataclass(frozen=True)
class Migration:
    """A schema step written for each database, where their types differ (a plain string runs on both)."""

    sqlite: str
    postgres: str


MIGRATIONS: list[str | Migration] = [
    # 1: runs, sessions, calls, submissions, scores
    Migration(
        sqlite="""
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        config TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        key TEXT NOT NULL,
        transport TEXT NOT NULL,
        client TEXT,
        started_at TEXT NOT NULL,
        UNIQUE (run_id, key)
    );
    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        method_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        counted INTEGER NOT NULL,
        status TEXT NOT NULL,
        value TEXT,
        error_type TEXT,
        error_message TEXT,
        outcome TEXT,
        duration_ms REAL,
        at TEXT NOT NULL
    );
    CREATE INDEX calls_by_session ON calls (session_id, method_id);
    CREATE TABLE submissions (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        method_id TEXT NOT NULL,
        description TEXT NOT NULL,
        code TEXT,
        at TEXT NOT NULL
    );
    CREATE INDEX submissions_by_session ON submissions (session_id);
    CREATE TABLE scores (
        id INTEGER PRIMARY KEY,
        submission_id INTEGER NOT NULL REFERENCES submissions(id),
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        value REAL,
        model TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        at TEXT NOT NULL
    );
    CREATE INDEX scores_by_submission ON scores (submission_id, kind);
    """,
        postgres="""
    CREATE TABLE runs (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        created_at TEXT NOT NULL,
        config TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE sessions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id BIGINT NOT NULL REFERENCES runs(id),
        key TEXT NOT NULL,
        transport TEXT NOT NULL,
        client TEXT,
        started_at TEXT NOT NULL,
        UNIQUE (run_id, key)
    );
    CREATE TABLE calls (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        method_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        counted INTEGER NOT NULL,
        status TEXT NOT NULL,
        value TEXT,
        error_type TEXT,
        error_message TEXT,
        outcome TEXT,
        duration_ms DOUBLE PRECISION,
        at TEXT NOT NULL
    );
    CREATE INDEX calls_by_session ON calls (session_id, method_id);
    CREATE TABLE submissions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        method_id TEXT NOT NULL,
        description TEXT NOT NULL,
        code TEXT,
        at TEXT NOT NULL
    );
    CREATE INDEX submissions_by_session ON submissions (session_id);
    CREATE TABLE scores (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        submission_id BIGINT NOT NULL REFERENCES submissions(id),
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        value DOUBLE PRECISION,
        model TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        at TEXT NOT NULL
    );
    CREATE INDEX scores_by_submission ON scores (submission_id, kind);
    """,
    ),
    # 2: evaluation episodes, one per method per run, resumable
    Migration(
        sqlite="""
    CREATE TABLE episodes (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        method_id TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        session_key TEXT,
        submission_id INTEGER REFERENCES submissions(id),
        concluded INTEGER,
        queries INTEGER,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        error TEXT,
        trajectory TEXT NOT NULL DEFAULT '[]',
        started_at TEXT,
        finished_at TEXT,
        UNIQUE (run_id, method_id)
    );
    CREATE INDEX episodes_by_state ON episodes (run_id, state);
    """,
        postgres="""
    CREATE TABLE episodes (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id BIGINT NOT NULL REFERENCES runs(id),
        method_id TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        session_key TEXT,
        submission_id BIGINT REFERENCES submissions(id),
        concluded INTEGER,
        queries INTEGER,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        error TEXT,
        trajectory TEXT NOT NULL DEFAULT '[]',
        started_at TEXT,
        finished_at TEXT,
        UNIQUE (run_id, method_id)
    );
    CREATE INDEX episodes_by_state ON episodes (run_id, state);
    """,
    ),
    # 3: whether a submission was answered with feedback (--feedback score), so its limit survives a restart
    """
    ALTER TABLE submissions ADD COLUMN feedback INTEGER NOT NULL DEFAULT 0
    """,
    # 4: per episode, the examples the code writer was given (so re-scoring gives it the same), and the
    # exploration coverage the operator measured (never shown to agents)
    """
    ALTER TABLE episodes ADD COLUMN examples TEXT;
    ALTER TABLE episodes ADD COLUMN coverage TEXT
    """,
    # 5: budgets held by the store, so that every server process sharing it (replicas) keeps one count per session
    # and method: queries reserved before a call runs (returned when it never ran) and submits answered with
    # feedback; and which kind of credential owns each session (a label is one credential's: ``claim_session``).
    # The counts of existing sessions are carried over from their recorded calls and submissions.
    """
    ALTER TABLE sessions ADD COLUMN credential TEXT;
    CREATE TABLE budgets (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        method_id TEXT NOT NULL,
        used INTEGER NOT NULL DEFAULT 0,
        feedback INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, method_id)
    );
    INSERT INTO budgets (session_id, method_id, used, feedback)
        SELECT session_id, method_id, COUNT(*), 0 FROM calls WHERE counted = 1 GROUP BY session_id, method_id;
    INSERT INTO budgets (session_id, method_id, used, feedback)
        SELECT session_id, method_id, 0, COUNT(*) FROM submissions WHERE feedback = 1 GROUP BY session_id, method_id
        ON CONFLICT (session_id, method_id) DO UPDATE SET feedback = excluded.feedback
    """,
    # 6: tasks of the MCP Tasks extension (SEP-2663), owned by a session: their state outlives the request that
    # made them and is read by whichever server process a client's next request reaches
    Migration(
        sqlite="""
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        expires REAL NOT NULL,
        ttl_ms INTEGER NOT NULL,
        poll_ms INTEGER NOT NULL,
        result TEXT,
        error TEXT,
        input_requests TEXT NOT NULL DEFAULT '{}',
        input_responses TEXT NOT NULL DEFAULT '{}',
        cancel_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_session ON tasks (session_id, expires)
    """,
        postgres="""
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        expires DOUBLE PRECISION NOT NULL,
        ttl_ms BIGINT NOT NULL,
        poll_ms INTEGER NOT NULL,
        result TEXT,
        error TEXT,
        input_requests TEXT NOT NULL DEFAULT '{}',
        input_responses TEXT NOT NULL DEFAULT '{}',
        cancel_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_session ON tasks (session_id, expires)
    """,
    ),
    # 7: a session's calls in order, a page at a time (``iter_call_rows``): without it, reading the next page of a
    # session sorted all its calls again (a million calls took minutes and gigabytes to show)
    """
    CREATE INDEX calls_in_session_order ON calls (session_id, id)
    """,
]

#: The statuses a task never leaves.
TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(get_args(TerminalTaskStatus))


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with milliseconds."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


@dataclass(frozen=True)
class CallRecord:
    """What a tool call did, as recorded."""

    method_id: str
    tool: str
    arguments: str
    counted: bool
    status: CallStatus
    value: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    outcome: dict[str, Any] | None = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class EpisodeResult:
    """How an evaluation episode ended, as the harness records it."""

    state: EpisodeEnd
    session_key: str | None = None
    submission_id: int | None = None
    concluded: bool | None = None
    queries: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    trajectory: list[dict[str, Any]] | None = None
    examples: list[list[str]] | None = None


@dataclass(frozen=True)
class RunRow:
    """One run, as ``RunStore.runs`` and ``RunStore.run`` read it.

    Attributes:
        id: Its row id.
        name: Its name (unique).
        kind: ``eval``, ``rl``, ``serve``, ``score``, ...: what made it.
        created_at: When it was created.
        config: The configuration it was created with (``{}`` for a server's run).
        sessions: Its sessions.
        calls: Their calls.
        submissions: Their submissions.
    """

    id: int
    name: str
    kind: str
    created_at: str
    config: dict[str, Any]
    sessions: int = 0
    calls: int = 0
    submissions: int = 0


@dataclass(frozen=True)
class CallRow:
    """One recorded tool call (``CallRecord`` as stored), with its session's key."""

    id: int
    session_id: int
    method_id: str
    tool: str
    arguments: str
    counted: bool
    status: str
    value: str | None
    error_type: str | None
    error_message: str | None
    outcome: dict[str, Any] | None
    duration_ms: float | None
    at: str
    session_key: str


@dataclass(frozen=True)
class SubmissionRow:
    """One recorded submission, with its session's key.

    Attributes:
        feedback: Whether it was answered with scores (``--feedback score``).
    """

    id: int
    session_id: int
    method_id: str
    description: str
    code: str | None
    at: str
    feedback: bool
    session_key: str


@dataclass(frozen=True)
class ScoreRow:
    """One recorded score of a submission.

    Attributes:
        kind: ``judge``, ``codematch``, ``direct``, ...
        status: ``scored``, ``unscored``, ``error``, ...
        value: The rating or fraction, when scored.
        model: The model that made it, if any.
        detail: What else the scorer recorded (usage, cost, reason, ...).
    """

    id: int
    submission_id: int
    kind: str
    status: ScoreStatus
    value: float | None
    model: str | None
    detail: dict[str, Any]
    at: str


@dataclass(frozen=True)
class EpisodeRow:
    """One planned episode of a run and how it stands, with its submission's latest score of each kind.

    Attributes:
        state: ``pending``, ``running``, ``done`` or ``failed``.
        attempts: How many times it was started.
        trajectory: Its steps, when read ``with_trajectories``; else None.
        examples: The examples its code writer was given, if recorded.
        coverage: What its calls covered of the hidden function (operator only), if measured.
        scores: Its submission's latest score of each kind.
    """

    id: int
    run_id: int
    method_id: str
    state: EpisodeState
    attempts: int
    session_key: str | None
    submission_id: int | None
    concluded: bool | None
    queries: int | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: str | None
    trajectory: list[dict[str, Any]] | None
    started_at: str | None
    finished_at: str | None
    examples: list[list[str]] | None
    coverage: dict[str, Any] | None
    scores: dict[str, ScoreRow]


@dataclass(frozen=True)
class TaskRow:
    """One task of the Tasks extension, as the store holds it.

    Attributes:
        id: The task id (unguessable; the client's handle).
        session_id: The session (credential) that owns it.
        tool: The tool whose call it is.
        status: ``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``.
        status_message: What the status means, for people.
        created_at: When it was made (ISO 8601).
        updated_at: When it last changed (ISO 8601).
        expires: When it may be discarded (seconds since the epoch): ``created_at`` plus ``ttl_ms``.
        ttl_ms: How long it is kept from its creation.
        poll_ms: How often a client should poll it.
        result: The call's result once ``completed``.
        error: The JSON-RPC error once ``failed``.
        input_requests: The questions outstanding while ``input_required``, by key.
        input_responses: Answers delivered and not yet taken by the task, by key.
        cancel_requested: Whether its client asked to cancel it.
    """

    id: str
    session_id: int
    tool: str
    status: TaskStatus
    status_message: str | None
    created_at: str
    updated_at: str
    expires: float
    ttl_ms: int
    poll_ms: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    input_requests: dict[str, Any]
    input_responses: dict[str, Any]
    cancel_requested: bool


@dataclass(frozen=True)
class SessionRecord:
    """One session's rows, carried from the run store of the process that recorded them into another.

    A Ray worker's own server records an episode's session in the worker's store; the driver imports it into
    the run's store. Row ids are the recording store's: the import gives the rows new ones.

    Attributes:
        key: The session's key (``<run>/<method>/<attempt>`` for an evaluation episode).
        transport: How the session was served (``http``, ...).
        client: The client's name and version, as recorded.
        started_at: When the session began.
        calls: Its calls in order, each a row of ``calls`` without ``id`` and ``session_id``.
        submissions: Its submissions in order, each a row of ``submissions`` with its ``id`` and without
            ``session_id``.
        scores: The scores of those submissions in order, each a row of ``scores`` without ``id``.
    """

    key: str
    transport: str
    client: str | None
    started_at: str
    calls: list[dict[str, Any]]
    submissions: list[dict[str, Any]]
    scores: list[dict[str, Any]]


class RunStore:
    """The run store, in a SQLite file or a PostgreSQL database. Thread-safe.

    Args:
        path: A SQLite file (created with its directory if missing), or a ``postgresql://`` URL of an existing
            database (its tables are created on first use).

    Attributes:
        path: The file, or the URL as given (to hand on as ``--db`` to a process on the same machine).
        location: Where the store is, as messages show it (a URL's password hidden).

    Raises:
        StoreError: the store cannot be opened, or its schema is newer than this pau-mcp.
    """

    def __init__(self, path: Path | str) -> None:
        self.path: Path | str = path if is_postgres_url(path) else Path(path)
        self._db = open_database(self.path)
        self.location = self._db.location
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the connections."""
        self._db.close()

    @property
    def dialect(self) -> str:
        """Which database holds the store: ``sqlite`` or ``postgres``."""
        return self._db.dialect

    @property
    def version(self) -> int:
        """The schema version (number of migrations applied)."""
        return self._db.version()

    def immediately(self) -> AbstractContextManager[None]:
        """Within it, this thread's use of the store never waits for a lock: a store busy with another writer (and
        a PostgreSQL store, whose every statement is a network round trip) raises ``StoreBusy`` at once, before
        anything is written. For an event loop: try there, and do the operation in a thread on ``StoreBusy``."""
        return self._db.immediately()

    def _migrate(self) -> None:
        if self._db.version() == len(MIGRATIONS):
            return  # the common case reads one number and takes no lock
        with self._transaction() as conn:
            current = conn.schema_version()  # again, under the lock: another process may have migrated meanwhile
            if current > len(MIGRATIONS):
                raise StoreError(
                    f"{self.location} has schema version {current}, newer than this pau-mcp ({len(MIGRATIONS)}); upgrade pau-mcp"
                )
            for number, migration in enumerate(MIGRATIONS[current:], start=current + 1):
                script = migration if isinstance(migration, str) else getattr(migration, self._db.dialect)
                for statement in filter(str.strip, script.split(";")):
                    conn.execute(statement)
                conn.set_schema_version(number)

    def _transaction(self, exclusive: bool = True) -> AbstractContextManager[Connection]:
        """A write transaction, committed on exit (rolled back on error, including a commit that fails).

        Exclusive unless asked otherwise: serialised with every other write, from any process. A transaction of
        plain inserts only may pass ``exclusive=False`` (in PostgreSQL it then commits beside others, not after).
        """
        return self._db.transaction(exclusive)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Read rows (each read by column name or position)."""
        return self._db.read(sql, params)

    # -- runs and sessions ------------------------------------------------------------------

    def ensure_run(self, name: str, kind: str, config: dict[str, Any] | None = None) -> int:
        """The id of the run called ``name``, created if new."""
        with self._transaction() as conn:
            row = conn.execute("SELECT id FROM runs WHERE name = ?", (name,)).fetchone()
            if row is not None:
                return int(row["id"])
            cursor = conn.execute(
                "INSERT INTO runs (name, kind, created_at, config) VALUES (?, ?, ?, ?) RETURNING id",
                (name, kind, utc_now(), json.dumps(config or {}, sort_keys=True)),
            )
            return int(cursor.fetchone()["id"])

    def ensure_session(self, run_id: int, key: str, transport: str, client: str | None = None) -> int:
        """The id of the session ``key`` in a run, created if new."""
        with self._transaction() as conn:
            row = conn.execute("SELECT id FROM sessions WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
            if row is not None:
                return int(row["id"])
            cursor = conn.execute(
                "INSERT INTO sessions (run_id, key, transport, client, started_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
                (run_id, key, transport, client, utc_now()),
            )
            return int(cursor.fetchone()["id"])

    def claim_session(
        self, run_id: int, key: str, credential: str, transport: str, client: str | None = None
    ) -> int | None:
        """The id of the session ``key`` in a run for a kind of credential, created if new; None if another kind owns it.

        A session belongs to the kind of credential that first used it (``process``, ``token``, ``label``), for
        good: a session token's label can never be spent by the main token's holder naming it, nor the other way
        round, whichever server process answers. Sessions recorded before ownership was stored belong to the
        first kind that claims them.
        """
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO sessions (run_id, key, transport, client, started_at, credential) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, key) DO NOTHING",
                (run_id, key, transport, client, utc_now(), credential),
            )
            conn.execute(
                "UPDATE sessions SET credential = ? WHERE run_id = ? AND key = ? AND credential IS NULL",
                (credential, run_id, key),
            )
            row = conn.execute(
                "SELECT id, credential FROM sessions WHERE run_id = ? AND key = ?", (run_id, key)
            ).fetchone()
            return int(row["id"]) if row["credential"] == credential else None

    # -- budgets ----------------------------------------------------------------------------

    def reserve_call(self, session_id: int, method_id: str, budget: int) -> int | None:
        """Take one query of a session's budget on a method, atomically; returns the queries used with it.

        Every process sharing the store sees one count: of any number of concurrent reservations on a budget of N,
        exactly N succeed. Returns None (and takes nothing) when the budget is spent; ``budget`` 0 is no limit.
        Return it with ``release_call`` if the call never runs or cannot be recorded.

        Raises:
            StoreError: the store cannot be written; nothing was taken.
        """
        with self._transaction() as conn:
            if budget > 0:
                row = conn.execute(
                    "INSERT INTO budgets (session_id, method_id, used, feedback) VALUES (?, ?, 1, 0)"
                    " ON CONFLICT (session_id, method_id) DO UPDATE SET used = budgets.used + 1"
                    " WHERE budgets.used < ? RETURNING used",
                    (session_id, method_id, budget),
                ).fetchone()
            else:
                row = conn.execute(
                    "INSERT INTO budgets (session_id, method_id, used, feedback) VALUES (?, ?, 1, 0)"
                    " ON CONFLICT (session_id, method_id) DO UPDATE SET used = budgets.used + 1 RETURNING used",
                    (session_id, method_id),
                ).fetchone()
            return None if row is None else int(row["used"])

    def release_call(self, session_id: int, method_id: str) -> None:
        """Give back a query ``reserve_call`` took for a call that never ran or was not recorded."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE budgets SET used = used - 1 WHERE session_id = ? AND method_id = ? AND used > 0",
                (session_id, method_id),
            )

    def reserve_feedback(self, session_id: int, method_id: str, limit: int) -> int | None:
        """Take one of a session's submits answered with feedback on a method, atomically; returns how many are
        taken with it, or None (taking nothing) when ``limit`` are taken (``limit`` 0: none may be)."""
        if limit <= 0:
            return None
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO budgets (session_id, method_id, used, feedback) VALUES (?, ?, 0, 1)"
                " ON CONFLICT (session_id, method_id) DO UPDATE SET feedback = budgets.feedback + 1"
                " WHERE budgets.feedback < ? RETURNING feedback",
                (session_id, method_id, limit),
            ).fetchone()
            return None if row is None else int(row["feedback"])

    def release_feedback(self, session_id: int, method_id: str) -> None:
        """Give back a feedback answer ``reserve_feedback`` took for a submit that was not recorded."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE budgets SET feedback = feedback - 1 WHERE session_id = ? AND method_id = ? AND feedback > 0",
                (session_id, method_id),
            )

    def budget_spent(self, session_id: int, method_id: str) -> tuple[int, int]:
        """A session's queries taken and feedback answers taken on a method, as the store holds them now."""
        rows = self._query(
            "SELECT used, feedback FROM budgets WHERE session_id = ? AND method_id = ?", (session_id, method_id)
        )
        return (int(rows[0]["used"]), int(rows[0]["feedback"])) if rows else (0, 0)

    # -- calls and submissions --------------------------------------------------------------

    def record_call(self, session_id: int, call: CallRecord) -> int:
        """Store one tool call; returns its id.

        Raises:
            StoreError: the store cannot take it (a full or read-only disk); nothing was written.
        """
        with self._transaction(exclusive=False) as conn:  # an insert: nothing to race
            return self._insert_call(conn, session_id, call)

    @staticmethod
    def _insert_call(conn: Connection, session_id: int, call: CallRecord) -> int:
        cursor = conn.execute(
            "INSERT INTO calls (session_id, method_id, tool, arguments, counted, status, value, error_type,"
            " error_message, outcome, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                session_id, call.method_id, call.tool, _text(call.arguments), int(call.counted), call.status,
                _text(call.value), _text(call.error_type), _text(call.error_message),
                json.dumps(call.outcome) if call.outcome is not None else None, call.duration_ms, utc_now(),
            ),
        )  # fmt: skip
        return int(cursor.fetchone()["id"])

    def record_refusal(self, session_id: int, call: CallRecord, keep: int) -> int | None:
        """Store a call that did not count while the session has fewer than ``keep`` such calls of its method;
        returns its id, or None (nothing written) once it has ``keep``.

        Atomic: any number of concurrent refusals, from any process sharing the store, keep exactly ``keep``.

        Raises:
            StoreError: the store cannot take it; nothing was written.
        """
        with self._transaction() as conn:  # exclusive: the count and the insert see the same calls
            row = conn.execute(
                "SELECT COUNT(*) AS kept FROM calls WHERE session_id = ? AND method_id = ? AND counted = 0",
                (session_id, call.method_id),
            ).fetchone()
            if int(row["kept"]) >= keep:
                return None
            return self._insert_call(conn, session_id, call)

    def submissions_made(self, session_id: int, method_id: str) -> int:
        """Submissions a session has recorded for a method."""
        rows = self._query(
            "SELECT COUNT(*) AS made FROM submissions WHERE session_id = ? AND method_id = ?", (session_id, method_id)
        )
        return int(rows[0]["made"])

    def record_submission_within(
        self, session_id: int, method_id: str, description: str, code: str | None, limit: int, feedback: bool = False
    ) -> int | None:
        """``record_submission`` while the session has fewer than ``limit`` submissions for the method; returns its
        id, or None (nothing written) once it has ``limit``. Atomic, as ``record_refusal`` is."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT COUNT(*) AS made FROM submissions WHERE session_id = ? AND method_id = ?",
                (session_id, method_id),
            ).fetchone()
            if int(row["made"]) >= limit:
                return None
            cursor = conn.execute(
                "INSERT INTO submissions (session_id, method_id, description, code, feedback, at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (session_id, method_id, description, code, int(feedback), utc_now()),
            )
            return int(cursor.fetchone()["id"])

    def submission_receipt(self, session_id: int, method_id: str, submission_id: int) -> int:
        """A submission's number among its session's submissions of the method (1 for the first): what its receipt
        says, where the store's own id would show how many submissions every session has made."""
        rows = self._query(
            "SELECT COUNT(*) AS made FROM submissions WHERE session_id = ? AND method_id = ? AND id <= ?",
            (session_id, method_id, submission_id),
        )
        return int(rows[0]["made"])

    def submission_by_receipt(self, run: str, key: str, method_id: str, receipt: int) -> int | None:
        """The id of a session's submission of a method from its receipt number (``submission_receipt``), or None."""
        if receipt < 1:
            return None
        rows = self._query(
            "SELECT s.id FROM submissions s JOIN sessions ss ON ss.id = s.session_id JOIN runs r ON r.id = ss.run_id"
            " WHERE r.name = ? AND ss.key = ? AND s.method_id = ? ORDER BY s.id LIMIT 1 OFFSET ?",
            (run, key, method_id, receipt - 1),
        )
        return int(rows[0]["id"]) if rows else None

    def record_submission(
        self, session_id: int, method_id: str, description: str, code: str | None, feedback: bool = False
    ) -> int:
        """Store a submitted description (and optional code), and whether it gets feedback; returns its id."""
        with self._transaction(exclusive=False) as conn:  # an insert: nothing to race
            cursor = conn.execute(
                "INSERT INTO submissions (session_id, method_id, description, code, feedback, at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (session_id, method_id, description, code, int(feedback), utc_now()),
            )
            return int(cursor.fetchone()["id"])

    def record_score(
        self,
        submission_id: int,
        kind: str,
        status: ScoreStatus,
        value: float | None,
        model: str | None,
        detail: dict[str, Any],
    ) -> int:
        """Store one score of a submission (``judge``, ``codematch`` or ``direct``); returns its id."""
        with self._transaction(exclusive=False) as conn:  # an insert: nothing to race
            cursor = conn.execute(
                "INSERT INTO scores (submission_id, kind, status, value, model, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " RETURNING id",
                (submission_id, kind, status, value, model, json.dumps(detail, sort_keys=True, default=str), utc_now()),
            )
            return int(cursor.fetchone()["id"])

    # -- evaluation episodes ----------------------------------------------------------------

    def plan_episodes(self, run_id: int, method_ids: list[str]) -> None:
        """Make sure a run has one episode per method (existing ones keep their state)."""
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO episodes (run_id, method_id) VALUES (?, ?) ON CONFLICT (run_id, method_id) DO NOTHING",
                [(run_id, m) for m in method_ids],
            )

    def open_episodes(self, run_id: int) -> list[str]:
        """Methods whose episode has not finished, in plan order.

        An episode left ``running`` by a process that died is open again: its
        partial session stays in the store, but only a finished episode counts.
        """
        rows = self._query(
            "SELECT method_id FROM episodes WHERE run_id = ? AND state NOT IN ('done', 'failed') ORDER BY id", (run_id,)
        )
        return [row["method_id"] for row in rows]

    def reopen_failed(self, run_id: int) -> int:
        """Make a run's failed episodes open again; returns how many."""
        with self._transaction() as conn:
            return conn.execute(
                "UPDATE episodes SET state = 'pending' WHERE run_id = ? AND state = 'failed'", (run_id,)
            ).rowcount

    def start_episode(self, run_id: int, method_id: str) -> int:
        """Mark an episode as running (one more attempt); returns the attempt's number (1 for the first)."""
        with self._transaction() as conn:
            row = conn.execute(
                "UPDATE episodes SET state = 'running', attempts = attempts + 1, started_at = ?, error = NULL"
                " WHERE run_id = ? AND method_id = ? RETURNING attempts",
                (utc_now(), run_id, method_id),
            ).fetchone()
            if row is None:
                raise StoreError(f"run {run_id} has no episode planned for {method_id!r}; plan it first")
            return int(row["attempts"])

    def finish_episode(self, run_id: int, method_id: str, result: EpisodeResult) -> None:
        """Record how an episode ended, with its whole trajectory."""
        with self._transaction() as conn:
            _finish(conn, run_id, method_id, result)

    def import_episode(
        self, run_id: int, method_id: str, attempt: int, result: EpisodeResult, session: SessionRecord | None = None
    ) -> bool:
        """Record how one attempt of an episode ended, with the session it recorded elsewhere, exactly once.

        In one transaction: the session's rows (with new ids), the ending, and the episode's submission id
        mapped to the imported submission. Only the attempt the episode is running counts: a second delivery
        of the same attempt (a worker thought lost that answered after all), or a stale one (the episode was
        started again since), changes nothing.

        Args:
            run_id: The run.
            method_id: The episode's method.
            attempt: The attempt's number, as ``start_episode`` returned it.
            result: How it ended; its ``submission_id`` is the recording store's when ``session`` is given.
            session: The session's rows when another store recorded them; None when they are in this store.

        Returns:
            True when this call recorded the ending; False when it was already recorded or is stale.

        Raises:
            StoreError: this store already has a session under the imported session's key.
        """
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT state, attempts FROM episodes WHERE run_id = ? AND method_id = ?", (run_id, method_id)
            ).fetchone()
            if row is None or row["state"] != "running" or int(row["attempts"]) != attempt:
                return False
            if session is not None:
                submission_id = _import_session(conn, run_id, session, result.submission_id)
                result = replace(result, submission_id=submission_id)
            _finish(conn, run_id, method_id, result)
            return True

    def export_session(self, run: str, key: str) -> SessionRecord | None:
        """The rows of one session of a run (by the run's name), for ``import_episode`` elsewhere; None if absent."""
        rows = self._query(
            "SELECT s.* FROM sessions s JOIN runs r ON s.run_id = r.id WHERE r.name = ? AND s.key = ?", (run, key)
        )
        if not rows:
            return None
        session = dict(rows[0])
        calls = [
            {k: v for k, v in dict(row).items() if k not in ("id", "session_id")}
            for row in self._query("SELECT * FROM calls WHERE session_id = ? ORDER BY id", (session["id"],))
        ]
        submissions = [
            {k: v for k, v in dict(row).items() if k != "session_id"}
            for row in self._query("SELECT * FROM submissions WHERE session_id = ? ORDER BY id", (session["id"],))
        ]
        scores = [
            {k: v for k, v in dict(row).items() if k != "id"}
            for row in self._query(
                "SELECT c.* FROM scores c JOIN submissions u ON c.submission_id = u.id WHERE u.session_id = ?"
                " ORDER BY c.id",
                (session["id"],),
            )
        ]
        return SessionRecord(
            key=session["key"], transport=session["transport"], client=session["client"],
            started_at=session["started_at"], calls=calls, submissions=submissions, scores=scores,
        )  # fmt: skip

    def episodes(self, run_id: int, with_trajectories: bool = False) -> list[EpisodeRow]:
        """Every episode of a run in plan order, each with its latest scores by kind (``judge``, ``codematch``, ...)."""
        rows = self._query("SELECT * FROM episodes WHERE run_id = ? ORDER BY id", (run_id,))
        scores: dict[int, dict[str, ScoreRow]] = {}
        for score in self._query(
            "SELECT c.* FROM scores c JOIN episodes e ON c.submission_id = e.submission_id WHERE e.run_id = ?"
            " ORDER BY c.id",
            (run_id,),
        ):
            scores.setdefault(int(score["submission_id"]), {})[score["kind"]] = _score_row(score)  # latest wins
        return [
            EpisodeRow(
                id=int(row["id"]),
                run_id=int(row["run_id"]),
                method_id=row["method_id"],
                state=row["state"],
                attempts=int(row["attempts"]),
                session_key=row["session_key"],
                submission_id=_id(row["submission_id"]),
                concluded=None if row["concluded"] is None else bool(row["concluded"]),
                queries=row["queries"],
                input_tokens=int(row["input_tokens"]),
                output_tokens=int(row["output_tokens"]),
                cost_usd=float(row["cost_usd"]),
                error=row["error"],
                trajectory=json.loads(row["trajectory"]) if with_trajectories else None,
                examples=json.loads(row["examples"]) if row["examples"] else None,
                coverage=json.loads(row["coverage"]) if row["coverage"] else None,
                started_at=row["started_at"],
                finished_at=row["finished_at"],
                scores=scores.get(int(row["submission_id"]), {}) if row["submission_id"] is not None else {},
            )  # fmt: skip
            for row in rows
        ]

    def record_coverage(self, run_id: int, method_id: str, coverage: dict[str, Any]) -> None:
        """Store what an episode's calls covered of the hidden function (operator only; see ``pau_mcp.coverage``)."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE episodes SET coverage = ? WHERE run_id = ? AND method_id = ?",
                (json.dumps(coverage, sort_keys=True), run_id, method_id),
            )

    def run_config(self, run_id: int) -> dict[str, Any]:
        """The configuration a run was created with."""
        rows = self._query("SELECT config FROM runs WHERE id = ?", (run_id,))
        return json.loads(rows[0]["config"]) if rows else {}

    # -- reading ----------------------------------------------------------------------------

    def runs(self) -> list[RunRow]:
        """Every run with its counts of sessions, calls and submissions, newest first."""
        return [_run_row(row) for row in self._query(f"{_RUNS} ORDER BY r.id DESC")]

    def run(self, run_id: int) -> RunRow | None:
        """One run by id, with its counts; None if there is none."""
        rows = self._query(f"{_RUNS} WHERE r.id = ?", (run_id,))
        return _run_row(rows[0]) if rows else None

    def run_id(self, name: str) -> int:
        """The id of a run by name.

        Raises:
            StoreError: no such run (the message lists a few known ones).
        """
        rows = self._query("SELECT id FROM runs WHERE name = ?", (name,))
        if not rows:
            known = ", ".join(r.name for r in self.runs()[:10]) or "none yet"
            raise StoreError(f"no run named {name!r} in {self.location} (recent: {known}); see `pau-mcp runs list`")
        return int(rows[0]["id"])

    def find_run(self, name: str) -> int | None:
        """The id of a run by name, or None if there is none."""
        rows = self._query("SELECT id FROM runs WHERE name = ?", (name,))
        return int(rows[0]["id"]) if rows else None

    def episode_states(self, run_id: int) -> dict[str, str]:
        """The state of each planned episode of a run (``pending``, ``running``, ``done``, ``failed``), by method id."""
        rows = self._query("SELECT method_id, state FROM episodes WHERE run_id = ? ORDER BY id", (run_id,))
        return {row["method_id"]: row["state"] for row in rows}

    def calls(self, run_id: int) -> list[CallRow]:
        """Every call of a run, in order (all in memory: ``iter_calls`` reads them a page at a time)."""
        return list(self.iter_calls(run_id))

    def iter_calls(self, run_id: int, session_id: int | None = None) -> Iterator[CallRow]:
        """The calls of a run (or of one of its sessions), in order, read ``PAGE_ROWS`` at a time: the memory this
        takes does not grow with the run (a million calls used to take 2.1 GB)."""
        return map(_call_row, self.iter_call_rows(run_id, session_id))

    def iter_call_rows(self, run_id: int, session_id: int | None = None) -> Iterator[Any]:
        """``iter_calls`` as the database's own rows (read by column name; the outcome as its JSON text), for readers
        that show a run of a million calls and need none of a row's parsing."""
        if session_id is not None:  # the index of migration 7: the session's calls in order, from where it left off
            return self._pages(
                "SELECT c.*, s.key AS session_key FROM calls c JOIN sessions s ON c.session_id = s.id"
                " WHERE s.run_id = ? AND c.session_id = ? AND c.id > ? ORDER BY c.id LIMIT ?",
                (run_id, session_id),
            )
        # The calls in the order of their ids (the table's own), each checked against the run's sessions: the unary
        # plus keeps the session index out of the plan, which would sort all the run's calls for every page.
        return self._pages(
            "SELECT c.*, s.key AS session_key FROM calls c JOIN sessions s ON c.session_id = s.id"
            " WHERE +c.session_id IN (SELECT id FROM sessions WHERE run_id = ?) AND c.id > ? ORDER BY c.id LIMIT ?",
            (run_id,),
        )

    def call_sessions(self, run_id: int) -> list[tuple[int, str, int]]:
        """(id, key, number of calls) of each session of a run that called, in the order they first called."""
        rows = self._query(
            "SELECT s.id, s.key, COUNT(*) AS calls, MIN(c.id) AS first FROM calls c JOIN sessions s"
            " ON c.session_id = s.id WHERE s.run_id = ? GROUP BY s.id, s.key ORDER BY first",
            (run_id,),
        )
        return [(int(row["id"]), row["key"], int(row["calls"])) for row in rows]

    def _pages(self, sql: str, bound: tuple[Any, ...]) -> Iterator[Any]:
        """The rows of ``sql`` (which ends ``AND <id> > ? ORDER BY <id> LIMIT ?``), a page at a time, by key."""
        after = 0
        while True:
            rows = self._query(sql, (*bound, after, PAGE_ROWS))
            yield from rows
            if len(rows) < PAGE_ROWS:
                return
            after = int(rows[-1]["id"])

    def submissions(self, run_id: int, answers_only: bool = False) -> list[SubmissionRow]:
        """Every submission of a run, in order, with its session key.

        Args:
            run_id: The run.
            answers_only: Only the run's answers: for a run with episodes, each episode's own submission (an
                attempt a killed process left behind recorded its session, never its ending, and answers nothing);
                a run without episodes (a server's) answers with all of them.
        """
        return list(self.iter_submissions(run_id, answers_only))

    def iter_submissions(self, run_id: int, answers_only: bool = False) -> Iterator[SubmissionRow]:
        """``submissions``, read a page at a time."""
        answered: set[int] | None = None
        if answers_only:
            episodes = self._query("SELECT submission_id FROM episodes WHERE run_id = ?", (run_id,))
            if episodes:
                answered = {int(row["submission_id"]) for row in episodes if row["submission_id"] is not None}
        rows = self._pages(
            "SELECT u.*, s.key AS session_key FROM submissions u JOIN sessions s ON u.session_id = s.id"
            " WHERE s.run_id = ? AND u.id > ? ORDER BY u.id LIMIT ?",
            (run_id,),
        )
        for row in rows:
            if answered is None or int(row["id"]) in answered:
                yield SubmissionRow(
                    id=int(row["id"]), session_id=int(row["session_id"]), session_key=row["session_key"],
                    method_id=row["method_id"], description=row["description"], code=row["code"],
                    feedback=bool(row["feedback"]), at=row["at"],
                )  # fmt: skip

    def submission_count(self, run_id: int) -> int:
        """How many submissions a run has."""
        rows = self._query(
            "SELECT COUNT(*) AS n FROM submissions u JOIN sessions s ON u.session_id = s.id WHERE s.run_id = ?",
            (run_id,),
        )
        return int(rows[0]["n"])

    def scores(self, submission_id: int) -> list[ScoreRow]:
        """Every score of a submission, latest last."""
        rows = self._query("SELECT * FROM scores WHERE submission_id = ? ORDER BY id", (submission_id,))
        return [_score_row(row) for row in rows]

    def predictions(self, run_id: int) -> Iterator[dict[str, Any]]:
        """One record per submission in the reference benchmark's predictions layout.

        Fields: ``id`` (method id), ``predicted_description``, ``num_queries``
        (calls that counted in that session for that method) and
        ``all_examples`` (what the agent observed: for an evaluation episode the
        examples its code writer was given, the initial examples included;
        otherwise ``[input, output]`` pairs of its counted calls), plus
        ``code`` and ``session``.

        A run with episodes gives each episode's own submission only: an attempt that a killed process left
        behind (its session was recorded, its ending never was) is no prediction of the run.
        """
        for record, examples in self.iter_predictions(run_id):
            yield {
                "id": record["id"], "predicted_description": record["predicted_description"],
                "num_queries": record["num_queries"], "all_examples": list(examples), "code": record["code"],
                "session": record["session"],
            }  # fmt: skip

    def iter_predictions(self, run_id: int) -> Iterator[tuple[dict[str, Any], Iterator[list[str]]]]:
        """``predictions`` a submission at a time, each record's ``all_examples`` read a page at a time.

        Yields:
            The record without ``all_examples`` (its other fields in the layout's order), and its examples: read
            them before the next record.
        """
        episodes = self._query("SELECT submission_id, examples FROM episodes WHERE run_id = ?", (run_id,))
        given = {
            int(row["submission_id"]): json.loads(row["examples"])
            for row in episodes
            if row["submission_id"] is not None and row["examples"] is not None
        }
        for submission in self.iter_submissions(run_id, answers_only=True):
            bound = (submission.session_id, submission.method_id)
            counted = self._query(
                "SELECT COUNT(*) AS n FROM calls WHERE session_id = ? AND method_id = ? AND counted = 1", bound
            )
            seen = map(_call_row, self._pages(
                "SELECT c.*, '' AS session_key FROM calls c WHERE c.session_id = ? AND c.method_id = ?"
                " AND c.counted = 1 AND c.id > ? ORDER BY c.id LIMIT ?", bound,
            ))  # fmt: skip
            shown = given.get(submission.id)
            examples = iter(shown) if shown else ([c.arguments, shown_outcome(c)] for c in seen)
            record = {
                "id": submission.method_id,
                "predicted_description": submission.description,
                "num_queries": int(counted[0]["n"]),
                "code": submission.code,
                "session": submission.session_key,
            }
            yield record, examples

    # -- tasks (the MCP Tasks extension) ------------------------------------------------------

    def create_task(
        self, task_id: str, session_id: int, tool: str, ttl_ms: int, poll_ms: int, message: str | None = None
    ) -> TaskRow:
        """Record a new ``working`` task of a session, durably: ``task`` finds it from now on, in any process.

        The session's tasks whose time to live is over are discarded on the way, so a credential leaves behind at
        most the tasks it made within one time to live.
        """
        now = utc_now()
        with self._transaction() as conn:
            conn.execute("DELETE FROM tasks WHERE session_id = ? AND expires < ?", (session_id, time.time()))
            conn.execute(
                "INSERT INTO tasks (id, session_id, tool, status, status_message, created_at, updated_at, expires,"
                " ttl_ms, poll_ms) VALUES (?, ?, ?, 'working', ?, ?, ?, ?, ?, ?)",
                (task_id, session_id, tool, message, now, now, time.time() + ttl_ms / 1000, ttl_ms, poll_ms),
            )
            return _task_row(conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone())

    def task(self, task_id: str) -> TaskRow | None:
        """The task ``task_id``, if the store has it."""
        rows = self._query("SELECT * FROM tasks WHERE id = ?", (task_id,))
        return _task_row(rows[0]) if rows else None

    def finish_task(
        self, task_id: str, status: TerminalTaskStatus, message: str | None = None,
        result: dict[str, Any] | None = None, error: dict[str, Any] | None = None,
    ) -> TaskRow | None:  # fmt: skip
        """Move a task to a terminal ``status`` with its result or error; a task already terminal stays as it is.

        Returns the task as it stands after (None if the store has no such task).
        """
        with self._transaction() as conn:
            conn.execute(
                "UPDATE tasks SET status = ?, status_message = ?, result = ?, error = ?, input_requests = '{}',"
                " updated_at = ? WHERE id = ? AND status NOT IN ('completed', 'failed', 'cancelled')",
                (
                    status, message, json.dumps(result) if result is not None else None,
                    json.dumps(error) if error is not None else None, utc_now(), task_id,
                ),
            )  # fmt: skip
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            return _task_row(row) if row is not None else None

    def ask_task(self, task_id: str, questions: dict[str, Any], message: str | None = None) -> TaskRow | None:
        """Put ``questions`` (by key) to a task's client: it is ``input_required`` until every one is answered."""
        with self._transaction() as conn:
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None or row["status"] in TERMINAL_STATUSES:
                return _task_row(row) if row is not None else None
            outstanding = {**json.loads(row["input_requests"]), **questions}
            conn.execute(
                "UPDATE tasks SET status = 'input_required', status_message = ?, input_requests = ?, updated_at = ?"
                " WHERE id = ?",
                (message, json.dumps(outstanding), utc_now(), task_id),
            )
            return _task_row(conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone())

    def answer_task(self, task_id: str, responses: dict[str, Any]) -> TaskRow | None:
        """Deliver answers to a task's outstanding questions; answers to keys not outstanding are ignored. Once none
        is outstanding it is ``working`` again. Returns the task as it stands after (None if there is none)."""
        with self._transaction() as conn:
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None:
                return None
            outstanding = json.loads(row["input_requests"])
            taken = {key: value for key, value in responses.items() if key in outstanding}
            if taken and row["status"] not in TERMINAL_STATUSES:
                left = {key: value for key, value in outstanding.items() if key not in taken}
                conn.execute(
                    "UPDATE tasks SET status = ?, input_requests = ?, input_responses = ?, updated_at = ? WHERE id = ?",
                    (
                        "input_required" if left else "working", json.dumps(left),
                        json.dumps({**json.loads(row["input_responses"]), **taken}), utc_now(), task_id,
                    ),
                )  # fmt: skip
                row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            return _task_row(row)

    def take_task_answers(self, task_id: str, keys: list[str]) -> dict[str, Any] | None:
        """The answers to ``keys``, taken out of the task, once all of them have arrived; None until then."""
        with self._transaction() as conn:
            row = conn.execute("SELECT input_responses FROM tasks WHERE id = ?", (task_id,)).fetchone()
            delivered = json.loads(row["input_responses"]) if row is not None else {}
            if not all(key in delivered for key in keys):
                return None
            left = {key: value for key, value in delivered.items() if key not in keys}
            conn.execute("UPDATE tasks SET input_responses = ? WHERE id = ?", (json.dumps(left), task_id))
            return {key: delivered[key] for key in keys}

    def cancel_task(self, task_id: str) -> TaskRow | None:
        """Record that a task's client asked to cancel it (a terminal task is left as it is)."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE tasks SET cancel_requested = 1, updated_at = ? WHERE id = ?"
                " AND status NOT IN ('completed', 'failed', 'cancelled')",
                (utc_now(), task_id),
            )
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            return _task_row(row) if row is not None else None


def _task_row(row: Any) -> TaskRow:
    return TaskRow(
        id=row["id"], session_id=int(row["session_id"]), tool=row["tool"], status=row["status"],
        status_message=row["status_message"], created_at=row["created_at"], updated_at=row["updated_at"],
        expires=float(row["expires"]), ttl_ms=int(row["ttl_ms"]), poll_ms=int(row["poll_ms"]),
        result=json.loads(row["result"]) if row["result"] is not None else None,
        error=json.loads(row["error"]) if row["error"] is not None else None,
        input_requests=json.loads(row["input_requests"]), input_responses=json.loads(row["input_responses"]),
        cancel_requested=int(row["cancel_requested"]) == 1,
    )  # fmt: skip


def _finish(conn: Connection, run_id: int, method_id: str, result: EpisodeResult) -> None:
    conn.execute(
        "UPDATE episodes SET state = ?, session_key = ?, submission_id = ?, concluded = ?, queries = ?,"
        " input_tokens = ?, output_tokens = ?, cost_usd = ?, error = ?, trajectory = ?, examples = ?,"
        " finished_at = ? WHERE run_id = ? AND method_id = ?",
        (
            result.state, result.session_key, result.submission_id,
            None if result.concluded is None else int(result.concluded), result.queries,
            result.input_tokens, result.output_tokens, result.cost_usd, result.error,
            json.dumps(result.trajectory or [], default=str),
            None if result.examples is None else json.dumps(result.examples), utc_now(), run_id, method_id,
        ),
    )  # fmt: skip


def _insert(conn: Connection, table: str, row: dict[str, Any]) -> int:
    known = conn.columns(table)
    unknown = sorted(set(row) - known)
    if unknown:
        raise StoreError(
            f"the imported {table} rows have columns this run store lacks ({', '.join(unknown)}); "
            "run the same pau-mcp version on the driver and every worker"
        )
    columns = ", ".join(row)
    marks = ", ".join("?" * len(row))
    cursor = conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks}) RETURNING id", tuple(row.values()))
    return int(cursor.fetchone()["id"])


def _import_session(conn: Connection, run_id: int, session: SessionRecord, submission_id: int | None) -> int | None:
    """Insert a session's rows under ``run_id``; returns the new id of the recording store's ``submission_id``."""
    if conn.execute("SELECT 1 FROM sessions WHERE run_id = ? AND key = ?", (run_id, session.key)).fetchone():
        raise StoreError(
            f"the run already has a session {session.key!r}, so the imported one would merge into it; "
            "start the episode again (a new attempt has a new key)"
        )
    session_id = _insert(
        conn, "sessions",
        {"run_id": run_id, "key": session.key, "transport": session.transport, "client": session.client,
         "started_at": session.started_at},
    )  # fmt: skip
    for call in session.calls:
        _insert(conn, "calls", {**call, "session_id": session_id})
    new_ids: dict[int, int] = {}
    for submission in session.submissions:
        row = {k: v for k, v in submission.items() if k != "id"}
        new_ids[int(submission["id"])] = _insert(conn, "submissions", {**row, "session_id": session_id})
    for score in session.scores:
        _insert(conn, "scores", {**score, "submission_id": new_ids[int(score["submission_id"])]})
    return new_ids.get(submission_id) if submission_id is not None else None


def _text(value: str | None) -> str | None:
    """Text SQLite can store: a lone surrogate (from a function's output) becomes its escape."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def shown_outcome(call: CallRow) -> str:
    """A recorded call's outcome as agents read it: the value's repr, ``raises Type: message``, or the status."""
    if call.status in (
        ToolStatus.OK,
        RecordStatus.COUNTEREXAMPLE,
    ):  # a counterexample's value is the method's own output
        return str(call.value)
    if call.status == "error":
        return f"raises {call.error_type}: {call.error_message}"
    return f"{call.status}: {call.error_message}"


#: A run with its counts (``runs``, ``run``).
_RUNS = """
    SELECT r.id, r.name, r.kind, r.created_at, r.config,
           (SELECT COUNT(*) FROM sessions s WHERE s.run_id = r.id) AS sessions,
           (SELECT COUNT(*) FROM calls c JOIN sessions s ON c.session_id = s.id WHERE s.run_id = r.id) AS calls,
           (SELECT COUNT(*) FROM submissions u JOIN sessions s ON u.session_id = s.id WHERE s.run_id = r.id) AS submissions
    FROM runs r"""


def _call_row(row: Any) -> CallRow:
    return CallRow(
        id=int(row["id"]), session_id=int(row["session_id"]), session_key=row["session_key"],
        method_id=row["method_id"], tool=row["tool"], arguments=row["arguments"], counted=bool(row["counted"]),
        status=row["status"], value=row["value"], error_type=row["error_type"], error_message=row["error_message"],
        outcome=json.loads(row["outcome"]) if row["outcome"] else None, duration_ms=row["duration_ms"], at=row["at"],
    )  # fmt: skip


def _id(value: Any) -> int | None:
    return None if value is None else int(value)


def _run_row(row: Any) -> RunRow:
    return RunRow(
        id=int(row["id"]), name=row["name"], kind=row["kind"], created_at=row["created_at"],
        config=json.loads(row["config"]) if row["config"] else {}, sessions=int(row["sessions"]),
        calls=int(row["calls"]), submissions=int(row["submissions"]),
    )  # fmt: skip


def _score_row(row: Any) -> ScoreRow:
    return ScoreRow(
        id=int(row["id"]), submission_id=int(row["submission_id"]), kind=row["kind"], status=row["status"],
        value=row["value"], model=row["model"], detail=json.loads(row["detail"]), at=row["at"],
    )  # fmt: skip
