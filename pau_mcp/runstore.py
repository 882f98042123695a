"""The run store: one SQLite file holding every run, session, call, submission, score and episode.

Every write is committed before the caller answers anyone, so a crash loses
nothing an agent saw. The file uses WAL, so a report can read while a server
writes. The schema evolves by numbered migrations (``MIGRATIONS``), applied
in order and recorded in ``PRAGMA user_version``; never edit a released
migration, add the next one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MIGRATIONS", "CallRecord", "EpisodeResult", "RunStore", "StoreError", "utc_now"]

MIGRATIONS: list[str] = [
    # 1: runs, sessions, calls, submissions, scores
    """
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
    # 2: evaluation episodes, one per method per run, resumable
    """
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
    # 3: whether a submission was answered with feedback (--feedback score), so its limit survives a restart
    """
    ALTER TABLE submissions ADD COLUMN feedback INTEGER NOT NULL DEFAULT 0
    """,
]


class StoreError(RuntimeError):
    """The run store cannot be opened or written, or is from a newer version; the message says what to do.

    Attributes:
        reason: What SQLite or the file system said (``disk I/O error``, ...), for a one-line note elsewhere.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


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
    status: str
    value: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    outcome: dict[str, Any] | None = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class EpisodeResult:
    """How an evaluation episode ended, as the harness records it."""

    state: str  # done | failed
    session_key: str | None = None
    submission_id: int | None = None
    concluded: bool | None = None
    queries: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    trajectory: list[dict[str, Any]] | None = None


class RunStore:
    """The SQLite run store. Thread-safe; one connection per store object.

    Args:
        path: The database file (created with its directory if missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(_unusable(self.path, exc)) from None
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # WAL with NORMAL survives a process crash (every commit is in the log); only power loss can drop the tail.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            self._conn.close()
            raise StoreError(_unusable(self.path, exc)) from None

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    @property
    def version(self) -> int:
        """The schema version (number of migrations applied)."""
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                current = self.version
                if current > len(MIGRATIONS):
                    raise StoreError(
                        f"{self.path} has schema version {current}, newer than this pau-mcp ({len(MIGRATIONS)}); upgrade pau-mcp"
                    )
                for number, script in enumerate(MIGRATIONS[current:], start=current + 1):
                    for statement in filter(str.strip, script.split(";")):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {number}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, committed on exit (rolled back on error, including a commit that fails)."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                if _unwritable(exc):
                    raise StoreError(_unusable(self.path, exc), reason=str(exc)) from exc
                raise
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                # A failed COMMIT (a full disk) leaves the transaction open; without this every later write
                # would fail with "cannot start a transaction within a transaction".
                if self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                if _unwritable(exc):
                    raise StoreError(_unusable(self.path, exc), reason=str(exc)) from exc
                raise

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Read rows."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    # -- runs and sessions ------------------------------------------------------------------

    def ensure_run(self, name: str, kind: str, config: dict[str, Any] | None = None) -> int:
        """The id of the run called ``name``, created if new."""
        with self.transaction() as conn:
            row = conn.execute("SELECT id FROM runs WHERE name = ?", (name,)).fetchone()
            if row is not None:
                return int(row["id"])
            cursor = conn.execute(
                "INSERT INTO runs (name, kind, created_at, config) VALUES (?, ?, ?, ?)",
                (name, kind, utc_now(), json.dumps(config or {}, sort_keys=True)),
            )
            return int(cursor.lastrowid)

    def ensure_session(self, run_id: int, key: str, transport: str, client: str | None = None) -> int:
        """The id of the session ``key`` in a run, created if new."""
        with self.transaction() as conn:
            row = conn.execute("SELECT id FROM sessions WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
            if row is not None:
                return int(row["id"])
            cursor = conn.execute(
                "INSERT INTO sessions (run_id, key, transport, client, started_at) VALUES (?, ?, ?, ?, ?)",
                (run_id, key, transport, client, utc_now()),
            )
            return int(cursor.lastrowid)

    # -- calls and submissions --------------------------------------------------------------

    def record_call(self, session_id: int, call: CallRecord) -> int:
        """Store one tool call; returns its id.

        Raises:
            StoreError: the store cannot take it (a full or read-only disk); nothing was written.
        """
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO calls (session_id, method_id, tool, arguments, counted, status, value, error_type,"
                " error_message, outcome, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, call.method_id, call.tool, _text(call.arguments), int(call.counted), call.status,
                    _text(call.value), _text(call.error_type), _text(call.error_message),
                    json.dumps(call.outcome) if call.outcome is not None else None, call.duration_ms, utc_now(),
                ),
            )  # fmt: skip
            return int(cursor.lastrowid)

    def counted_calls(self, session_id: int, method_id: str) -> int:
        """How many calls of a method counted against a session's budget."""
        rows = self.query(
            "SELECT COUNT(*) FROM calls WHERE session_id = ? AND method_id = ? AND counted = 1", (session_id, method_id)
        )
        return int(rows[0][0])

    def record_submission(
        self, session_id: int, method_id: str, description: str, code: str | None, feedback: bool = False
    ) -> int:
        """Store a submitted description (and optional code), and whether it gets feedback; returns its id."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO submissions (session_id, method_id, description, code, feedback, at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, method_id, description, code, int(feedback), utc_now()),
            )
            return int(cursor.lastrowid)

    def session_ids(self, run_id: int, transport: str) -> list[int]:
        """The sessions of a run recorded with this transport."""
        rows = self.query("SELECT id FROM sessions WHERE run_id = ? AND transport = ?", (run_id, transport))
        return [int(row["id"]) for row in rows]

    def spent(self, session_ids: list[int]) -> tuple[dict[str, int], dict[str, int]]:
        """What these sessions spent, per method id: counted calls, and submissions answered with feedback."""
        if not session_ids:
            return {}, {}
        marks = ", ".join("?" * len(session_ids))
        calls = self.query(
            f"SELECT method_id, COUNT(*) AS n FROM calls WHERE session_id IN ({marks}) AND counted = 1"
            " GROUP BY method_id",
            tuple(session_ids),
        )
        feedback = self.query(
            f"SELECT method_id, COUNT(*) AS n FROM submissions WHERE session_id IN ({marks}) AND feedback = 1"
            " GROUP BY method_id",
            tuple(session_ids),
        )
        return {r["method_id"]: int(r["n"]) for r in calls}, {r["method_id"]: int(r["n"]) for r in feedback}

    def record_score(
        self, submission_id: int, kind: str, status: str, value: float | None, model: str | None, detail: dict[str, Any]
    ) -> int:
        """Store one score of a submission (``judge``, ``codematch`` or ``direct``); returns its id."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO scores (submission_id, kind, status, value, model, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (submission_id, kind, status, value, model, json.dumps(detail, sort_keys=True, default=str), utc_now()),
            )
            return int(cursor.lastrowid)

    # -- evaluation episodes ----------------------------------------------------------------

    def plan_episodes(self, run_id: int, method_ids: list[str]) -> None:
        """Make sure a run has one episode per method (existing ones keep their state)."""
        with self.transaction() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO episodes (run_id, method_id) VALUES (?, ?)", [(run_id, m) for m in method_ids]
            )

    def open_episodes(self, run_id: int) -> list[str]:
        """Methods whose episode has not finished, in plan order.

        An episode left ``running`` by a process that died is open again: its
        partial session stays in the store, but only a finished episode counts.
        """
        rows = self.query(
            "SELECT method_id FROM episodes WHERE run_id = ? AND state NOT IN ('done', 'failed') ORDER BY id", (run_id,)
        )
        return [row["method_id"] for row in rows]

    def reopen_failed(self, run_id: int) -> int:
        """Make a run's failed episodes open again; returns how many."""
        with self.transaction() as conn:
            return conn.execute(
                "UPDATE episodes SET state = 'pending' WHERE run_id = ? AND state = 'failed'", (run_id,)
            ).rowcount

    def start_episode(self, run_id: int, method_id: str) -> None:
        """Mark an episode as running (one more attempt)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE episodes SET state = 'running', attempts = attempts + 1, started_at = ?, error = NULL"
                " WHERE run_id = ? AND method_id = ?",
                (utc_now(), run_id, method_id),
            )

    def finish_episode(self, run_id: int, method_id: str, result: EpisodeResult) -> None:
        """Record how an episode ended, with its whole trajectory."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE episodes SET state = ?, session_key = ?, submission_id = ?, concluded = ?, queries = ?,"
                " input_tokens = ?, output_tokens = ?, cost_usd = ?, error = ?, trajectory = ?, finished_at = ?"
                " WHERE run_id = ? AND method_id = ?",
                (
                    result.state, result.session_key, result.submission_id,
                    None if result.concluded is None else int(result.concluded), result.queries,
                    result.input_tokens, result.output_tokens, result.cost_usd, result.error,
                    json.dumps(result.trajectory or [], default=str), utc_now(), run_id, method_id,
                ),
            )  # fmt: skip

    def episodes(self, run_id: int, with_trajectories: bool = False) -> list[dict[str, Any]]:
        """Every episode of a run in plan order, each with its latest scores by kind (``judge``, ``codematch``, ...)."""
        rows = [dict(row) for row in self.query("SELECT * FROM episodes WHERE run_id = ? ORDER BY id", (run_id,))]
        for row in rows:
            row["trajectory"] = json.loads(row["trajectory"]) if with_trajectories else None
            row["scores"] = {}
            if row["submission_id"] is not None:
                for score in self.scores(row["submission_id"]):
                    row["scores"][score["kind"]] = score
        return rows

    def run_config(self, run_id: int) -> dict[str, Any]:
        """The configuration a run was created with."""
        rows = self.query("SELECT config FROM runs WHERE id = ?", (run_id,))
        return json.loads(rows[0]["config"]) if rows else {}

    # -- reading ----------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        """Every run with its counts of sessions, calls and submissions, newest first."""
        rows = self.query(
            """
            SELECT r.id, r.name, r.kind, r.created_at,
                   (SELECT COUNT(*) FROM sessions s WHERE s.run_id = r.id) AS sessions,
                   (SELECT COUNT(*) FROM calls c JOIN sessions s ON c.session_id = s.id WHERE s.run_id = r.id) AS calls,
                   (SELECT COUNT(*) FROM submissions u JOIN sessions s ON u.session_id = s.id WHERE s.run_id = r.id) AS submissions
            FROM runs r ORDER BY r.id DESC
            """
        )
        return [dict(row) for row in rows]

    def run_id(self, name: str) -> int:
        """The id of a run by name.

        Raises:
            StoreError: no such run (the message lists a few known ones).
        """
        rows = self.query("SELECT id FROM runs WHERE name = ?", (name,))
        if not rows:
            known = ", ".join(r["name"] for r in self.runs()[:10]) or "none yet"
            raise StoreError(f"no run named {name!r} in {self.path} (recent: {known}); see `pau-mcp runs list`")
        return int(rows[0]["id"])

    def calls(self, run_id: int) -> list[dict[str, Any]]:
        """Every call of a run, in order."""
        rows = self.query(
            "SELECT c.*, s.key AS session_key FROM calls c JOIN sessions s ON c.session_id = s.id WHERE s.run_id = ? ORDER BY c.id",
            (run_id,),
        )
        return [dict(row) for row in rows]

    def submissions(self, run_id: int) -> list[dict[str, Any]]:
        """Every submission of a run, in order, with its session key."""
        rows = self.query(
            "SELECT u.*, s.key AS session_key FROM submissions u JOIN sessions s ON u.session_id = s.id"
            " WHERE s.run_id = ? ORDER BY u.id",
            (run_id,),
        )
        return [dict(row) for row in rows]

    def scores(self, submission_id: int) -> list[dict[str, Any]]:
        """Every score of a submission, latest last."""
        rows = self.query("SELECT * FROM scores WHERE submission_id = ? ORDER BY id", (submission_id,))
        return [dict(row) | {"detail": json.loads(row["detail"])} for row in rows]

    def predictions(self, run_id: int) -> Iterator[dict[str, Any]]:
        """One record per submission in the reference benchmark's predictions layout.

        Fields: ``id`` (method id), ``predicted_description``, ``num_queries``
        (calls that counted in that session for that method) and
        ``all_examples`` (``[input, output]`` pairs the agent observed), plus
        ``code`` and ``session``.
        """
        calls = self.calls(run_id)
        for submission in self.submissions(run_id):
            seen = [
                c for c in calls
                if c["session_id"] == submission["session_id"] and c["method_id"] == submission["method_id"] and c["counted"]
            ]  # fmt: skip
            yield {
                "id": submission["method_id"],
                "predicted_description": submission["description"],
                "num_queries": len(seen),
                "all_examples": [[c["arguments"], _shown(c)] for c in seen],
                "code": submission["code"],
                "session": submission["session_key"],
            }


def _unwritable(exc: BaseException) -> bool:
    """True for errors of the disk or the file (full, read-only, I/O, locked), not of the caller's SQL."""
    return isinstance(exc, OSError | sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def _unusable(path: Path, exc: BaseException) -> str:
    return (
        f"cannot use the run store {path}: {exc}; make it writable (and its disk not full), or point --db / "
        "PAU_MCP_DB (or --data-dir / PAU_MCP_DATA_DIR) at a writable place"
    )


def _text(value: str | None) -> str | None:
    """Text SQLite can store: a lone surrogate (from a function's output) becomes its escape."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _shown(call: dict[str, Any]) -> str:
    if call["status"] in ("ok", "counterexample"):  # a counterexample's value is the method's own output
        return str(call["value"])
    if call["status"] == "error":
        return f"raises {call['error_type']}: {call['error_message']}"
    return f"{call['status']}: {call['error_message']}"
