"""What one piece of scored code may take from the sandbox: a total over the method's tests, and fair turns."""

from __future__ import annotations

import statistics
import time

import anyio

from pau_mcp.fairness import FairShare
from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import CodeMatch, Scorer, ScoreResult, match_code
from pau_mcp.scoring.metering import CHUNK, MeteredSandbox
from wasm_runtime import Limits, Outcome, SandboxInterface
from wasm_runtime.workers import WorkerSandbox

RUNS = ManifestStore().method("builtin/b002")  # run-length pairs of a string: 20 test inputs
N = len(RUNS.tests)
SPIN = "def test_func(arg0):\n    while True:\n        pass\n"
#: Hands back a 50 MB outcome for every input (through the guest's own hand-over, as hostile code can): the host
#: refuses each and starts a new instance, which no fuel counts.
FLOOD_OUTCOME = """
def test_func(*args):
    guest = print.__self__.__import__('sys').modules['pau_guest']
    text = '{"status":"ok","value":"' + 'x' * 50_000_000 + '"}'
    guest._dumps = lambda result, _text=text: _text
    return 0
"""


def _statuses(sandbox: SandboxInterface, code: str, seconds: float, limits: Limits | None = None) -> list[str]:
    metered = MeteredSandbox(sandbox, seconds)

    async def go() -> list[Outcome]:
        with anyio.fail_after(300):
            return await metered.arun(code, [case.input for case in RUNS.tests], limits=limits)

    return [o.status.value + ("-not-run" if "not run" in (o.error_message or "") else "") for o in anyio.run(go)]


def test_code_spinning_on_every_input_stops_at_the_same_input_once_its_cpu_total_is_spent(
    worker_sandbox: WorkerSandbox,
) -> None:
    # Each input may spin 0.5 s of CPU; the code may have 1 s in all: the first chunk shares it out, nothing more runs.
    limits = Limits(timeout_s=0.5)
    first = _statuses(worker_sandbox, SPIN, 1.0, limits)
    again = _statuses(worker_sandbox, SPIN, 1.0, limits)
    assert first == again == ["timeout"] * CHUNK + ["timeout-not-run"] * (N - CHUNK)  # fuel is deterministic


def test_code_handing_back_huge_outcomes_stops_once_its_time_in_the_sandbox_is_spent(
    worker_sandbox: WorkerSandbox,
) -> None:
    # Issue 32: the 50 MB-per-input submission was answered right, but after 42 s of scoring; no fuel measures it.
    statuses = _statuses(worker_sandbox, FLOOD_OUTCOME, 0.5)
    ran = [s for s in statuses if not s.endswith("not-run")]
    assert set(ran) == {"output_limit"} and len(ran) <= N - 2 * CHUNK, statuses
    assert statuses[len(ran) :] == ["timeout-not-run"] * (N - len(ran))


def test_honest_code_scores_as_without_the_total(worker_sandbox: WorkerSandbox) -> None:
    async def go() -> CodeMatch:
        return await match_code(MeteredSandbox(worker_sandbox, 10.0), RUNS, RUNS.source, counterexample=True)

    result = anyio.run(go)
    assert result.fraction == 1.0 and result.counterexample is None


def test_a_submission_that_ran_out_of_time_says_so_in_its_reason(worker_sandbox: WorkerSandbox) -> None:
    scorer = Scorer(ManifestStore(), worker_sandbox, llm=None, limits=Limits(timeout_s=0.2), seconds=0.4)

    async def go() -> ScoreResult:
        return await scorer.score(RUNS.id, code=SPIN)

    result = anyio.run(go)
    assert result.direct is not None
    assert result.direct.fraction == 0.0 and "timed out" in (result.direct.reason or "")


def test_another_submission_is_scored_at_once_while_spinning_ones_hold_the_workers(
    worker_sandbox: WorkerSandbox,
) -> None:
    # The scorer's workers are shared fairly: four spinning submissions of one party made another's wait minutes.
    share = FairShare(slots=worker_sandbox.workers, reserved=worker_sandbox.workers // 2)
    # Each hog spins through a 2.5 s total (the default 10 s made the four of them 40 s of the suite's CPU); a chunk
    # of its inputs still holds a worker for over a second, and a hog's whole scoring for over 2.5 s.
    scorer = Scorer(ManifestStore(), worker_sandbox, llm=None, limits=Limits(timeout_s=0.25), shares=share, seconds=2.5)
    hog_times: list[float] = []
    victim_times: list[float] = []

    async def timed(party: str, code: str, into: list[float]) -> None:
        started = time.perf_counter()
        result = await scorer.score(RUNS.id, code=code, party=party)
        into.append(time.perf_counter() - started)
        assert result.direct is not None and result.direct.status == "scored"

    async def go() -> None:
        with anyio.fail_after(600):
            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(timed, "hog", SPIN, hog_times)
                await anyio.sleep(1.0)  # the hog's chunks hold the shared workers
                assert share.holding("hog") >= 1 and share.waiting("hog") >= 1
                for _ in range(3):
                    await timed("victim", RUNS.source, victim_times)

    anyio.run(go)
    # Before: the victim's batch queued behind the hog's (minutes). Now it runs in a turn reserved for a party
    # holding none: a small part of one hog submission's scoring.
    assert statistics.median(victim_times) < min(hog_times) / 5, (victim_times, hog_times)
