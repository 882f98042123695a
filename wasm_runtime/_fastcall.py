"""Host functions that take or return one string, without wasmtime-py's generic marshalling.

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

from wasmtime import Store, WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime.component import LinkerInstance

__all__ = ["add_string_func", "arm", "context_of", "fuel_left"]


# Callbacks must outlive the linker that calls them.
_KEEP_ALIVE: list[Any] = []


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _no_finalizer(_data: int) -> None:
    return None


def _error_pointer(error: WasmtimeError) -> int:
    return ctypes.cast(error._consume(), ctypes.c_void_p).value or 0


def _string_vec(text: str) -> Any:
    """A C byte vector holding ``text`` as UTF-8, which the caller (wasmtime) takes ownership of.

    wasmtime-py's own helpers build a ctypes array type per string, which
    cost more than the rest of a host call.
    """
    data = text.encode("utf-8")
    vec = ffi.wasm_byte_vec_t()
    ffi.wasm_byte_vec_new_uninitialized(ctypes.byref(vec), len(data))
    if data:
        ctypes.memmove(vec.data, data, len(data))
    return vec


def add_string_func(
    instance: LinkerInstance, name: str, func: Callable[..., Any], takes: bool = True, returns: bool = True
) -> None:
    """Define ``name`` in ``instance`` as a host function taking and/or returning one string.

    Args:
        instance: The linker instance to define it in.
        name: The function's name in the WIT interface.
        func: Called with the raw store context (valid only during the call; see ``arm`` and
            ``fuel_left``) and, when ``takes``, the string;
            returns a string when ``returns`` (otherwise its result is ignored).
            A ``WasmtimeError`` it raises becomes a trap with that message;
            any other exception becomes a trap saying the host failed.
        takes: The WIT function has one string parameter (otherwise none).
        returns: The WIT function returns one string (otherwise nothing).
    """
    want_args, want_results = int(takes), int(returns)

    @ffi.wasmtime_component_func_callback_t
    def trampoline(_data, context, _ty, args, nargs, results, nresults):  # type: ignore[no-untyped-def]
        try:
            if (
                nargs != want_args
                or nresults != want_results
                or (takes and args[0].kind != ffi.WASMTIME_COMPONENT_STRING.value)
            ):
                raise WasmtimeError(f"pau-sandbox: {name} called with the wrong signature")
            if takes:
                vec = args[0].of.string
                text = ctypes.string_at(vec.data, vec.size).decode("utf-8") if vec.size else ""
                ffi.wasm_byte_vec_delete(ctypes.byref(vec))
                result = func(context, text)
            else:
                result = func(context)
            if returns:
                results[0].kind = ffi.WASMTIME_COMPONENT_STRING
                results[0].of.string = _string_vec(result)
            return 0
        except WasmtimeError as exc:
            return _error_pointer(exc)
        except Exception as exc:  # a bug on the host side must trap the guest, not unwind through C
            return _error_pointer(WasmtimeError(f"pau-sandbox: host error in {name}: {type(exc).__name__}"))

    _KEEP_ALIVE.append(trampoline)
    name_bytes = name.encode("utf-8")
    error = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes), trampoline, None, _no_finalizer
    )
    if error:
        raise WasmtimeError._from_ptr(error)


def context_of(store: Store) -> Any:
    """The raw context of ``store``, for ``arm`` and ``fuel_left``."""
    return store._context()


def arm(context: Any, fuel: int, epoch_ticks: int) -> None:
    """Give the store ``fuel`` units and a deadline ``epoch_ticks`` ticks from now (once per input)."""
    error = ffi.wasmtime_context_set_fuel(context, fuel)
    if error:
        raise WasmtimeError._from_ptr(error)
    ffi.wasmtime_context_set_epoch_deadline(context, epoch_ticks)


def fuel_left(context: Any) -> int | None:
    """The store's remaining fuel, or None when wasmtime cannot say (it then has none left)."""
    remaining = ctypes.c_uint64(0)
    error = ffi.wasmtime_context_get_fuel(context, ctypes.byref(remaining))
    if error:
        ffi.wasmtime_error_delete(error)
        return None
    return remaining.value
