"""The response cache: replies by request, in a SQLite file that concurrent processes share."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import LLMNotConfigured
from .replies import read_json

__all__ = ["ResponseCache"]


class ResponseCache:
    """Replies by request, in a SQLite file shared safely by concurrent processes (WAL).

    Args:
        path: The cache file (created with its directory).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, created_at REAL NOT NULL, response TEXT NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise LLMNotConfigured(
                f"cannot open the LLM response cache {self.path}: {exc}; point --data-dir at a writable directory or pass --no-cache"
            ) from None

    @staticmethod
    def key(where: str, body: bytes) -> str:
        """A digest of everything that shapes a reply: where it is asked (provider, API, base URL) and the body."""
        return hashlib.sha256(f"v2 {where}\n".encode() + body).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply for a key, or None (also when the stored text is not a JSON object: see ``drop``)."""
        with self._lock:
            row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if not row:
            return None
        value = read_json(row[0]) if isinstance(row[0], str) else None
        if not isinstance(value, dict):
            self.drop(key)
            return None
        return value

    def drop(self, key: str) -> None:
        """Forget the reply stored for a key (one that cannot be read: asked again, it is replaced)."""
        with self._lock:
            self._conn.execute("DELETE FROM responses WHERE key = ?", (key,))

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        """Store a reply (replacing an older one)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, model, created_at, response) VALUES (?, ?, ?, ?)",
                (key, model, time.time(), json.dumps(response)),
            )

    def put_new(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        """Store a reply unless the key already has one (the first of several samples stays)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO responses (key, model, created_at, response) VALUES (?, ?, ?, ?)",
                (key, model, time.time(), json.dumps(response)),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()
