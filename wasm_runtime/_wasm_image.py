"""Writes a running core module's memory back into the module: a pre-initialised copy, as wizer makes.

The numpy engine's interpreter takes seconds to import numpy, pandas and scipy.
The host does that once (``numpy_build``), reads the instance's linear memory,
and builds a module whose data segments are that memory and whose initial
memory size is its size. wasmtime maps such a module's memory image
copy-on-write, so every fresh instance starts with the packages imported at
the cost of an ordinary instantiation.

Only what a C program's instance changes between calls is carried over: the
linear memory. Its one mutable global (the shadow-stack pointer) is back at
its initial value whenever an export has returned, and its table is fixed in
size and never written by the interpreter. ``check_primable`` refuses a module
with more mutable globals than the stack pointer.
"""

from __future__ import annotations

__all__ = ["ImageError", "check_primable", "with_memory"]

_PAGE = 65536
_CHUNK = 4096
_SECTION_MEMORY, _SECTION_GLOBAL, _SECTION_DATA, _SECTION_DATACOUNT = 5, 6, 11, 12


class ImageError(ValueError):
    """The module cannot be pre-initialised this way; the message says which assumption fails."""


def _leb(data: bytes | memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


def _sections(module: bytes) -> list[tuple[int, int, int]]:
    """(id, start of body, size) of every section."""
    if module[:8] != b"\0asm\x01\0\0\0":
        raise ImageError("not a WebAssembly core module (version 1)")
    out = []
    at = 8
    while at < len(module):
        kind = module[at]
        size, body = _leb(module, at + 1)
        out.append((kind, body, size))
        at = body + size
    return out


def _custom_name(module: bytes, body: int) -> str:
    length, at = _leb(module, body)
    return bytes(module[at : at + length]).decode("utf-8", "replace")


def _passive_segments(module: bytes, body: int) -> int:
    """How many data segments lead the data section as empty passive ones (kept, for ``data.drop``)."""
    count, at = _leb(module, body)
    passive = 0
    for _ in range(count):
        flags, at = _leb(module, at)
        if flags != 1:
            break
        length, at = _leb(module, at)
        if length:
            raise ImageError("the module has a passive data segment with data")
        passive += 1
    return passive


def check_primable(module: bytes) -> None:
    """Refuse a module whose state between calls is not all in its linear memory.

    Raises:
        ImageError: It has no memory, more than one mutable global, or imports memory or globals.
    """
    kinds = [kind for kind, _, _ in _sections(module)]
    if _SECTION_MEMORY not in kinds or _SECTION_DATA not in kinds:
        raise ImageError("the module defines no memory or no data")
    for kind, body, _ in _sections(module):
        if kind == _SECTION_GLOBAL:
            count, at = _leb(module, body)
            mutable = 0
            for _ in range(count):
                mutable += module[at + 1]
                at += 2
                while module[at] != 0x0B:  # a constant expression: i32.const/i64.const and its immediate
                    at += 1
                at += 1
            if mutable > 1:
                raise ImageError(f"the module has {mutable} mutable globals; only the stack pointer is expected")


def _segments(memory: bytes) -> list[tuple[int, bytes]]:
    """(offset, bytes) runs of the memory that are not all zero, at 4 KiB granularity."""
    zero = bytes(_CHUNK)
    runs: list[tuple[int, bytes]] = []
    start = None
    for offset in range(0, len(memory), _CHUNK):
        blank = memory[offset : offset + _CHUNK] == zero[: min(_CHUNK, len(memory) - offset)]
        if not blank and start is None:
            start = offset
        elif blank and start is not None:
            runs.append((start, memory[start:offset]))
            start = None
    if start is not None:
        runs.append((start, memory[start:]))
    return runs


def with_memory(module: bytes, memory: bytes) -> bytes:
    """``module`` with ``memory`` as its initial linear memory (data segments and minimum size).

    The name section is dropped (it names the old data segments); every other
    section is kept byte for byte.
    """
    check_primable(module)
    if len(memory) % _PAGE:
        raise ImageError("the memory is not a whole number of pages")
    runs = _segments(memory)
    out = bytearray(module[:8])
    passive = 0
    for kind, body, _size in _sections(module):
        if kind == _SECTION_DATA:
            passive = _passive_segments(module, body)
    for kind, body, size in _sections(module):
        if kind == 0 and _custom_name(module, body) == "name":
            continue
        if kind == _SECTION_MEMORY:
            count, at = _leb(module, body)
            flags, at = _leb(module, at)
            if count != 1 or flags & ~1:
                raise ImageError("the module's memory is not one plain 32-bit memory")
            _, at = _leb(module, at)
            tail = bytes(module[at : body + size])  # the maximum, when there is one
            content = _uleb(1) + _uleb(flags) + _uleb(len(memory) // _PAGE) + tail
        elif kind == _SECTION_DATACOUNT:
            content = _uleb(passive + len(runs))
        elif kind == _SECTION_DATA:
            parts = [_uleb(passive + len(runs))]
            parts.extend(b"\x01\x00" for _ in range(passive))
            for offset, data in runs:
                parts.append(b"\x00\x41" + _sleb(offset) + b"\x0b" + _uleb(len(data)) + data)
            content = b"".join(parts)
        else:
            content = bytes(module[body : body + size])
        out.append(kind)
        out += _uleb(len(content))
        out += content
    return bytes(out)
