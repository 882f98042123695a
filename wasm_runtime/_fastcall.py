"""A host function of type ``func(string) -> string`` without wasmtime-py's generic marshalling.

wasmtime-py converts every argument and result of a host function through
its type objects, which costs tens of microseconds per call. The sandbox
crosses into the host once per input, so for batches that overhead was the
largest single cost. This registers the callback directly with the C API for
the one signature it needs. It relies on wasmtime-py's ctypes bindings, which
is why pyproject.toml pins wasmtime exactly; the contract tests exercise it on
every call.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from wasmtime import StoreContext, WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime.component import LinkerInstance

__all__ = ["add_string_func"]

StringFunc = Callable[[Any, str], str]

# Callbacks must outlive the linker that calls them.
_KEEP_ALIVE: list[Any] = []


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _no_finalizer(_data: int) -> None:
    return None


def _error_pointer(error: WasmtimeError) -> int:
    return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0


def add_string_func(instance: LinkerInstance, name: str, func: StringFunc) -> None:
    """Define ``name`` in ``instance`` as a host function taking and returning one string.

    Args:
        instance: The linker instance to define it in.
        name: The function's name in the WIT interface.
        func: Called with the store context and the string; returns a string.
            A ``WasmtimeError`` it raises becomes a trap with that message;
            any other exception becomes a trap saying the host failed.
    """

    @ffi.wasmtime_component_func_callback_t
    def trampoline(_data, context, _ty, args, nargs, results, nresults):  # type: ignore[no-untyped-def]
        store = StoreContext(context)
        try:
            if nargs != 1 or nresults != 1 or args[0].kind != ffi.WASMTIME_COMPONENT_STRING.value:
                raise WasmtimeError(f"pau-sandbox: {name} called with the wrong signature")
            text = ffi.to_str(args[0].of.string)
            ffi.wasm_byte_vec_delete(ctypes.byref(args[0].of.string))
            result = func(store, text)
            results[0].kind = ffi.WASMTIME_COMPONENT_STRING
            results[0].of.string = ffi.str_to_capi(result)
            return 0
        except WasmtimeError as exc:
            return _error_pointer(exc)
        except Exception as exc:  # a bug on the host side must trap the guest, not unwind through C
            return _error_pointer(WasmtimeError(f"pau-sandbox: host error in {name}: {type(exc).__name__}"))
        finally:
            store._invalidate()

    _KEEP_ALIVE.append(trampoline)
    name_bytes = name.encode("utf-8")
    error = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes), trampoline, None, _no_finalizer
    )
    if error:
        raise WasmtimeError._from_ptr(error)
