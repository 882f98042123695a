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

__all__ = ["ImageError", "check_primable", "data_address", "function_index", "with_function_body", "with_memory"]

_PAGE = 65536
_CHUNK = 4096
_SECTION_IMPORT, _SECTION_MEMORY, _SECTION_GLOBAL, _SECTION_CODE, _SECTION_DATA, _SECTION_DATACOUNT = (
    2,
    5,
    6,
    10,
    11,
    12,
)


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


def _imported_functions(module: bytes) -> int:
    for kind, body, _ in _sections(module):
        if kind == _SECTION_IMPORT:
            count, at = _leb(module, body)
            functions = 0
            for _ in range(count):
                for _name in range(2):
                    length, at = _leb(module, at)
                    at += length
                what = module[at]
                at += 1
                if what == 0:  # a function: its type index
                    functions += 1
                    _, at = _leb(module, at)
                elif what == 2:  # a memory: flags, minimum, maximum if flagged
                    flags = module[at]
                    _, at = _leb(module, at + 1)
                    if flags & 1:
                        _, at = _leb(module, at)
                else:
                    raise ImageError("the module imports a table, a global or a tag")
            return functions
    return 0


def function_index(module: bytes, name: str) -> int:
    """The index of the function the module's name section calls ``name``.

    Raises:
        ImageError: No function has that name (or the module has no name section).
    """
    wanted = name.encode("utf-8")
    for kind, body, size in _sections(module):
        if kind != 0 or _custom_name(module, body) != "name":
            continue
        length, at = _leb(module, body)
        at += length
        end = body + size
        while at < end:
            subsection = module[at]
            length, at = _leb(module, at + 1)
            if subsection == 1:
                count, entry = _leb(module, at)
                for _ in range(count):
                    index, entry = _leb(module, entry)
                    name_length, entry = _leb(module, entry)
                    if module[entry : entry + name_length] == wanted:
                        return index
                    entry += name_length
            at += length
    raise ImageError(f"the module has no function named {name!r}")


def _code_bodies(module: bytes) -> list[tuple[int, int]]:
    """(start, size) of each function body in the code section, size prefix excluded."""
    for kind, body, _ in _sections(module):
        if kind == _SECTION_CODE:
            count, at = _leb(module, body)
            bodies = []
            for _ in range(count):
                size, at = _leb(module, at)
                bodies.append((at, size))
                at += size
            return bodies
    raise ImageError("the module has no code section")


def with_function_body(module: bytes, index: int, donor: bytes, donor_index: int) -> bytes:
    """``module`` with function ``index``'s body replaced by ``donor``'s function ``donor_index`` (no imports).

    The donor's body may use its parameters, locals, constants and memory 0, nothing else: no calls, globals or
    tables, whose indices mean other things in ``module``. Every other section is kept byte for byte.
    """
    first = _imported_functions(module)
    bodies = _code_bodies(module)
    if not first <= index < first + len(bodies):
        raise ImageError(f"function {index} is not defined in the module")
    start, size = _code_bodies(donor)[donor_index - _imported_functions(donor)]
    replacement = donor[start : start + size]
    out = bytearray(module[:8])
    for kind, body, length in _sections(module):
        if kind == _SECTION_CODE:
            parts = [_uleb(len(bodies))]
            for number, (at, body_size) in enumerate(bodies):
                code = replacement if number == index - first else module[at : at + body_size]
                parts.append(_uleb(len(code)) + bytes(code))
            content = b"".join(parts)
        else:
            content = bytes(module[body : body + length])
        out.append(kind)
        out += _uleb(len(content))
        out += content
    return bytes(out)


def data_address(module: bytes, position: int) -> int:
    """The memory address the byte at ``position`` of the module's file is loaded to (an active data segment's).

    Raises:
        ImageError: The position is in no active data segment with a constant address.
    """
    for kind, body, _ in _sections(module):
        if kind != _SECTION_DATA:
            continue
        count, at = _leb(module, body)
        for _ in range(count):
            flags, at = _leb(module, at)
            if flags == 1:
                length, at = _leb(module, at)
                at += length
                continue
            if flags == 2:
                _, at = _leb(module, at)
            if module[at] != 0x41:  # i32.const
                raise ImageError("a data segment's address is not a constant")
            address, at = _sleb_read(module, at + 1)
            if module[at] != 0x0B:
                raise ImageError("a data segment's address is not a constant")
            length, at = _leb(module, at + 1)
            if at <= position < at + length:
                return address + position - at
            at += length
    raise ImageError("the position is in no data segment")


def _sleb_read(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                value -= 1 << shift
            return value, at
