"""CPU time spent by the project's processes, read from /proc (Linux), to say where a benchmark's cores went."""

from __future__ import annotations

import os
import resource
from pathlib import Path

_ROLES = (
    ("wasm_runtime.workers", "sandbox workers"),
    ("pau_mcp serve", "server"),
    ("pau_mcp scorer", "scorer"),
    ("_instant_llm.py", "instant model"),
)


def _role(command: str) -> str | None:
    for needle, role in _ROLES:
        if needle in command:
            return role
    return None


def snapshot() -> dict[str, float]:
    """Seconds of CPU used so far by this process and by every running server, scorer and sandbox worker."""
    tick = os.sysconf("SC_CLK_TCK")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Processes this one started and that have ended (a server and its workers) count here.
    totals = {"this process": usage.ru_utime + usage.ru_stime, "ended children": ended.ru_utime + ended.ru_stime}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = _role(command.replace("-m pau_mcp", "pau_mcp").replace("pau-mcp", "pau_mcp"))
        if role is not None:
            totals[f"{role}:{entry.name}"] = (int(fields[11]) + int(fields[12])) / tick
    return totals


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per role between two snapshots (processes started in between count from zero)."""
    out: dict[str, float] = {}
    for key, value in after.items():
        role = key.split(":", 1)[0]
        out[role] = out.get(role, 0.0) + value - before.get(key, 0.0)
    return out
