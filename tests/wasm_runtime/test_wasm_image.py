"""A running module's memory written back into the module: a fresh instance starts where the primed one was."""

from __future__ import annotations

import pytest
import wasmtime

from wasm_runtime._wasm_image import ImageError, check_primable, with_memory

MODULE = bytes(  # wat2wasm gives a bytearray; the image functions take bytes
    wasmtime.wat2wasm(
        """
    (module
      (memory (export "memory") 1)
      (global $sp (mut i32) (i32.const 1024))
      (data (i32.const 16) "seed")
      (func (export "prime") (drop (memory.grow (i32.const 1))) (i32.store (i32.const 70000) (i32.const 42)))
      (func (export "read") (result i32) (i32.load (i32.const 70000))))
    """
    )
)


def _instance(module_bytes: bytes) -> tuple[wasmtime.Store, wasmtime.Instance]:
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    return store, wasmtime.Instance(store, wasmtime.Module(engine, module_bytes), [])


def test_a_module_built_from_a_primed_memory_starts_primed() -> None:
    store, instance = _instance(MODULE)
    prime, memory = instance.exports(store)["prime"], instance.exports(store)["memory"]
    assert isinstance(prime, wasmtime.Func) and isinstance(memory, wasmtime.Memory)
    prime(store)
    image = bytes(memory.read(store, 0, memory.data_len(store)))
    primed = with_memory(MODULE, image)
    fresh_store, fresh = _instance(primed)
    fresh_memory, read = fresh.exports(fresh_store)["memory"], fresh.exports(fresh_store)["read"]
    assert isinstance(fresh_memory, wasmtime.Memory) and isinstance(read, wasmtime.Func)
    assert fresh_memory.size(fresh_store) == 2
    assert read(fresh_store) == 42
    assert bytes(fresh_memory.read(fresh_store, 16, 20)) == b"seed"


def test_a_module_with_state_outside_its_memory_is_refused() -> None:
    two_globals = bytes(
        wasmtime.wat2wasm(
            '(module (memory 1) (global (mut i32) (i32.const 0)) (global (mut i32) (i32.const 0)) (data (i32.const 0) "x"))'
        )
    )
    with pytest.raises(ImageError, match="2 mutable globals"):
        check_primable(two_globals)
