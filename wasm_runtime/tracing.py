"""Line tracing of a hidden function, for measuring coverage after the fact (``Sandbox.run(trace=True)``).

When the host's settings carry ``"trace": true``, the guest runs the entry
function under ``sys.settrace`` and adds to its outcome, for every frame of
the hidden code (file ``<hidden>``), the lines it ran and the steps between
them (arcs; a frame enters from, and returns to, minus its first line, as
coverage.py writes it). The host keeps a well-formed trace in
``outcome.extra["trace"]``: ``{"lines": [...], "arcs": [[from, to], ...]}``,
or None when the guest's trace was malformed or too long. A call that stopped
before the guest could report (a trap: fuel, deadline, a crash) has no trace.

Tracing never changes what a call returns, prints or raises; it costs CPU
(fuel and time), so a traced input may run out of a budget an untraced one
fits in, and a deep recursion reaches the interpreter's stack sooner. The
hidden function runs in the tracer's interpreter and can switch it off, so a
trace is evidence about cooperative code, not about hostile code.

Without ``trace``, no outcome carries a trace: one that hidden code forged
into its outcome is dropped. ``Outcome.extra`` is never serialised
(``Outcome.to_dict``), so a trace does not cross a process boundary either.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .outcome import Outcome

__all__ = ["MAX_TRACE_ITEMS", "TRACE_KEY", "kept_trace", "untraced"]

#: The settings flag that turns tracing on, and the outcome field (guest side) and ``extra`` key (host side).
TRACE_KEY = "trace"
#: Most line numbers and arcs together a trace may hold; a longer one is dropped (the outcome stands without it).
MAX_TRACE_ITEMS = 100_000


def kept_trace(data: Any) -> dict[str, Any]:
    """``{"trace": ...}`` for an outcome's ``extra``: the guest's trace if well formed, else None.

    Nothing from the guest is trusted: the trace must be lists of line
    numbers and of two-number arcs, at most ``MAX_TRACE_ITEMS`` in all.
    """
    if type(data) is not dict:
        return {TRACE_KEY: None}
    lines, arcs = data.get("lines"), data.get("arcs")
    if type(lines) is not list or type(arcs) is not list or len(lines) + len(arcs) > MAX_TRACE_ITEMS:
        return {TRACE_KEY: None}
    if not all(type(n) is int for n in lines) or not all(
        type(a) is list and len(a) == 2 and type(a[0]) is int and type(a[1]) is int for a in arcs
    ):
        return {TRACE_KEY: None}
    return {TRACE_KEY: {"lines": lines, "arcs": arcs}}


def untraced(outcome: Outcome) -> Outcome:
    """``outcome`` without a trace: for a run that asked for none (hidden code can forge one)."""
    extra = {k: v for k, v in outcome.extra.items() if k != TRACE_KEY}
    return dataclasses.replace(outcome, extra=extra)
