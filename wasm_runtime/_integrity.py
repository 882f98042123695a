"""What the sandbox cache may hold before anything in it is loaded: a private directory and sealed files.

wasmtime's ``deserialize`` trusts its input completely: a compiled file
(``.cwasm``) is native code that runs in the host process, unchecked. A file
in the cache is therefore loaded only when

* the cache directory and the file belong to this user and no one else can
  write to them (``private_problem``): whoever can write there could plant a
  file that runs on this host, and no record kept beside it would stop them;
* the file still has the SHA-256 digest recorded when this process's code
  wrote it (``seal`` and ``seal_problem``): a file changed since (a flipped
  byte, a truncated copy, a file put in its place) is refused, and the caller
  removes it and builds it again.

Hashing a 50 MB file costs about 85 ms of CPU, on every process start. The
seal also records the file's inode, size and modification and change times; a
file whose four are unchanged is the file that was hashed (writing to a file
or replacing it changes its change time, which only root can set back), so it
is not hashed again.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["CacheError", "check_private", "private_problem", "seal", "seal_problem"]


class CacheError(RuntimeError):
    """The sandbox cache cannot be trusted as it is; the message says what to do."""


def _stamp(status: os.stat_result) -> list[int]:
    return [status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def _digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def seal(path: Path) -> dict[str, Any]:
    """The seal of a file this process has just written: its digest and its stamp, for the build's metadata."""
    return {"sha256": _digest(path), "stamp": _stamp(path.stat())}


def seal_problem(path: Path, recorded: object) -> str | None:
    """None when ``path`` is the file ``recorded`` (a ``seal``) describes, else what is wrong with it.

    A file whose stamp matches the seal is not hashed again; any other is hashed and compared.
    """
    if not isinstance(recorded, dict) or not isinstance(recorded.get("sha256"), str):
        return "has no recorded digest (it was not written by this version of pau-mcp)"
    try:
        status = path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if recorded.get("stamp") == _stamp(status):
        return None
    if _digest(path) != recorded["sha256"]:
        return "does not match the digest recorded when it was built (it was changed or damaged since)"
    return None


def private_problem(path: Path) -> str | None:
    """None when ``path`` belongs to this user and only this user can write to it, else what is wrong."""
    try:
        status = path.stat()
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if hasattr(os, "geteuid") and status.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {status.st_uid})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} can be written by other users (mode {stat.filemode(status.st_mode)})"
    return None


def check_private(path: Path) -> None:
    """Raise ``CacheError`` when ``path`` (the cache directory or a file in it) is not private to this user."""
    problem = private_problem(path)
    if problem is not None:
        raise CacheError(
            f"the sandbox cache is not private: {problem}, so a file planted there could run on this host; make it "
            f"private (chown to this user, chmod go-w) or use another directory (--cache-dir, PAU_MCP_CACHE_DIR)"
        )
