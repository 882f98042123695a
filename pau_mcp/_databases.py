"""The run store's two databases behind one small interface: SQLite (a file) and PostgreSQL (a URL).

``pau_mcp.runstore`` writes its SQL once, in the dialect both understand (its docstring lists the rules), and
hands it to a ``Database``: ``transaction()`` for writes, ``read()`` for reads. This module is all that differs:

* SQLite: one connection behind a lock, WAL, ``BEGIN IMMEDIATE`` for writes, the schema version in
  ``PRAGMA user_version``.
* PostgreSQL (psycopg 3): a small pool of connections shared by the store's threads; ``?`` placeholders become
  ``%s``; every write transaction takes one advisory lock first, so writes are serialised as SQLite's are and
  a check-then-insert stays correct when several server processes (replicas) share the database; the schema
  version lives in a table of its own.

Errors of the database itself (unreachable, full, read-only, locked too long) become ``StoreError`` with one
line that says what to do; errors in the caller's SQL stay what the driver raised. A store that another writer holds
longer than the busy timeout raises ``StoreBusy``, a ``StoreError`` that passes: the same request later succeeds.

``immediately()`` runs a store operation without waiting for anything (for an event loop, which must never wait on
a lock): SQLite within it takes its in-process lock without blocking and has a busy timeout of 0, so a store held
by another thread or process raises ``StoreBusy`` at once, before anything was written; PostgreSQL, where every
statement is a network round trip, always raises it (do the operation in a thread).
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "POOL_SIZE",
    "POSTGRES_SCHEMES",
    "Connection",
    "Cursor",
    "Database",
    "PostgresDatabase",
    "Row",
    "SqliteDatabase",
    "StoreBusy",
    "StoreError",
    "is_postgres_url",
    "open_database",
    "shown",
]

#: URL schemes that name a PostgreSQL database (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

#: The advisory lock every PostgreSQL write transaction takes first ("pau-mcp" in ASCII); migrations take it too.
_WRITE_LOCK = 0x7061752D6D6370
#: Connections one store object keeps to PostgreSQL; a thread that finds them all busy waits for one.
POOL_SIZE = 8
#: How long a write waits for the lock (and a thread for a pooled connection) before the store says it is busy,
#: like SQLite's busy timeout.
_BUSY_S = 30.0


class StoreError(RuntimeError):
    """The run store cannot be opened or written, or is from a newer version; the message says what to do.

    Attributes:
        reason: What the database or the file system said (``disk I/O error``, ...), short enough for a one-line
            note elsewhere (an agent's call result): never the store's location.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class StoreBusy(StoreError):
    """Another writer holds the run store: nothing was written, and the same request may succeed a moment later.

    Raised at once inside ``Database.immediately()``, and after the busy timeout otherwise.
    """


def is_postgres_url(where: object) -> bool:
    """True when ``where`` names a PostgreSQL database (``postgresql://...``) rather than a SQLite file."""
    return isinstance(where, str) and where.startswith(POSTGRES_SCHEMES)


def shown(where: Path | str) -> str:
    """The store's location as messages show it: a URL's password (in the address or its query) hidden."""
    if not is_postgres_url(where):
        return str(where)
    parts = urlsplit(str(where))
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user, colon, _ = credentials.partition(":")
        netloc = f"{user}:***@{host}" if colon else netloc
    pairs = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    query = urlencode(pairs, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Row(Sequence[Any]):
    """A row read by column name or by position, as ``sqlite3.Row`` is, so the store reads both databases alike."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: Any) -> Any:
        return self._values[self._index[key]] if isinstance(key, str) else self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        """The column names, in order (``dict(row)`` uses them)."""
        return list(self._index)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values, strict=False))!r})"


class Cursor(Protocol):
    """What a statement gives back (``sqlite3.Cursor`` and psycopg's cursor both are one)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The connection a write transaction hands to the store's methods."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement written with ``?`` placeholders."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters."""
        ...

    def columns(self, table: str) -> set[str]:
        """The column names of a table of the store."""
        ...

    def schema_version(self) -> int:
        """How many migrations the store has had."""
        ...

    def set_schema_version(self, version: int) -> None:
        """Record that the store has had ``version`` migrations."""
        ...


class Database(Protocol):
    """One run store's database: where it is, write transactions, reads."""

    dialect: Literal["sqlite", "postgres"]
    #: Where it is, as messages show it (no password).
    location: str

    def transaction(self, exclusive: bool = True) -> AbstractContextManager[Connection]:
        """A write transaction, committed on exit, rolled back on error.

        Args:
            exclusive: Serialised with every other exclusive write to the store, from any process (SQLite's writes
                always are). Only a transaction whose statements are correct whatever runs beside them (plain
                inserts) may pass False: in PostgreSQL it then commits beside others instead of after them.
        """
        ...

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one query written with ``?`` placeholders."""
        ...

    def version(self) -> int:
        """How many migrations the store has had."""
        ...

    def immediately(self) -> AbstractContextManager[None]:
        """Within it, this thread's transactions and reads never wait: a store busy with another writer (or, in
        PostgreSQL, any store) raises ``StoreBusy`` before anything is written."""
        ...

    def close(self) -> None:
        """Close its connections."""
        ...


def open_database(where: Path | str) -> Database:
    """The database at a SQLite file path or a ``postgresql://`` URL.

    Raises:
        StoreError: it cannot be opened; the message says what to do.
    """
    if is_postgres_url(where):
        return PostgresDatabase(str(where))
    return SqliteDatabase(Path(where))


# -- SQLite --------------------------------------------------------------------------------------


class _SqliteConnection:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def columns(self, table: str) -> set[str]:
        return {row["name"] for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        self._conn.execute(f"PRAGMA user_version = {int(version)}")


class SqliteDatabase:
    """A SQLite file, embedded: one connection behind a lock, in WAL mode so readers never wait for the writer.

    Args:
        path: The file (created with its directory if missing).

    Raises:
        StoreError: the file cannot be opened or written.
    """

    dialect: Literal["sqlite", "postgres"] = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        self._lock = threading.RLock()
        self._immediate = False  # set, under the lock, by the thread in ``immediately()``
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(_unusable(self.location, exc)) from None
        self._conn.row_factory = sqlite3.Row
        self._wrapped = _SqliteConnection(self._conn)
        try:
            self._set_up()
        except (OSError, sqlite3.Error) as exc:
            self._conn.close()
            raise StoreError(_unusable(self.location, exc)) from None

    def _set_up(self) -> None:
        # Switching a new file to WAL takes an exclusive lock without asking the busy handler: processes opening one
        # new store at once (replicas, serve --processes) got "database is locked" at once, 1 open in 8. They wait
        # for each other here as every other write does (``_BUSY_S``).
        deadline = time.monotonic() + _BUSY_S
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.Error as exc:
                if not _sqlite_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        # WAL with NORMAL survives a process crash (every commit is in the log); only power loss can drop the tail.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def version(self) -> int:
        with self._lock:
            return self._wrapped.schema_version()

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if _sqlite_busy(exc):
                    raise self._busy(exc) from exc
                raise

    @contextmanager
    def immediately(self) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise StoreBusy("another thread of this process is using the run store", reason="database is busy")
        try:
            if self._immediate:  # already inside (reentrant): nothing to set
                yield
                return
            self._conn.execute("PRAGMA busy_timeout = 0")
            self._immediate = True
            try:
                yield
            finally:
                self._immediate = False
                self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_S * 1000)}")
        finally:
            self._lock.release()

    def _busy(self, exc: BaseException) -> StoreBusy:
        if self._immediate:
            return StoreBusy(f"the run store {self.location} is busy: {exc}", reason="database is busy")
        return StoreBusy(
            f"the run store {self.location} stayed locked by another writer for {_BUSY_S:.0f} s: {exc}",
            reason="database is locked",
        )

    @contextmanager
    def transaction(self, exclusive: bool = True) -> Iterator[Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                if _sqlite_busy(exc):
                    raise self._busy(exc) from exc
                if _sqlite_unwritable(exc):
                    raise StoreError(_unusable(self.location, exc), reason=str(exc)) from exc
                raise
            try:
                yield self._wrapped
                self._conn.execute("COMMIT")
            except BaseException as exc:
                # A failed COMMIT (a full disk) leaves the transaction open; without this every later write
                # would fail with "cannot start a transaction within a transaction".
                if self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and _sqlite_busy(exc):
                    raise self._busy(exc) from exc
                if _sqlite_unwritable(exc):
                    raise StoreError(_unusable(self.location, exc), reason=str(exc)) from exc
                raise


def _sqlite_busy(exc: sqlite3.Error) -> bool:
    """True for SQLITE_BUSY and SQLITE_LOCKED (and their extended codes): another writer holds the file."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _sqlite_unwritable(exc: BaseException) -> bool:
    """True for errors of the disk or the file (full, read-only, I/O, locked), not of the caller's SQL."""
    return isinstance(exc, OSError | sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def _unusable(location: str, exc: BaseException) -> str:
    return (
        f"cannot use the run store {location}: {exc}; make it writable (and its disk not full), or point --db / "
        "PAU_MCP_DB (or --data-dir / PAU_MCP_DATA_DIR) at a writable place"
    )


# -- PostgreSQL ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2048)
def _postgres_sql(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` and every ``%`` doubled; a ``?`` inside a quoted literal or name stays.

    Linear in the statement; statements are the store's own, so the cache holds its few shapes.
    """
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


def _bind(params: Sequence[Any]) -> tuple[Any, ...]:
    """Parameters as PostgreSQL takes what SQLite takes: booleans as 0/1 (flags are INTEGER columns), and text
    with NUL (which PostgreSQL text cannot hold) or a lone surrogate as its escape (``\\x00``, ``\\udcff``)."""
    return tuple(_value(p) for p in params)


def _value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if type(value) is str and ("\x00" in value or not value.isascii()):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value.replace("\x00", "\\x00")
    return value


def _row_maker(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    """psycopg's row factory for ``Row``: the names of a result's columns, looked up once per result."""
    index: dict[str, int] = {}
    for position, column in enumerate(cursor.description or ()):
        index.setdefault(column.name, position)  # as sqlite3.Row: a repeated name reads the first column

    def make(values: Sequence[Any]) -> Row:
        return Row(values, index)

    return make


_HAS_VERSION_TABLE = (
    "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()"
    " AND table_name = 'pau_mcp_schema') AS present"
)


class _PostgresConnection:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._conn.execute(_postgres_sql(sql), _bind(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_postgres_sql(sql), [_bind(row) for row in rows])

    def columns(self, table: str) -> set[str]:
        rows = self.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ?",
            (table,),
        ).fetchall()
        return {row["column_name"] for row in rows}

    def schema_version(self) -> int:
        # A catalog query, not to_regclass(): that reads a cache a transaction refreshes only when it takes a lock
        # on a table, so under the write lock it could miss the table another store has just created.
        if self.execute(_HAS_VERSION_TABLE).fetchone()["present"]:
            row = self.execute("SELECT version FROM pau_mcp_schema").fetchone()
            return int(row["version"]) if row is not None else 0
        return 0

    def set_schema_version(self, version: int) -> None:
        self.execute("CREATE TABLE IF NOT EXISTS pau_mcp_schema (version INTEGER NOT NULL)")
        if not self.execute("UPDATE pau_mcp_schema SET version = ?", (version,)).rowcount:
            self.execute("INSERT INTO pau_mcp_schema (version) VALUES (?)", (version,))


class _Pool:
    """Up to ``size`` open connections; a connection is one thread's at a time, and a broken one is dropped."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], size: int) -> None:
        self._connect = connect
        self._size = size
        self._idle: list[psycopg.Connection[Any]] = []
        self._open = 0
        self._closed = False
        self._ready = threading.Condition()

    def get(self) -> tuple[psycopg.Connection[Any], bool]:
        """A connection, and whether it was used before (so it may have died since, with the server)."""
        deadline = time.monotonic() + _BUSY_S
        with self._ready:
            while True:
                if self._closed:
                    raise RuntimeError("the run store was closed")
                if self._idle:
                    return self._idle.pop(), True
                if self._open < self._size:
                    self._open += 1
                    break
                if not self._ready.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise StoreBusy(
                        f"all {self._size} connections of this process to the run store stayed busy for "
                        f"{_BUSY_S:.0f} s; the database is overloaded or a transaction is stuck (see pg_stat_activity)",
                        reason="database is busy",
                    )
        try:
            return self._connect(), False
        except BaseException:
            with self._ready:
                self._open -= 1
                self._ready.notify()
            raise

    def put(self, conn: psycopg.Connection[Any]) -> None:
        """Give a connection back: kept if it is healthy and idle, closed otherwise."""
        from psycopg.pq import TransactionStatus

        healthy = not conn.closed and not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE
        with self._ready:
            keep = healthy and not self._closed
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._ready.notify()
        if not keep:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._ready.notify_all()
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()


class PostgresDatabase:
    """A PostgreSQL database, shared by every process pointed at it: a small pool of connections per store object.

    Args:
        url: ``postgresql://[user[:password]@][host][:port][/dbname][?param=value...]`` (libpq's URL; a password is
            better kept in ``PGPASSWORD`` or ``~/.pgpass``, which libpq reads, than in a URL others may see).
        pool_size: Connections kept open at most.

    Raises:
        StoreError: psycopg is not installed, or the database cannot be reached or logged in to.
    """

    dialect: Literal["sqlite", "postgres"] = "postgres"

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.location = shown(url)
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict, make_conninfo
        except ImportError:
            raise StoreError(
                f"the run store {self.location} is a PostgreSQL database, and psycopg is not installed: "
                "pip install 'pau-mcp[postgres]', or point --db / PAU_MCP_DB at a SQLite file"
            ) from None
        self._psycopg: Any = psycopg
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(
                f"{self.location} is not a PostgreSQL URL libpq accepts ({_one_line(exc)}); write it as "
                "postgresql://USER@HOST:PORT/DBNAME"
            ) from None
        # An unreachable host fails within seconds instead of the operating system's minutes.
        self._conninfo = make_conninfo("", **{"connect_timeout": "10", "application_name": "pau-mcp", **given})
        # The pool holds no reference to this object, so one nobody closed is collected (and its pool closed).
        self._pool = _Pool(functools.partial(_connect, psycopg, self._conninfo, self.location), pool_size)
        # A store nobody closed (a command's, at exit) still ends its connections properly, and without a warning.
        weakref.finalize(self, self._pool.close)
        self._release(self._pool.get()[0])  # a wrong URL, a stopped server or a missing database: said now

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def immediately(self) -> Iterator[None]:
        # Every statement is a network round trip (and a write may wait for the advisory lock): never on a loop.
        raise StoreBusy("a PostgreSQL run store is used from a thread", reason="database is busy")
        yield  # pragma: no cover

    def version(self) -> int:
        present = self.read(_HAS_VERSION_TABLE)[0]["present"]
        rows = self.read("SELECT version FROM pau_mcp_schema") if present else []
        return int(rows[0]["version"]) if rows else 0

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        psycopg = self._psycopg
        query, bound = _postgres_sql(sql), _bind(params)
        for first in (True, False):
            conn, reused = self._pool.get()
            try:
                return conn.execute(query, bound).fetchall()
            except psycopg.Error as exc:
                if first and reused and conn.broken:
                    continue  # a pooled connection the server dropped since (a restart): a read can simply retry
                if _pg_unusable(psycopg, exc):
                    raise self._error(exc) from exc
                raise
            finally:
                self._release(conn)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def transaction(self, exclusive: bool = True) -> Iterator[Connection]:
        psycopg = self._psycopg
        conn = self._begin(exclusive)
        try:
            yield _PostgresConnection(conn)
            from psycopg.pq import TransactionStatus

            if conn.info.transaction_status == TransactionStatus.INERROR:
                # PostgreSQL ends a transaction at its first failed statement, and COMMIT would then roll it back
                # without a word: a method that caught an SQL error must not carry on as if it had written.
                raise RuntimeError("a statement of this run store transaction failed; nothing of it was written")
            conn.execute("COMMIT")
        except BaseException as exc:
            if isinstance(exc, psycopg.Error) and _pg_unusable(psycopg, exc):
                raise self._error(exc) from exc
            raise
        finally:
            self._release(conn)

    def _begin(self, exclusive: bool) -> psycopg.Connection[Any]:
        """A pooled connection in a new READ COMMITTED transaction, holding the write lock if ``exclusive``.

        READ COMMITTED whatever the server's default: each statement after the lock then sees every write
        committed before it, which is what makes a check-then-insert under the lock correct.
        """
        begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
        if exclusive:
            begin += f"; SELECT pg_advisory_xact_lock({_WRITE_LOCK})"
        psycopg = self._psycopg
        for first in (True, False):
            conn, reused = self._pool.get()
            try:
                conn.execute(begin)
                return conn
            except BaseException as exc:
                self._release(conn)
                if isinstance(exc, psycopg.Error):
                    if first and reused and conn.broken:
                        continue  # nothing was written yet: start again on a new connection
                    if _pg_unusable(psycopg, exc):
                        raise self._error(exc) from exc
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        """Roll back whatever is left open, and give the connection back to the pool."""
        from psycopg.pq import TransactionStatus

        if not conn.closed and conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
        self._pool.put(conn)

    def _error(self, exc: BaseException) -> StoreError:
        return _postgres_error(self.location, exc)


def _connect(driver: Any, conninfo: str, location: str) -> psycopg.Connection[Any]:
    """A new connection, in autocommit mode (the store begins its transactions itself), reading ``Row``s."""
    try:
        conn: psycopg.Connection[Any] = driver.connect(conninfo, autocommit=True, row_factory=_row_maker)
    except driver.Error as exc:
        raise _postgres_error(location, exc) from None
    try:
        # A write waits for the lock as long as SQLite's busy timeout; a transaction left open by a client that
        # stopped answering (a frozen replica) is ended by the server instead of holding the lock forever.
        conn.execute(f"SET lock_timeout = '{int(_BUSY_S)}s'; SET idle_in_transaction_session_timeout = '60s'")
    except driver.Error as exc:
        conn.close()
        raise _postgres_error(location, exc) from None
    return conn


def _postgres_error(location: str, exc: BaseException) -> StoreError:
    if getattr(exc, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
        return StoreBusy(
            f"the run store {location} stayed locked by another writer for {_BUSY_S:.0f} s ({_one_line(exc)})",
            reason="database is locked",
        )
    return StoreError(
        f"cannot use the run store {location}: {_one_line(exc)}; check that PostgreSQL runs there, that the "
        "database exists (createdb -O USER DBNAME) and that its user may log in and write to it (a password "
        "goes in PGPASSWORD or ~/.pgpass), or point --db / PAU_MCP_DB at another store",
        reason=_pg_reason(exc),
    )


def _pg_unusable(psycopg: Any, exc: BaseException) -> bool:
    """True for errors of the database (unreachable, full, read-only, locked, no permission), not of the SQL."""
    errors = psycopg.errors
    return isinstance(
        exc,
        psycopg.OperationalError
        | psycopg.InterfaceError
        | errors.InsufficientPrivilege
        | errors.ReadOnlySqlTransaction
        | errors.InvalidAuthorizationSpecification,
    )


#: The SQLSTATE of a lock not taken within ``lock_timeout``.
_LOCK_NOT_AVAILABLE = "55P03"

#: Short reasons by SQLSTATE (or its class), for the one-line note an agent's call result carries.
_REASONS = {
    "53100": "database or disk is full",
    "55P03": "database is locked",
    "25006": "database is read-only",
    "42501": "permission denied",
    "08": "lost the connection to the database",
    "53": "the database is out of resources",
    "57": "the database is shutting down or starting",
    "28": "cannot log in to the database",
}


def _pg_reason(exc: BaseException) -> str:
    state = getattr(exc, "sqlstate", None)
    if not state:
        return "cannot reach the database"
    return _REASONS.get(state) or _REASONS.get(state[:2]) or f"database error {state}"


def _one_line(exc: BaseException) -> str:
    """What went wrong, in one line: the server's own message without the statement it quotes, else the error."""
    diagnosis = getattr(exc, "diag", None)
    text = getattr(diagnosis, "message_primary", None) or str(exc)
    return " ".join(text.split()) or type(exc).__name__
