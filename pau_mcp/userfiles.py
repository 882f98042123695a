"""Reading files a user hands to a command (a checkout, a sweep file), which may not be what they seem.

A path can name a FIFO (opening it waits for a writer forever), a device (``/dev/zero`` never ends), a
directory, or, through a symbolic link, a file outside the directory the command was given (a checkout whose
``eval.py`` links to ``~/.ssh/id_rsa``). ``read_bytes`` and ``read_text`` read only regular files, never more
than a cap, and with ``inside`` only files whose real path lies in that directory; anything else is refused
with a one-line ``UnreadableFile`` that names the path and what was wrong. Nothing is read before the file's
type is known: it is opened without blocking and checked on the open descriptor. A file's name is the user's
data too: ``printable`` shows it without letting its control characters act on the terminal.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

__all__ = ["UnreadableFile", "is_inside", "printable", "read_bytes", "read_text"]


class UnreadableFile(ValueError):
    """A file a command was given cannot be read safely; the message (one line) names it and says why."""


def is_inside(path: Path, directory: Path) -> bool:
    """True when ``path``'s real location (every symbolic link followed) is ``directory``'s or lies within it."""
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(directory))
    return real == root or root in real.parents


def printable(text: str) -> str:
    """``text`` with every control or format character (a terminal escape, a bell, a line break, a bidirectional
    override) written as a Python escape, so that a file's name cannot act on the terminal it is shown on."""
    if text.isprintable():
        return text
    return "".join(ascii(ch)[1:-1] if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in text)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _size(count: int) -> str:
    return f"{count:,} bytes"


def read_bytes(path: Path, *, limit: int, inside: Path | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Args:
        path: The file (a symbolic link is followed, but with ``inside`` only to a file within it).
        limit: The most bytes the file may hold.
        inside: A directory the file's real path must lie in.

    Raises:
        UnreadableFile: the file is missing or unreadable, lies outside ``inside``, is not a regular file (a FIFO,
            a device, a directory), or holds more than ``limit`` bytes.
    """
    target = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if inside is not None:
        if not is_inside(target, inside):
            raise UnreadableFile(
                f"{path} leads outside {inside} (to {os.path.realpath(path)}); only files inside it are read"
            )
        # The real path, opened without following a link there: a link put in its place since is refused.
        target = Path(os.path.realpath(target))
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(target, flags)
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(f"{path} is {_kind(info.st_mode)}: give a regular file")
        if info.st_size > limit:
            raise UnreadableFile(f"{path} is {_size(info.st_size)} long; at most {_size(limit)} are read")
        chunks, total = [], 0
        while total <= limit:  # the size can change, or lie (files of /proc say 0): never read past the cap
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(descriptor)
    if total > limit:
        raise UnreadableFile(f"{path} is longer than {_size(limit)}; at most that much is read")
    return b"".join(chunks)


def read_text(path: Path, *, limit: int, inside: Path | None = None, encoding: str = "utf-8") -> str:
    """``read_bytes`` decoded.

    Raises:
        UnreadableFile: as ``read_bytes``, or the bytes are not text in ``encoding``.
    """
    data = read_bytes(path, limit=limit, inside=inside)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path} is not {encoding} text (byte {exc.start:,} cannot be decoded)") from None
