"""The time limit means seconds of CPython work: fuel is calibrated to native CPython, the clock is a backstop."""

from __future__ import annotations

import pytest

from wasm_runtime import FUEL_PER_SECOND, WALL_CLOCK_FACTOR, Limits, Sandbox, Status

SIEVE = """
def test_func(n):
    sieve = [True] * (n + 1)
    sieve[0] = sieve[1] = False
    i = 2
    while i * i <= n:
        if sieve[i]:
            for j in range(i * i, n + 1, i):
                sieve[j] = False
        i += 1
    primes = [k for k in range(n + 1) if sieve[k]]
    return len(primes), primes[-1], sum(primes) % 1000003
"""


def test_the_cpu_budget_and_the_deadline_follow_the_time_limit():
    limits = Limits(timeout_s=5)
    assert limits.fuel_budget == 5 * FUEL_PER_SECOND
    assert limits.deadline_s == 5 * WALL_CLOCK_FACTOR
    assert Limits(timeout_s=5, fuel=123).fuel_budget == 123


@pytest.mark.slow
def test_a_prime_sieve_to_five_million_completes_under_a_five_second_limit(sandbox: Sandbox):
    outcome = sandbox.call(SIEVE, (5_000_000,), limits=Limits(timeout_s=5))
    assert outcome.status is Status.OK, outcome
    assert outcome.decoded() == (348513, 4999999, 177326)
    # CPython runs it in about 0.6 s: it must fit with room to spare, not just scrape under the budget.
    assert outcome.fuel < Limits(timeout_s=5).fuel_budget / 2


def test_an_endless_loop_still_stops_at_its_limit(sandbox: Sandbox):
    limits = Limits(timeout_s=0.25)
    outcome = sandbox.call("def test_func():\n    while True:\n        pass", "()", limits=limits)
    assert outcome.status is Status.TIMEOUT
    assert outcome.duration_ms < (limits.deadline_s + 2) * 1000
    if outcome.error_message == "the function used up its CPU budget":
        assert outcome.fuel == limits.fuel_budget
    else:  # only on a badly overloaded machine does the backstop come first
        assert outcome.error_message == "the function passed its wall-clock deadline"
