"""Who spends which budget: identities, the labels they bind, and the session states they own.

A budget belongs to an identity the client cannot choose freely: the server process (stdio, ``pau-mcp call``),
an MCP session id (stateful HTTP; issued by the server), a session token's label (signed by the deployment key),
or, for stateless HTTP requests without a session token, one bucket they all share. A label (``?session=``,
``?run=``, ``X-PAU-Session``) only names a session in the run store: it is bound to the first identity that
used it, and a session keeps the label and run of its first request. Budgets already spent under a label are
read back from the run store when the label is bound again after a restart.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..runstore import RunStore

__all__ = ["Budget", "Identity", "SessionRefused", "SessionState", "Sessions", "label_problem"]

#: The budget scope results name, by identity kind.
log = logging.getLogger(__name__)

_SCOPES = {"process": "process", "mcp": "mcp_session", "token": "token", "shared": "shared"}

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}")


def label_problem(value: str, what: str = "session label") -> str | None:
    """Why ``value`` cannot be a session or run label, or None when it can."""
    if _LABEL.fullmatch(value):
        return None
    shown = repr(value[:40] + ("..." if len(value) > 40 else ""))
    return (
        f"the {what} {shown} is not allowed: use 1 to 128 letters, digits and _ . : / @ + - "
        "(starting with a letter or digit)"
    )


class SessionRefused(PermissionError):
    """A request names a session it may not use (another's label, or a switch of label or run); says what to do."""


@dataclass(frozen=True)
class Identity:
    """Who spends a budget.

    Attributes:
        kind: ``process`` (stdio, the CLI), ``mcp`` (an HTTP MCP session), ``token`` (a session token) or
            ``shared`` (stateless requests without a session token).
        name: The process key, the MCP session id, the token's label, or ``stateless``.
        run: A token's run (None: the server's); the other kinds name their run per request.
    """

    kind: str
    name: str
    run: str | None = None


@dataclass
class Budget:
    """Queries used and feedback given per tool name, for one identity (several sessions may share it)."""

    used: dict[str, int] = field(default_factory=dict)
    feedback: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class SessionState:
    """One session: what it sees, and the budget it spends.

    Attributes:
        key: Its key in the run store: its label, else the MCP session id or the process key.
        store_id: The session's row in the run store.
        visible: Tool names this session sees; None for the whole catalog.
        budget: The budget of its identity.
        scope: Whose budget it is, as results name it: ``process`` (stdio, the CLI), ``mcp_session``, ``token``
            or ``shared``.
        stdio: True for the one session of a stdio server process.
    """

    key: str
    store_id: int
    visible: set[str] | None = None
    budget: Budget = field(default_factory=Budget)
    scope: str = "process"
    stdio: bool = False

    @property
    def used(self) -> dict[str, int]:
        """Counted queries per tool name (shared by every session of the identity)."""
        return self.budget.used

    @property
    def lock(self) -> threading.Lock:
        """Guards the budget."""
        return self.budget.lock

    def sees(self, tool: str) -> bool:
        """True when the tool is visible in this session."""
        return self.visible is None or tool in self.visible


class Sessions:
    """Session states by identity and label, created on first use and recorded in the run store.

    Args:
        store: The run store.
        run_id: The server's run.
        transport: ``stdio``, ``http`` or ``cli``, recorded with each session.
        tools: Tool name of every served method id, to read spent budgets back from the store.
    """

    def __init__(self, store: RunStore, run_id: int, transport: str, tools: Mapping[str, str] | None = None) -> None:
        self._store = store
        self._run_id = run_id
        self._transport = transport
        self._tools = dict(tools or {})
        self._states: dict[tuple[int, str], SessionState] = {}
        self._owners: dict[tuple[int, str], Identity] = {}
        self._bound: dict[Identity, tuple[str | None, str | None]] = {}
        self._key_of: dict[Identity, tuple[int, str]] = {}  # an MCP session's one key (it keeps its first label)
        self._shared: dict[int, Budget] = {}
        self._runs: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(
        self, identity: Identity, label: str | None = None, run: str | None = None, client: str | None = None,
        visible: set[str] | None = None,
    ) -> SessionState:  # fmt: skip
        """The session state an identity's request uses.

        Args:
            identity: Who spends the budget.
            label: The session's label (its key in the run store); None for the identity's own key.
            run: Record under this run instead of the server's (an evaluation harness sharing one server names
                its run per session).
            client: The client's name and version, recorded with a new session.
            visible: Narrows a new session's catalog.

        Raises:
            SessionRefused: the label belongs to another identity, or the identity's session first used another
                label or run.
        """
        for what, value in (("session label", label), ("run label", run)):
            problem = label_problem(value, what) if value is not None else None
            if problem:
                raise SessionRefused(problem)
        with self._lock:
            if identity.kind != "shared":
                bound = self._bound.setdefault(identity, (label, run))
                if bound != (label, run):
                    raise SessionRefused(
                        f"this session is labelled {_shown(bound[0], 'without a label')} in "
                        f"{_shown(bound[1], 'the server run', 'run ')}; a session keeps the label and run of its "
                        f"first request, and this one asks for {_shown(label, 'no label')} in "
                        f"{_shown(run, 'the server run', 'run ')}: open a new MCP session for another label"
                    )
            run_id = self._run_for(run)
            key = label or identity.name
            owner = self._owners.setdefault((run_id, key), identity)
            if identity.kind == "mcp" and owner == identity:
                self._key_of.setdefault(identity, (run_id, key))
            if owner != identity:
                raise SessionRefused(
                    f"the session label {key!r}{f' in run {run!r}' if run else ''} is in use by another session; "
                    "each label belongs to the first session that used it: choose another label"
                )
            state = self._states.get((run_id, key))
            if state is None:
                shared = identity.kind == "shared"
                transport = f"{self._transport}-stateless" if shared else self._transport
                store_id = self._store.ensure_session(run_id, key, transport, client)
                if shared:
                    budget = self._shared.get(run_id)
                    if budget is None:
                        budget = self._shared[run_id] = self._spent(self._store.session_ids(run_id, transport))
                else:
                    budget = self._spent([store_id])
                state = SessionState(
                    key=key, store_id=store_id, visible=visible, budget=budget, scope=_SCOPES[identity.kind],
                    stdio=identity.kind == "process" and self._transport == "stdio",
                )  # fmt: skip
                self._states[(run_id, key)] = state
            return state

    def end_mcp_session(self, session_id: str) -> None:
        """Forget an HTTP MCP session that has ended (closed by its client, idle or reclaimed).

        Its state (visible tools, budget counters) and label binding go, so a long-lived server holds the
        state of open sessions only. Its calls stay in the run store, which is where a budget is read back
        from. Its key stays reserved for it (a few dozen bytes), so no later session can write into its record.
        """
        identity = Identity("mcp", session_id)
        with self._lock:
            self._bound.pop(identity, None)
            key = self._key_of.pop(identity, None)
            if key is None:  # never used, or already forgotten (the SDK discards a session more than once)
                return
            self._states.pop(key, None)
            held = len(self._states)
        log.info("MCP session %s ended; %d session states held", session_id, held)

    def open_count(self) -> int:
        """Session states held in memory (for tests and diagnostics)."""
        with self._lock:
            return len(self._states)

    def _run_for(self, run: str | None) -> int:
        if not run:
            return self._run_id
        if run not in self._runs:
            self._runs[run] = self._store.ensure_run(run, kind="eval")
        return self._runs[run]

    def _spent(self, session_ids: list[int]) -> Budget:
        """A budget holding what these stored sessions already spent (nothing, for new ones)."""
        calls, feedback = self._store.spent(session_ids)
        budget = Budget()
        for method_id, count in calls.items():
            if method_id in self._tools:
                budget.used[self._tools[method_id]] = count
        for method_id, count in feedback.items():
            if method_id in self._tools:
                budget.feedback[self._tools[method_id]] = count
        return budget


def _shown(value: str | None, missing: str, prefix: str = "") -> str:
    return f"{prefix}{value!r}" if value else missing
