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


_SECTION_TABLE, _SECTION_EXPORT = 4, 7
#: The names under which ``with_state_exports`` exports a module's mutable globals and tables.
GLOBAL_EXPORT = "pau.global.{}"
TABLE_EXPORT = "pau.table.{}"


def _count(module: bytes, section: int) -> int:
    for kind, body, _ in _sections(module):
        if kind == section:
            return _leb(module, body)[0]
    return 0


def mutable_globals(module: bytes) -> list[int]:
    """The indices of the module's own mutable globals.

    Raises:
        ImageError: The module imports globals (their indices would shift).
    """
    if _imported_globals(module):
        raise ImageError("the module imports globals")
    found = []
    for kind, body, _ in _sections(module):
        if kind == _SECTION_GLOBAL:
            count, at = _leb(module, body)
            for index in range(count):
                if module[at + 1]:
                    found.append(index)
                at += 2
                while module[at] != 0x0B:  # a constant expression: i32.const/i64.const and its immediate
                    at += 1
                at += 1
    return found


def _imported_globals(module: bytes) -> int:
    for kind, body, _ in _sections(module):
        if kind == _SECTION_IMPORT:
            count, at = _leb(module, body)
            found = 0
            for _ in range(count):
                for _name in range(2):
                    length, at = _leb(module, at)
                    at += length
                what = module[at]
                at += 1
                if what == 0:
                    _, at = _leb(module, at)
                elif what == 2:
                    flags = module[at]
                    _, at = _leb(module, at + 1)
                    if flags & 1:
                        _, at = _leb(module, at)
                else:
                    found += 1
                    return found  # tables, globals and tags are refused here: the caller needs only "any"
            return found
    return 0


def with_state_exports(module: bytes) -> bytes:
    """``module`` with every mutable global and every table exported (``GLOBAL_EXPORT``, ``TABLE_EXPORT``).

    The host reads and restores a kept instance's state through them; nothing else changes, so the compiled
    code is the same as the original's.
    """
    extra = [(GLOBAL_EXPORT.format(i), 3, i) for i in mutable_globals(module)]
    extra += [(TABLE_EXPORT.format(i), 1, i) for i in range(_count(module, _SECTION_TABLE))]
    entries = b"".join(_uleb(len(name)) + name.encode() + bytes([kind]) + _uleb(index) for name, kind, index in extra)
    out = bytearray(module[:8])
    placed = False
    for kind, body, size in _sections(module):
        content = bytes(module[body : body + size])
        if kind == _SECTION_EXPORT:
            count, at = _leb(module, body)
            content = _uleb(count + len(extra)) + bytes(module[at : body + size]) + entries
            placed = True
        elif not placed and kind not in (0, 1, 2, 3, 4, 5, 6, 13) and kind != _SECTION_EXPORT:
            # No export section yet: it goes before the first section that follows exports.
            out.append(_SECTION_EXPORT)
            section = _uleb(len(extra)) + entries
            out += _uleb(len(section)) + section
            placed = True
        out.append(kind)
        out += _uleb(len(content))
        out += content
    return bytes(out)


_SECTION_TYPE, _SECTION_FUNCTION = 1, 3
#: The export ``with_call_export`` adds: ``(callable, pointer, length) -> i64``.
CALL_EXPORT = "pau.call"
#: The interpreter's functions the added export calls, by the names the module's name section gives them.
CALL_IMPORTS = (
    "PyBytes_FromStringAndSize",
    "PyObject_CallOneArg",
    "PyErr_Clear",
    "PyBytes_AsString",
    "PyBytes_Size",
)


def _call_body(index: dict[str, int]) -> bytes:
    """The body of ``pau.call``: ``callable(bytes(memory[pointer:pointer + length]))``, a bytes result's address
    in the high 32 bits and its size in the low ones, or 0 when anything failed (the error is cleared)."""

    def call(name: str) -> bytes:
        return b"\x10" + _uleb(index[name])

    fail = b"\x04\x40" + call("PyErr_Clear") + b"\x42\x00\x0f\x0b"  # if: clear the error, return 0 (i64); end
    code = (
        b"\x01\x03\x7f"  # locals: 3 x i32 (argument, result, data)
        + b"\x20\x01\x20\x02" + call("PyBytes_FromStringAndSize") + b"\x22\x03"  # local.tee 3
        + b"\x45" + fail  # i32.eqz; if ...
        + b"\x20\x00\x20\x03" + call("PyObject_CallOneArg") + b"\x22\x04"
        + b"\x45" + fail
        + b"\x20\x04" + call("PyBytes_AsString") + b"\x22\x05"
        + b"\x45" + fail
        + b"\x20\x05\xad\x42\x20\x86"  # i64.extend_i32_u(data) << 32
        + b"\x20\x04" + call("PyBytes_Size") + b"\xad\x84"  # | i64.extend_i32_u(size)
        + b"\x0b"
    )  # fmt: skip
    return _uleb(len(code)) + code


def _function_names(module: bytes) -> dict[str, int]:
    names: dict[str, int] = {}
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
                    names.setdefault(bytes(module[entry : entry + name_length]).decode("utf-8", "replace"), index)
                    entry += name_length
            at += length
    return names


def with_call_export(module: bytes) -> bytes:
    """``module`` with one more function, exported as ``CALL_EXPORT``: it calls a Python callable (an object's
    address in the primed memory) on the bytes at ``pointer``, so a turn costs one call instead of compiling text.

    Raises:
        ImageError: The module lacks a section or one of ``CALL_IMPORTS``.
    """
    names = _function_names(module)
    missing = [name for name in CALL_IMPORTS if name not in names]
    if missing:
        raise ImageError(f"the module has no function named {', '.join(missing)}")
    types = _count(module, _SECTION_TYPE)
    functions = _imported_functions(module) + _count(module, _SECTION_FUNCTION)
    out = bytearray(module[:8])
    for kind, body, size in _sections(module):
        count, at = _leb(module, body) if kind in (_SECTION_TYPE, _SECTION_FUNCTION, _SECTION_CODE, 7) else (0, body)
        rest = bytes(module[at : body + size])
        if kind == _SECTION_TYPE:
            content = _uleb(count + 1) + rest + b"\x60\x03\x7f\x7f\x7f\x01\x7e"  # (i32, i32, i32) -> i64
        elif kind == _SECTION_FUNCTION:
            content = _uleb(count + 1) + rest + _uleb(types)
        elif kind == _SECTION_CODE:
            content = _uleb(count + 1) + rest + _call_body(names)
        elif kind == _SECTION_EXPORT:
            content = (
                _uleb(count + 1) + rest + _uleb(len(CALL_EXPORT)) + CALL_EXPORT.encode() + b"\x00" + _uleb(functions)
            )
        else:
            content = rest
        out.append(kind)
        out += _uleb(len(content))
        out += content
    return bytes(out)
