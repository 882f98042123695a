"""Hidden functions may import any standard-library module that can work without files, network, processes or threads."""

from __future__ import annotations

from wasm_runtime import Sandbox
from wasm_runtime.stdlib import ABSENT_FROM_WASI_BUILD, EXCLUDED, modules_to_bundle


def _guest_stdlib_names(sandbox: Sandbox) -> list[str]:
    outcome = sandbox.call("import sys\ndef test_func():\n    return sorted(sys.stdlib_module_names)", "()")
    names: list[str] = outcome.decoded()
    return names


def test_every_module_that_can_work_without_the_os_imports_inside_the_sandbox(sandbox: Sandbox) -> None:
    names = [n for n in modules_to_bundle(_guest_stdlib_names(sandbox)) if n not in ABSENT_FROM_WASI_BUILD]
    assert len(names) > 150
    source = "import importlib\ndef test_func(name):\n    return importlib.import_module(name).__name__"
    outcomes = sandbox.run(source, [(name,) for name in names])
    failed = {name: f"{o.error_type}: {o.error_message}" for name, o in zip(names, outcomes, strict=False) if not o.ok}
    assert failed == {}


def test_modules_common_in_real_datasets_work_in_one_function(sandbox: Sandbox) -> None:
    source = """
import ipaddress, fractions, decimal, statistics, datetime, calendar, difflib, textwrap
import unicodedata, string, heapq, bisect, itertools, functools, collections, re, math, json, operator
def test_func(text):
    return (
        str(ipaddress.ip_address('10.0.0.1') + 1),
        str(fractions.Fraction(3, 6) + decimal.Decimal('0.5').as_integer_ratio()[0]),
        statistics.median([3, 1, 2]),
        datetime.date(2020, 2, 28) + datetime.timedelta(days=1) == datetime.date(2020, 2, 29),
        calendar.isleap(2024),
        difflib.SequenceMatcher(None, text, text[::-1]).ratio() > 0,
        textwrap.shorten(text, 12),
        unicodedata.name('é'),
        string.ascii_lowercase[:3],
        heapq.nsmallest(2, [5, 1, 4]),
        bisect.bisect([1, 3, 5], 4),
        re.sub(r'\\d', '#', text),
        json.dumps(collections.Counter(text).most_common(1)),
    )
"""
    outcome = sandbox.call(source, "('abc 123 hello world',)")
    assert outcome.ok, outcome
    assert outcome.decoded()[0] == "10.0.0.2"


def test_the_policy_lists_have_reasons_and_do_not_overlap() -> None:
    assert all(reason for reason in {**EXCLUDED, **ABSENT_FROM_WASI_BUILD}.values())
    assert not set(EXCLUDED) & set(ABSENT_FROM_WASI_BUILD)


def test_the_build_reports_exactly_the_absent_modules_the_policy_expects(sandbox: Sandbox) -> None:
    absent = set(sandbox.info()["absent"])
    assert absent == set(ABSENT_FROM_WASI_BUILD)
