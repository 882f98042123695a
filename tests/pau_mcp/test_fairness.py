"""FairShare: turns of the sandbox's workers handed out fairly across credentials."""

from __future__ import annotations

import anyio
import pytest

from pau_mcp.config import Settings
from pau_mcp.fairness import FairShare
from pau_mcp.sandboxing import shared_sandbox


async def _hold(share: FairShare, party: str, started: list[str], release: anyio.Event) -> None:
    async with share.turn(party):
        started.append(party)
        await release.wait()


def test_a_party_holding_no_turn_starts_at_once_while_a_hog_holds_every_shared_one() -> None:
    async def main() -> None:
        share = FairShare(slots=4, reserved=2)
        started: list[str] = []
        release = anyio.Event()
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(_hold, share, "hog", started, release)
            await anyio.wait_all_tasks_blocked()
            assert share.holding("hog") == 2 and share.waiting("hog") == 4  # the reserved two are not the hog's
            group.start_soon(_hold, share, "victim", started, release)
            await anyio.wait_all_tasks_blocked()
            assert started[-1] == "victim" and share.busy == 3
            release.set()
        assert share.parties() == 0 and share.busy == 0

    anyio.run(main)


def test_a_freed_turn_goes_to_the_waiting_party_holding_fewest_whatever_order_requests_came_in() -> None:
    async def main() -> None:
        share = FairShare(slots=2, reserved=0)
        order: list[str] = []
        gates = {name: anyio.Event() for name in ("a1", "a2", "a3", "a4", "b1", "b2", "c1")}

        async def one(name: str) -> None:
            async with share.turn(name[0]):
                order.append(name)
                await gates[name].wait()

        async with anyio.create_task_group() as group:
            for name in ("a1", "a2", "a3", "a4"):  # a's flood comes first
                group.start_soon(one, name)
            await anyio.wait_all_tasks_blocked()
            for name in ("b1", "b2", "c1"):
                group.start_soon(one, name)
            await anyio.wait_all_tasks_blocked()
            assert order == ["a1", "a2"]
            gates["a1"].set()  # a holds 1, b and c none: b (waiting longest of those holding none) goes next
            await anyio.wait_all_tasks_blocked()
            gates["a2"].set()  # a 0, b 1, c 0: c has never been served, a was served longest ago... c first
            await anyio.wait_all_tasks_blocked()
            assert order == ["a1", "a2", "b1", "c1"]
            gates["b1"].set()  # a 0, b 0 (b1 done), c 1: a was served before b, so a goes
            await anyio.wait_all_tasks_blocked()
            assert order[-1] == "a3"
            for gate in gates.values():
                gate.set()
        assert sorted(order) == sorted(gates) and share.parties() == 0

    anyio.run(main)


def test_no_party_holds_more_than_its_share_while_another_waits() -> None:
    async def main() -> None:
        share = FairShare(slots=3, reserved=0)
        held: list[tuple[int, int]] = []

        async def party(name: str, calls: int) -> None:
            async def one() -> None:
                async with share.turn(name):
                    held.append((share.holding("a"), share.holding("b")))
                    await anyio.sleep(0.01)

            async with anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(one)

        async with anyio.create_task_group() as group:
            group.start_soon(party, "a", 30)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(party, "b", 10)
        # Once b waits, a never gets a turn while holding more than b: from then on, a holds at most 2 of 3.
        first_b = next(i for i, (_, b) in enumerate(held) if b)
        assert all(a <= 2 for a, b in held[first_b:] if b), held

    anyio.run(main)


def test_a_request_cancelled_while_waiting_leaves_no_turn_and_no_state() -> None:
    async def main() -> None:
        share = FairShare(slots=1, reserved=0)
        release = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_hold, share, "a", [], release)
            await anyio.wait_all_tasks_blocked()
            with anyio.move_on_after(0.05):
                async with share.turn("b"):
                    pytest.fail("b got a turn the hog held")
            assert share.waiting() == 0 and share.parties() == 1
            release.set()
        assert share.parties() == 0 and share.busy == 0

    anyio.run(main)


def test_a_shared_sandbox_has_a_worker_per_cpu_for_everyone_and_as_many_reserved() -> None:
    settings, share = shared_sandbox(Settings(workers=3))
    assert settings.workers == 6 and (share.slots, share.reserved) == (6, 3)
    in_process, share = shared_sandbox(Settings(workers=0))
    assert in_process.workers == 0 and (share.slots, share.reserved) == (2, 1)
    with pytest.raises(ValueError, match="slot"):
        FairShare(2, 2)
