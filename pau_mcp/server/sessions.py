"""Who spends which budget: credentials, and the sessions of the run store they own.

A budget belongs to a **credential**, resolved once per request at the server's edge (``app``), whatever the
protocol era: the server process (stdio, ``pau-mcp call``), a session token (its label in its run), or a label
the holder of the main token names (the main token's default label when it names none). Each credential owns one
session of the run store, its label in its run, and everything that must outlive a request is in the store: the
budget counts (``RunStore.reserve_call``) and which kind of credential owns each label (``claim_session``), so
any server process sharing the store answers any request alike. What is held here is only what can never let a
credential exceed its budget: a cache of sessions already claimed (a claim never changes) and of run ids, and the
tools an open connection narrowed itself to (``open``; a connection lives in one process). Each is bounded, so no
number of labels, runs or sessions named over a server's life grows its memory past a few megabytes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..contract import BudgetScope, label_problem
from ..runstore import RunStore
from .loopstore import LoopStore

__all__ = ["DEFAULT_LABEL", "Credential", "SessionRefused", "SessionState", "Sessions", "StoreBudget", "label_problem"]

log = logging.getLogger(__name__)

#: The label of requests of the main token that name none. Outside the label rule, so that no request can name it
#: and no session token can be issued for it.
DEFAULT_LABEL = "(main)"

#: The budget scope results name, by credential kind.
_SCOPES: dict[str, BudgetScope] = {"process": "process", "token": "token", "label": "label", "subject": "subject"}

#: Claimed sessions remembered (about 0.7 KB each); an older one is claimed in the store again when it comes back.
_CACHED = 4_096
#: Connections whose narrowing (``open``) is remembered at once: more than the open MCP sessions of any server
#: (``--max-sessions``), whose narrowings are forgotten as they end.
_NARROWED = 10_000
#: Run names whose store ids are remembered; an older one is looked up in the store again.
_RUNS = 1_024


class SessionRefused(PermissionError):
    """A request names a session its credential may not use (another kind of credential owns the label)."""


@dataclass(frozen=True)
class Credential:
    """Who spends a budget.

    Attributes:
        kind: ``process`` (stdio, the CLI), ``token`` (a session token), ``label`` (the main token's holder, or
            anyone on a loopback server without one, naming a label) or ``subject`` (a signed-in token's subject,
            ``serve --auth oauth``).
        label: The session's key in the run store: the process key, the token's label, the label named, or the
            subject.
        run: The run it records under; None for the server's.
    """

    kind: str
    label: str
    run: str | None = None


@dataclass(frozen=True)
class SessionState:
    """A credential's session as one request uses it: its row in the run store, and what this request sees.

    Attributes:
        key: Its key in the run store (the credential's label).
        store_id: The session's row in the run store (its budgets are kept under it).
        scope: Whose budget it is, as results name it: ``process`` (stdio, the CLI), ``token`` or ``label``.
        stdio: True for the one session of a stdio server process.
        visible: Tool names this request sees; None for the whole catalog.
        notes: What the process has told this session once (shared by every request of the session).
    """

    key: str
    store_id: int
    scope: BudgetScope = "process"
    stdio: bool = False
    visible: frozenset[str] | None = None
    notes: set[str] = field(default_factory=set, compare=False, repr=False)

    def sees(self, tool: str) -> bool:
        """True when the tool is visible to this request."""
        return self.visible is None or tool in self.visible

    def narrowed(self, tools: Iterable[str] | None) -> SessionState:
        """The same session seeing only ``tools`` of what it sees (None: no narrowing)."""
        if tools is None:
            return self
        chosen = frozenset(tools)
        return replace(self, visible=chosen if self.visible is None else self.visible & chosen)


@dataclass(frozen=True)
class StoreBudget:
    """A session's budget on one method (``contract.Budget``), kept in the run store: every server process sharing the
    store sees one count, and of any number of concurrent reservations on a limit of N exactly N succeed.

    Attributes:
        store: The run store.
        session_id: The session's row (``SessionState.store_id``).
        method_id: The method.
        limit: Queries allowed (0: no limit); with ``feedback``, submits answered with feedback (0: none).
        feedback: Count submits answered with feedback (``--feedback-limit``) instead of queries.

    ``reserve`` and ``refund`` raise ``pau_mcp.runstore.StoreError`` when the store cannot be written (nothing was
    taken, or given back).
    """

    store: RunStore
    session_id: int
    method_id: str
    limit: int
    feedback: bool = False

    def reserve(self) -> int | None:
        """Take one; the number taken with it, or None (nothing taken) when none is left."""
        if self.feedback:
            return self.store.reserve_feedback(self.session_id, self.method_id, self.limit)
        return self.store.reserve_call(self.session_id, self.method_id, self.limit)

    def refund(self) -> None:
        """Give back one that ``reserve`` took for a call (or submit) that did not run or was not recorded."""
        if self.feedback:
            self.store.release_feedback(self.session_id, self.method_id)
        else:
            self.store.release_call(self.session_id, self.method_id)

    def used(self) -> int:
        """How many are taken, as the store holds it now."""
        queries, answered = self.store.budget_spent(self.session_id, self.method_id)
        return answered if self.feedback else queries


class Sessions:
    """The sessions credentials own, claimed in the run store on first use, and the narrowing of open connections.

    Args:
        store: The run store.
        run_id: The server's run.
        transport: ``stdio``, ``http`` or ``cli``, recorded with each new session.
    """

    def __init__(self, store: RunStore, run_id: int, transport: str) -> None:
        self._store = store
        self._run_id = run_id
        self._transport = transport
        self._claimed: OrderedDict[Credential, SessionState] = OrderedDict()
        self._narrowed: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._runs: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._stored = LoopStore(store)

    async def claim(self, credential: Credential, client: str | None = None) -> SessionState:
        """``get`` for code on an event loop: a session already claimed at once, a new one without the loop ever
        waiting for the store's lock (``LoopStore``).

        Raises:
            SessionRefused: as ``get``.
            StoreError: the store cannot take the claim (``StoreBusy``: it stayed locked; try again later).
        """
        with self._lock:
            state = self._claimed.get(credential)
            if state is not None:
                self._claimed.move_to_end(credential)
                return state
        return await self._stored.run(self.get, credential, client)

    def get(self, credential: Credential, client: str | None = None) -> SessionState:
        """The session a credential's requests use (claimed in the run store the first time).

        Args:
            credential: Who spends the budget.
            client: The client's name and version, recorded with a new session.

        Raises:
            SessionRefused: a malformed label or run, or the label is owned by another kind of credential.
        """
        with self._lock:
            state = self._claimed.get(credential)
            if state is not None:
                self._claimed.move_to_end(credential)
                return state
        if credential.kind not in ("process", "subject"):  # a subject is the issuer's text, checked by the sign-in
            for what, value in (("session label", credential.label), ("run label", credential.run)):
                problem = label_problem(value, what) if value is not None and value != DEFAULT_LABEL else None
                if problem:
                    raise SessionRefused(problem)
        run_id = self._run_for(credential.run)
        store_id = self._store.claim_session(run_id, credential.label, credential.kind, self._transport, client)
        if store_id is None:
            raise SessionRefused(_taken(credential))
        state = SessionState(
            key=credential.label, store_id=store_id, scope=_SCOPES[credential.kind],
            stdio=credential.kind == "process" and self._transport == "stdio",
        )  # fmt: skip
        with self._lock:
            state = self._claimed.setdefault(credential, state)
            while len(self._claimed) > _CACHED:
                self._claimed.popitem(last=False)
        return state

    def narrowing(self, connection: str) -> frozenset[str] | None:
        """The tools an open connection narrowed itself to with ``open``; None if it did not."""
        with self._lock:
            return self._narrowed.get(connection)

    def narrow(self, connection: str, tools: Iterable[str]) -> None:
        """Narrow an open connection (a stdio process, a handshake-era MCP session) to ``tools``."""
        with self._lock:
            self._narrowed[connection] = frozenset(tools)
            self._narrowed.move_to_end(connection)
            while len(self._narrowed) > _NARROWED:
                self._narrowed.popitem(last=False)

    def end_mcp_session(self, session_id: str) -> None:
        """Forget what an HTTP MCP session that has ended (closed, idle or reclaimed) narrowed itself to.

        Its budget is its credential's, in the run store, so nothing else goes with it.
        """
        with self._lock:
            forgotten = self._narrowed.pop(session_id, None) is not None
            held = len(self._narrowed)
        if forgotten:
            log.info("MCP session %s ended; %d narrowed sessions held", session_id, held)

    def held(self) -> tuple[int, int, int]:
        """Sessions remembered as claimed, connections remembered as narrowed, and run names remembered (for tests
        and diagnostics): each at most its bound, however many labels and runs requests have named."""
        with self._lock:
            return len(self._claimed), len(self._narrowed), len(self._runs)

    def _run_for(self, run: str | None) -> int:
        if not run:
            return self._run_id
        with self._lock:
            known = self._runs.get(run)
            if known is not None:
                self._runs.move_to_end(run)
        if known is None:
            known = self._store.ensure_run(run, kind="eval")
            with self._lock:
                self._runs[run] = known
                while len(self._runs) > _RUNS:
                    self._runs.popitem(last=False)
        return known


def _taken(credential: Credential) -> str:
    where = f" in run {credential.run!r}" if credential.run else " in the server run"
    if credential.kind == "subject":
        return (
            f"the signed-in subject {credential.label!r}{where} has the name of a label another kind of credential "
            "already used (the main token's requests, or a session token); serve the contest in a run of its own "
            "(--run)"
        )
    if credential.kind == "token":
        return (
            f"this session token's label {credential.label!r}{where} is already used by another kind of credential "
            "(the main token's requests, or a server process); issue the token with another label or run "
            "(pau-mcp token issue)"
        )
    return (
        f"the session label {credential.label!r}{where} belongs to another credential (a session token, or a server "
        "process): the main token cannot spend or record under it; choose another label"
    )
