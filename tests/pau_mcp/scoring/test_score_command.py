"""``pau-mcp score``: re-scoring a predictions file or a stored run, with a fake model behind it: in the test's process
(`run_pau`), and once in a process of its own."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import Body, FakeLLM
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.contract import ToolStatus
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import CallRecord, RunStore, ScoreRow

STORE = ManifestStore()
BUILTIN = STORE.suite("builtin").methods
MODELS = ["--judge-model", "openai/judge", "--coder-model", "openai/coder"]


def _replies(body: dict[str, Any]) -> str:
    """A judge that always says 3, and a code writer that writes the gold source of whichever method it is asked about."""
    prompt = json.dumps(body["messages"])
    if "Rating: X" in prompt:
        return "Partly right.\nRating: 3"
    user = body["messages"][-1]["content"]
    for method in BUILTIN.values():
        if method.description in user:  # the gold description (--gold)
            return f"```python\n{method.source}```"
    return "```python\ndef test_func(*args):\n    return None\n```"


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        yield server


def pau(fake: FakeLLM, tmp_path: Path, *args: str, process: bool = False, workers: int | None = 1) -> Ran:
    """``pau-mcp score ARGS`` against the fake model, in this process or in a process of its own.

    ``workers``: its sandbox worker processes (``PAU_MCP_WORKERS``): one, unless the test is about them (None: the
    default, one per CPU).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_"))}
    env["OPENAI_BASE_URL"] = fake.base_url
    if workers is not None:
        env["PAU_MCP_WORKERS"] = str(workers)
    words = ("score", *args, "--db", str(tmp_path / "runs.db"), "--data-dir", str(tmp_path))
    if process:
        return run_pau_process(*words, env=env)
    return run_pau(*words, env=env)


def scores_by_submission(db: Path) -> dict[int, dict[str, ScoreRow]]:
    store = RunStore(db)
    out: dict[int, dict[str, ScoreRow]] = {}
    for run in store.runs():
        for submission in store.submissions(run.id):
            if scores := store.scores(submission.id):
                out[submission.id] = {s.kind: s for s in scores}
    store.close()
    return out


def all_scores(store: RunStore, kind: str) -> list[tuple[str, ScoreRow]]:
    """Every score of this kind, with its submission's method: run by run (newest first), each in submission order."""
    return [
        (submission.method_id, score)
        for run in store.runs()
        for submission in store.submissions(run.id)
        for score in store.scores(submission.id)
        if score.kind == kind
    ]


def write_predictions(path: Path) -> None:
    lines = [
        {
            "id": "builtin/b002",
            "predicted_description": "Counts runs.",
            "num_queries": 2,
            "all_examples": [["('aab',)", "[('a', 2), ('b', 1)]"], ["('',)", "[]"]],
        },
        {
            "id": "builtin/b003",
            "predicted_description": "Something.",
            "num_queries": 0,
            "all_examples": [],
            "code": BUILTIN["builtin/b003"].source,
        },
        {
            "id": "builtin/b004",
            "predicted_description": "Something else.",
            "num_queries": 1,
            "all_examples": [["(1, 2)", 3]],
        },
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def test_a_predictions_file_is_recorded_as_a_run_and_every_score_lands_in_the_store(
    fake: FakeLLM, tmp_path: Path
) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    done = pau(fake, tmp_path, str(predictions), *MODELS, "--json", process=True, workers=None)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["submissions"] == 3 and summary["run"].startswith("file-predictions-")
    assert summary["judge"]["mean_scored"] == 3.0 and summary["judge"]["unscored"] == 0
    assert summary["codematch"]["count"] == 3 and summary["direct"] == {"count": 1, "mean": 1.0, "errors": 0}
    assert summary["llm"]["calls"] == 6 and summary["llm"]["unpriced_models"] == ["openai/coder", "openai/judge"]

    scores = scores_by_submission(tmp_path / "runs.db")
    assert len(scores) == 3
    assert all(
        s["judge"].status == "scored" and s["judge"].value == 3.0 and s["judge"].model == "openai/judge"
        for s in scores.values()
    )
    assert all(s["codematch"].status == "scored" and s["codematch"].value == 0.0 for s in scores.values())
    (direct,) = [s["direct"] for s in scores.values() if "direct" in s]
    assert direct.value == 1.0 and direct.detail["matches"] == [True] * len(BUILTIN["builtin/b003"].tests)

    store = RunStore(tmp_path / "runs.db")
    exported = list(store.predictions(store.run_id(summary["run"])))
    store.close()
    assert exported[0]["all_examples"] == [["('aab',)", "[('a', 2), ('b', 1)]"], ["('',)", "[]"]]
    assert exported[2]["all_examples"] == [["(1, 2)", "3"]]


def test_scoring_the_same_file_again_reuses_its_run_and_answers_from_the_cache(fake: FakeLLM, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    assert pau(fake, tmp_path, str(predictions), *MODELS).returncode == 0
    asked = len(fake.requests)
    again = pau(fake, tmp_path, str(predictions), *MODELS, "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["llm"]["cached_calls"] == summary["llm"]["calls"] == 6 and summary["llm"]["cost_usd"] == 0
    assert len(fake.requests) == asked
    store = RunStore(tmp_path / "runs.db")
    assert len(store.runs()) == 1 and store.runs()[0].submissions == 3
    assert len(all_scores(store, "judge")) == 6  # re-scores add rows, latest last
    store.close()
    bypass = pau(fake, tmp_path, str(predictions), *MODELS, "--no-cache", "--json")
    assert json.loads(bypass.stdout)["llm"]["cached_calls"] == 0 and len(fake.requests) == asked + 6


def test_a_stored_run_is_scored_by_name_with_the_agents_examples_for_the_code_writer(
    fake: FakeLLM, tmp_path: Path
) -> None:
    store = RunStore(tmp_path / "runs.db")
    run_id = store.ensure_run("agent-run", "serve")
    session = store.ensure_session(run_id, "s1", "http")
    store.record_call(session, CallRecord("builtin/b002", "fn_x", "('zzz',)", True, ToolStatus.OK, value="[('z', 3)]"))
    store.record_submission(session, "builtin/b002", "Run lengths of a string.", None)
    store.record_submission(session, "builtin/b005", "Something.", BUILTIN["builtin/b005"].source)
    store.close()
    done = pau(fake, tmp_path, "agent-run", *MODELS, "--with-examples")
    assert done.returncode == 0, done.stderr
    assert "judge:       mean 3.00 over 2 scored (0 unscored, 0 errors)" in done.stdout
    assert "direct code:" in done.stdout and "LLM:" in done.stdout
    coder_prompts = [p for p in fake.prompts() if "Write the Python function" in p]
    assert any("test_func('zzz') -> [('z', 3)]" in p for p in coder_prompts)
    scores = scores_by_submission(tmp_path / "runs.db")
    assert sorted(len(kinds) for kinds in scores.values()) == [2, 3]


def test_an_unscored_judge_reply_is_stored_without_a_value_and_the_summary_says_how_it_counted(
    fake: FakeLLM, tmp_path: Path
) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    fake.responder = lambda body: (
        "I cannot decide."
        if "Rating: X" in json.dumps(body["messages"]) and "Counts runs." in json.dumps(body["messages"])
        else _replies(body)
    )
    done = pau(fake, tmp_path, str(predictions), *MODELS, "--scores", "judge")
    assert done.returncode == 0, done.stderr
    assert "judge:       mean 3.00 over 2 scored (1 unscored, 0 errors)" in done.stdout
    assert "mean 2.33 with 1 unscored judge reply counted as 1, as the reference implementation does" in done.stdout
    judged = [kinds["judge"] for kinds in scores_by_submission(tmp_path / "runs.db").values()]
    (unscored,) = [j for j in judged if j.status == "unscored"]
    assert unscored.value is None and "no 'Rating: X' line" in unscored.detail["reason"]
    assert unscored.detail["reply"] == "I cannot decide."


def test_only_the_asked_scores_are_computed(fake: FakeLLM, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    done = pau(fake, tmp_path, str(predictions), "--scores", "direct")
    assert done.returncode == 0, done.stderr
    assert fake.requests == []  # no model needed, none asked
    assert "2 skipped" in done.stdout
    scores = scores_by_submission(tmp_path / "runs.db")
    assert [set(kinds) for kinds in scores.values()] == [{"direct"}]


def _sandbox_workers() -> set[int]:
    """This process's sandbox worker processes."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                status = (entry / "status").read_text()
                parent = int(status.split("PPid:")[1].split()[0])
                if parent == os.getpid() and b"wasm_runtime.workers" in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


def test_the_commands_sandbox_workers_stop_when_it_returns_however_it_ends(fake: FakeLLM, tmp_path: Path) -> None:
    """A command also runs inside other programs (a notebook, a script, these tests): its workers end with it."""
    before = _sandbox_workers()
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    assert pau(fake, tmp_path, str(predictions), "--scores", "direct", workers=2).returncode == 0
    no_judge = pau(fake, tmp_path, str(predictions), "--scores", "judge", workers=2)  # refused after they started
    assert no_judge.returncode == 2 and "judge" in no_judge.stderr
    assert _sandbox_workers() - before == set()


def test_gold_descriptions_give_each_methods_upper_bound_for_the_whole_suite(fake: FakeLLM, tmp_path: Path) -> None:
    done = pau(fake, tmp_path, "--gold", "--suite", "builtin", "--coder-model", "openai/coder", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["submissions"] == len(BUILTIN) and summary["codematch"]["mean"] == 1.0
    assert summary["judge"]["count"] == 0
    kinds = {kind for by_kind in scores_by_submission(tmp_path / "runs.db").values() for kind in by_kind}
    assert kinds == {"codematch_gold"}


def test_a_missing_model_is_a_usage_error_naming_the_flag_and_variable(fake: FakeLLM, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    done = pau(fake, tmp_path, str(predictions), "--coder-model", "openai/coder")
    assert done.returncode == 2
    assert "--judge-model" in done.stderr and "PAU_JUDGE_MODEL" in done.stderr
    # A submission with code could be scored with no model: the message says how.
    assert "--scores direct" in done.stderr
    assert fake.requests == []

    alone = pau(fake, tmp_path, str(predictions), "--scores", "direct")
    assert alone.returncode == 0, alone.stderr
    assert "direct code: mean 1.000 over 1 scored" in alone.stdout
    asked = pau(fake, tmp_path, str(predictions), "--scores", "judge")
    assert asked.returncode == 2 and "--scores direct" not in asked.stderr  # the user asked for the judge


def test_a_rejected_key_stops_scoring_with_the_providers_message(fake: FakeLLM, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    fake.fail(401, times=20, message="Incorrect API key provided")
    done = pau(fake, tmp_path, str(predictions), *MODELS)
    assert done.returncode == 1
    assert "Incorrect API key provided" in done.stderr and "OPENAI_API_KEY" in done.stderr


def test_models_answering_pages_give_score_errors_each_printed_once_with_its_scores_name(
    fake: FakeLLM, tmp_path: Path
) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_predictions(predictions)
    fake.responder = lambda body: Body(b"<html><h1>504 Gateway Time-out</h1></html>", content_type="text/html")
    done = pau(fake, tmp_path, str(predictions), *MODELS, "--llm-retries", "0")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error ")]
    assert len(errors) == len(set(errors)) == 6  # a judge and a code writer's error for each of the 3
    for method in ("b002", "b003", "b004"):
        for kind, model in (("judge", "openai/judge"), ("codematch", "openai/coder")):
            (line,) = [e for e in errors if e.startswith(f"error builtin/{method} {kind}: ")]
            assert f"{model}: the server's reply is not JSON" in line and "504 Gateway Time-out" in line
    statuses = [
        s[k].status for s in scores_by_submission(tmp_path / "runs.db").values() for k in ("judge", "codematch")
    ]
    assert statuses == ["error"] * 6


def test_a_malformed_line_or_an_unknown_name_is_reported_clearly(fake: FakeLLM, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "builtin/b002", "predicted_description": "x"}\n{"predicted_description": 3}\n')
    done = pau(fake, tmp_path, str(bad), *MODELS)
    assert done.returncode == 1 and "bad.jsonl:2: predicted_description: Input should be a valid string" in done.stderr
    no_id = tmp_path / "no-id.jsonl"
    no_id.write_text('{"predicted_description": "x", "description": "not a gold description of any method"}\n')
    done = pau(fake, tmp_path, str(no_id), *MODELS)
    assert done.returncode == 2 and "--suite" in done.stderr
    done = pau(fake, tmp_path, str(no_id), *MODELS, "--suite", "builtin")
    assert (
        done.returncode == 1 and "no-id.jsonl:1: no method of builtin has this line's gold description" in done.stderr
    )
    missing = pau(fake, tmp_path, "no-such-run", *MODELS)
    assert missing.returncode == 1 and "neither a file nor a run" in missing.stderr
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"id": "builtin/zzz", "predicted_description": "x"}\n')
    done = pau(fake, tmp_path, str(unknown), *MODELS)
    assert done.returncode == 1 and "builtin/zzz" in done.stderr


def test_hostile_submissions_in_the_middle_of_a_file_leave_every_other_score_intact(
    fake: FakeLLM, tmp_path: Path
) -> None:
    hostile = [
        # A forged encoding the host cannot decode, an outcome handed straight to the host, nesting too deep.
        "import _pau_values\ndef test_func(*args):\n    _pau_values.encode = lambda *a, **k: {'set': [[1]]}\n"
        "    return 1\n",
        'from wit_world.imports import host\ndef test_func(*args):\n    host.next(\'{"status": "ok"}\')\n'
        "    return 1\n",
        "import _pau_values\nv = 1\nfor _ in range(600):\n    v = [v]\n"
        "def test_func(*args):\n    _pau_values.encode = lambda *a, **k: v\n    return 1\n",
    ]
    honest = ["builtin/b001", "builtin/b003", "builtin/b004", "builtin/b005"]
    lines = []
    for index, method_id in enumerate(honest):
        lines.append({"id": method_id, "predicted_description": "", "code": BUILTIN[method_id].source})
        if index < len(hostile):
            lines.append({"id": "builtin/b002", "predicted_description": "", "code": hostile[index]})
    predictions = tmp_path / "hostile.jsonl"
    predictions.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = pau(fake, tmp_path, str(predictions), "--scores", "direct", "--json", workers=None)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["submissions"] == 7 and summary["direct"]["count"] == 7 and summary["direct"]["errors"] == 0
    store = RunStore(tmp_path / "runs.db")
    rows = [(method, score.value, score.detail) for method, score in all_scores(store, "direct")]
    store.close()
    assert [(method, value) for method, value, _ in rows] == [
        ("builtin/b001", 1.0), ("builtin/b002", 0.0), ("builtin/b003", 1.0), ("builtin/b002", 0.0),
        ("builtin/b004", 1.0), ("builtin/b002", 0.0), ("builtin/b005", 1.0),
    ]  # fmt: skip
    details = [detail for method, _, detail in rows if method == "builtin/b002"]
    reasons = [detail["reason"] for detail in details]
    assert details[0]["failures"] == {"returned a value that could not be decoded": len(BUILTIN["builtin/b002"].tests)}
    assert reasons[0] == "every test input fails the same way (returned a value that could not be decoded)"
    # Nesting that deep may also stop the worker process on its way back: it is replaced and the inputs crashed.
    assert reasons[2].endswith(("(returned a value that could not be decoded)", "(crashed)"))


# -- re-scoring with the run's own protocol and settings -------------------------------------------------


def _eval_brain(body: dict[str, Any]) -> str:
    """Plays the paper agent (one probe, then concludes), a judge, and a code writer whose code is right only
    when it was shown the observed calls: a re-score that drops them changes the score."""
    user = str(body["messages"][-1]["content"])
    if "Rating: X" in user:
        return "Fine.\nRating: 4"
    if "Write the Python function" in user:
        if "Observed calls and their results" in user:
            return f"```python\n{BUILTIN['builtin/b001'].source}```"
        return "```python\ndef test_func(arg0):\n    return arg0\n```"
    if "Propose ONE input" in user:
        return "Try 105."
    if "Give the exact input" in user:
        return "INPUT: (105,)"
    if "Update your hypothesis" in user:
        return "HYPOTHESIS: product of non-zero digits\nCONCLUDED: YES"
    return "DESCRIPTION: the product of its non-zero digits"


def _evaluate(fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **config: Any) -> None:
    import anyio

    from pau_mcp.config import Settings
    from pau_mcp.harness import EvalConfig, run_eval
    from pau_mcp.scoring import Scorer

    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    protocol = config.pop("protocol", "pau-mcp")
    settings = Settings.from_options(
        data_dir=tmp_path, db=tmp_path / "runs.db", judge_model="openai/judge", coder_model="openai/coder",
        protocol=protocol,
    )  # fmt: skip
    eval_config = EvalConfig(
        run="evaluated", model="openai/agent", suite="builtin", methods=("builtin/b001",), concurrency=1,
        protocol=protocol, **config,
    )  # fmt: skip

    async def go() -> None:
        scorer = Scorer.from_settings(settings)
        try:
            progress = await run_eval(settings, eval_config, scorer, None)
            assert progress.failed == 0, progress.errors
        finally:
            await scorer.aclose()

    anyio.run(go)


def test_rescoring_an_evaluation_run_gives_the_code_writer_the_examples_it_had_and_the_same_score(
    fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.responder = _eval_brain
    _evaluate(fake, tmp_path, monkeypatch)
    coder = [p for p in fake.prompts() if "Write the Python function" in p]
    first = scores_by_submission(tmp_path / "runs.db")
    ((submission, kinds),) = first.items()
    assert kinds["codematch"].value == 1.0 and kinds["codematch"].detail["with_examples"] is True

    again = pau(fake, tmp_path, "evaluated", *MODELS, "--no-cache")
    assert again.returncode == 0, again.stderr
    rescored = [p for p in fake.prompts() if "Write the Python function" in p][len(coder) :]
    assert rescored == coder  # the very same prompt: the initial examples and the agent's call, as in the run
    latest = scores_by_submission(tmp_path / "runs.db")[submission]
    assert latest["codematch"].value == 1.0 and latest["codematch"].detail["with_examples"] is True


def test_a_run_recorded_before_examples_were_stored_is_rescored_with_the_examples_its_run_gave(
    fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.responder = _eval_brain
    _evaluate(fake, tmp_path, monkeypatch)
    coder = [p for p in fake.prompts() if "Write the Python function" in p]
    with contextlib.closing(sqlite3.connect(tmp_path / "runs.db")) as db, db:  # as an older pau-mcp left the file:
        db.execute("UPDATE episodes SET examples = NULL")  # no examples, no protocol in the config
        db.execute("UPDATE runs SET config = ?", (json.dumps({"model": "openai/agent", "suite": "builtin"}),))
    again = pau(fake, tmp_path, "evaluated", *MODELS, "--no-cache", "--scores", "codematch")
    assert again.returncode == 0, again.stderr
    assert [p for p in fake.prompts() if "Write the Python function" in p][len(coder) :] == coder


def test_without_examples_can_still_be_asked_for_and_is_recorded(
    fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.responder = _eval_brain
    _evaluate(fake, tmp_path, monkeypatch)
    again = pau(fake, tmp_path, "evaluated", *MODELS, "--without-examples", "--scores", "codematch", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["codematch"]["mean"] < 1.0  # the code it writes without them is wrong
    (kinds,) = scores_by_submission(tmp_path / "runs.db").values()
    assert kinds["codematch"].detail["with_examples"] is False


def test_a_reference_run_is_rescored_under_the_reference_protocol_and_another_protocol_is_refused(
    fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakereference import write_checkout

    from pau_mcp.prompts import import_reference

    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)

    def brain(body: dict[str, Any]) -> str:
        user = str(body["messages"][-1]["content"])
        if user.startswith("\nJUDGE"):
            return "rating: 5"
        if user.startswith("\nCODER"):
            return "```python\ndef test_func(arg0):\n    return arg0\n```"
        if user.startswith("\nACT"):
            return "Input: (105,)"
        if user.startswith("\nREFLECT"):
            return "yes summary: digits"
        return "thinking"

    fake.responder = brain
    _evaluate(fake, tmp_path, monkeypatch, protocol="reference")
    asked = len(fake.requests)
    again = pau(fake, tmp_path, "evaluated", *MODELS, "--no-cache", "--json")
    assert again.returncode == 0, again.stderr
    rescored = [b["messages"][0]["content"] for b in fake.requests[asked:]]
    assert sorted(text.split()[0] for text in rescored) == ["CODER", "JUDGE"]
    (kinds,) = scores_by_submission(tmp_path / "runs.db").values()
    assert {kinds[k].detail["protocol"] for k in ("judge", "codematch")} == {"reference"}

    refused = pau(fake, tmp_path, "evaluated", *MODELS, "--protocol", "pau-mcp")
    assert refused.returncode == 2
    assert "run evaluated followed the reference protocol" in refused.stderr


def _reference_rows(path: Path) -> None:
    """Two rows as the reference benchmark saves its predictions: no id, examples as JSON text of triples."""
    rows = [
        {
            "header": "def test_func(arg0):",
            "description": BUILTIN["builtin/b013"].description,
            "predicted_description": "sorts by absolute value",
            "n_queries": 1,
            "concluded": True,
            "all_examples": json.dumps(
                [["'((3, -1, 2),)'", "'(-1, 2, 3)'", "None"], ["'[(1, -1)]'", "(-1, 1)", "None"]]
            ),
        },
        {
            "header": "def test_func(arg0):",
            "description": BUILTIN["builtin/b001"].description,
            "predicted_description": None,
            "n_queries": 1,
            "concluded": False,
            "all_examples": json.dumps([["'(0,)'", "None", "'boom'"]]),
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_a_predictions_file_in_the_references_own_layout_is_matched_by_gold_description_and_scored(
    fake: FakeLLM, tmp_path: Path
) -> None:
    from fakereference import write_checkout

    from pau_mcp.prompts import import_reference

    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)
    predictions = tmp_path / "reference-rows.jsonl"
    _reference_rows(predictions)
    fake.responder = lambda body: "```python\ndef test_func(arg0):\n    return arg0\n```"
    args = ("--suite", "builtin", "--coder-model", "openai/coder", "--scores", "codematch", "--with-examples")
    done = pau(fake, tmp_path, str(predictions), *args, "--protocol", "reference", "--json")
    assert done.returncode == 0, done.stderr
    store = RunStore(tmp_path / "runs.db")
    run = json.loads(done.stdout)["run"]
    assert [s.method_id for s in store.submissions(store.run_id(run))] == ["builtin/b013", "builtin/b001"]
    assert store.run_config(store.run_id(run))["protocol"] == "reference"
    prompts = [b["messages"][0]["content"] for b in fake.requests]
    # The code writer gets the file's examples exactly as the reference stored them.
    assert any(
        "examples=[\n  Input: '((3, -1, 2),)' => Output: '(-1, 2, 3)', Error: None\n"
        "  Input: '[(1, -1)]' => Output: (-1, 1), Error: None\n]" in p
        for p in prompts
    )
    assert any("examples=[\n  Input: '(0,)' => Output: None, Error: 'boom'\n]" in p for p in prompts)
    # Under this project's protocol the same rows read as calls: the reference's [x] is one argument x.
    ours = pau(fake, tmp_path, str(predictions), *args, "--run", "ours")
    assert ours.returncode == 0, ours.stderr
    calls = [b["messages"][-1]["content"] for b in fake.requests[len(prompts) :]]
    assert any("test_func((3, -1, 2)) -> '(-1, 2, 3)'" in p and "test_func((1, -1)) -> (-1, 1)" in p for p in calls)


def test_a_reference_layout_file_gives_its_examples_by_default_and_its_predicted_code_scores_as_direct_code(
    fake: FakeLLM, tmp_path: Path
) -> None:
    from fakereference import write_checkout

    from pau_mcp.prompts import import_reference

    import_reference(write_checkout(tmp_path / "checkout"), tmp_path)
    predictions = tmp_path / "reference-code.jsonl"
    _reference_rows(predictions)
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    # Its code-prediction files carry the code it extracted: a list, as the reference's rule wants for b013.
    rows[0]["predicted_code"] = "def test_func(arg0):\n    return sorted(arg0, key=lambda v: (abs(v), v))"
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows[:1]))
    fake.responder = lambda body: "```python\ndef test_func(arg0):\n    return arg0\n```"
    args = ("--suite", "builtin", "--coder-model", "openai/coder", "--scores", "codematch", "--scores", "direct")
    done = pau(fake, tmp_path, str(predictions), *args, "--protocol", "reference", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["direct"]["mean"] == 1.0
    (prompt,) = [b["messages"][0]["content"] for b in fake.requests]
    assert "examples=[\n  Input: '((3, -1, 2),)' => Output: '(-1, 2, 3)', Error: None\n" in prompt  # no flag needed
    store = RunStore(tmp_path / "runs.db")
    assert store.run_config(store.run_id(json.loads(done.stdout)["run"]))["with_examples"] is True


def test_gold_with_examples_gives_the_code_writer_each_methods_initial_examples(fake: FakeLLM, tmp_path: Path) -> None:
    args = ("--gold", "--suite", "builtin", "--coder-model", "openai/coder", "--with-examples", "--run", "gold-ex")
    done = pau(fake, tmp_path, *args, "--json")
    assert done.returncode == 0, done.stderr
    b001 = next(b["messages"][-1]["content"] for b in fake.requests if BUILTIN["builtin/b001"].description in str(b))
    assert "test_func(234) -> 24" in b001 and "test_func(57) -> 35" in b001
    before = len(fake.requests)
    without = pau(fake, tmp_path, "--gold", "--suite", "builtin", "--coder-model", "openai/coder", "--no-cache")
    assert without.returncode == 0, without.stderr
    later = [str(b) for b in fake.requests[before:]]
    assert len(later) == len(BUILTIN) and not any("test_func(234)" in p for p in later)  # this project's default
