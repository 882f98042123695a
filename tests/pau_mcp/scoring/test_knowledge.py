"""Which knowledge matters: the code writer handed chosen components (signature, description, examples), each
combination scored against the hidden tests in the real sandbox and reported beside the gold description's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM, Reply
from pau_command import run_pau

from pau_mcp.knowledge import all_combinations, knowledge_kind, parse_knowledge, split_kind
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore
from pau_mcp.scoring import coder_messages

B001 = ManifestStore().method("builtin/b001")  # the product of the non-zero digits, negated for a negative number
EXPLORED = "Multiplies the decimal digits of the number together."  # misses the zero and sign rules
OBSERVED = [("(234,)", "24"), ("(-23,)", "-6"), ("(105,)", "5")]

RIGHT = (
    "def test_func(arg0):\n    if arg0 == 0:\n        return 0\n    r = 1\n    for c in str(abs(arg0)):\n"
    "        if c != '0':\n            r *= int(c)\n    return -r if arg0 < 0 else r\n"
)
PLAIN = "def test_func(arg0):\n    r = 1\n    for c in str(abs(arg0)):\n        r *= int(c)\n    return r\n"
NAIVE = "def test_func(*args):\n    return 1\n"


def coder(body: dict[str, Any]) -> Reply | str:
    """A code writer whose code depends on what it was handed: the gold rules, the explored one, or nothing."""
    text = str(body["messages"][-1]["content"])
    if B001.description in text:
        return f"```python\n{RIGHT}```"
    if EXPLORED in text:
        return f"```python\n{PLAIN}```"
    return f"```python\n{NAIVE}```"


def _prompt(**knowledge_and_examples: Any) -> str:
    return coder_messages(B001, EXPLORED, **knowledge_and_examples)[-1]["content"]


def test_each_component_reaches_the_code_writer_only_when_chosen() -> None:
    full = coder_messages(B001, EXPLORED, OBSERVED)
    assert coder_messages(B001, EXPLORED, OBSERVED, knowledge=("signature", "description", "examples")) == full
    assert coder_messages(B001, EXPLORED, OBSERVED, knowledge=("signature", "description")) == coder_messages(
        B001, EXPLORED
    )  # the same prompts as code match asks, so cached replies answer them
    no_signature = _prompt(examples=OBSERVED, knowledge=("description", "examples"))
    assert "def test_func(arg0)" not in no_signature and "`test_func`" in no_signature
    assert EXPLORED in no_signature and "test_func(105) -> 5" in no_signature
    examples_only = _prompt(examples=OBSERVED, knowledge=("examples",))
    assert EXPLORED not in examples_only and "test_func(-23) -> -6" in examples_only
    signature_only = _prompt(examples=OBSERVED, knowledge=("signature",))
    assert "Header: def test_func(arg0):" in signature_only
    assert EXPLORED not in signature_only and "105" not in signature_only


def test_combinations_are_named_in_one_order_and_unknown_ones_are_refused() -> None:
    assert parse_knowledge("Examples, signature") == ("signature", "examples") == parse_knowledge("signature+examples")
    assert len(all_combinations()) == 7 and all_combinations()[-1] == ("signature", "description", "examples")
    assert split_kind(knowledge_kind(("description",), gold=True)) == (True, ("description",))
    assert split_kind("codematch") is None and split_kind("codematch:nonsense") is None
    for bad in ("", "signature,signature", "docs"):
        with pytest.raises(ValueError, match="signature"):
            parse_knowledge(bad)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM(responder=coder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def test_every_combination_is_scored_for_explored_and_gold_descriptions_and_reported_side_by_side(
    tmp_path: Path, fake: FakeLLM
) -> None:
    predictions = tmp_path / "explored.jsonl"
    line = {"id": B001.id, "predicted_description": EXPLORED, "all_examples": [list(e) for e in OBSERVED]}
    predictions.write_text(json.dumps(line) + "\n")
    common = ["--db", str(tmp_path / "runs.db"), "--data-dir", str(tmp_path), "--coder-model", "openai/coder"]
    explored = run_pau(
        "score", str(predictions), "--run", "explored", "--with-examples", "--knowledge", "all", *common
    )  # fmt: skip
    assert explored.returncode == 0, explored.stderr
    assert "code match from signature+description (the run's descriptions): mean 0.455" in explored.stdout
    gold = run_pau("score", "explored", "--gold", "--knowledge", "description", "--knowledge", "examples", *common)
    assert gold.returncode == 0, gold.stderr
    assert "code match from description (gold description): mean 1.000" in gold.stdout

    store = RunStore(tmp_path / "runs.db")
    (submission,) = store.submissions(store.run_id("explored"))
    kinds = {row.kind: row for row in store.scores(submission.id)}
    assert {k for k in kinds if k.startswith("codematch:")} == {knowledge_kind(c, False) for c in all_combinations()}
    assert kinds["codematch:description"].value == pytest.approx(10 / 22)  # the zero and sign tests fail
    assert kinds["codematch_gold:description"].value == 1.0
    assert kinds["codematch:examples"].detail["knowledge"] == ["examples"]
    # Examples-only code never saw a description: the explored and gold scores agree.
    assert kinds["codematch:examples"].value == kinds["codematch_gold:examples"].value
    asked = [str(body["messages"][-1]["content"]) for body in fake.requests]
    assert any("test_func(-23) -> -6" in text and EXPLORED not in text for text in asked)

    markdown = tmp_path / "report.md"
    reported = run_pau("report", "explored", "--db", str(tmp_path / "runs.db"), "--markdown", str(markdown))
    assert reported.returncode == 0, reported.stderr
    table = markdown.read_text().split("Which knowledge matters")[1]
    row = next(r for r in table.splitlines() if re.search(r"\| description \|", r))
    assert "| 1 | 0.455 | 1 | 1.000 |" in row


def test_knowledge_goes_with_code_match_only(tmp_path: Path) -> None:
    refused = run_pau("score", "x", "--scores", "judge", "--knowledge", "signature", "--db", str(tmp_path / "r.db"))
    assert refused.returncode == 2 and "--scores codematch only" in refused.stderr
    unknown = run_pau("score", "x", "--knowledge", "docs", "--db", str(tmp_path / "r.db"))
    assert unknown.returncode == 2 and "unknown knowledge docs" in unknown.stderr
