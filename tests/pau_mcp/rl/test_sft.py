"""`pau-mcp export sft`: DISTILL, FINAL and answer-aware datasets from recorded runs, loadable with `datasets`.

The commands run in the test's process (`run_pau`); the export `datasets` loads runs in a process of its own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeLLM
from pau_command import Ran, run_pau, run_pau_process
from rlscript import brain

from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import EpisodeResult, RunStore

ROOT = Path(__file__).resolve().parents[3]
GOLD = ManifestStore(()).method("builtin/b005").description


def _pau(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp ARGS`` in this process (or in a process of its own)."""
    return (run_pau_process if process else run_pau)(*args, env=env or dict(os.environ), cwd=ROOT)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a rollout run, an answer-aware rollout run and an eval run of the paper agent."""
    data = tmp_path_factory.mktemp("sft")
    with FakeLLM(responder=brain) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        for run, extra in (("plain", ()), ("aware", ("--answer-aware",))):
            done = _pau("rl", "rollout", "--model", "openai/policy", "--critic-model", "openai/critic", "--run", run,
                        "--data-dir", str(data), "--methods", "builtin/b005", "--methods", "builtin/b001",
                        "--no-parquet", *extra, env=env)  # fmt: skip
            assert done.returncode == 0, done.stderr[-2000:]
        aware_prompts = [p for p in fake.prompts() if "You already know what the function does" in p]
    assert any(GOLD in prompt for prompt in aware_prompts)  # the teacher was told
    store = RunStore(data / "runs.db")
    run_id = store.ensure_run("eval", kind="eval", config={"agent": "paper", "model": "m", "suite": "builtin"})
    store.plan_episodes(run_id, ["builtin/b002", "builtin/b003"])
    session = store.ensure_session(run_id, "k", "http")
    for method_id, rating, prompt in (("builtin/b002", 5.0, "What next?"), ("builtin/b003", 2.0, "Poor?")):
        submission = store.record_submission(session, method_id, "a description", None)
        store.record_score(submission, "judge", "scored", rating, "openai/j", {})
        trajectory = [{"kind": "model", "prompt": prompt, "reply": "Try 'aab'."}, {"kind": "tool_call"}]
        store.finish_episode(
            run_id, method_id, EpisodeResult(state="done", submission_id=submission, trajectory=trajectory)
        )
    return data


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_distill_keeps_good_teacher_steps_as_chat_examples(recorded: Path, tmp_path: Path) -> None:
    done = _pau("export", "sft", "plain", "eval", "--kind", "distill", "--out", str(tmp_path), "--min-score", "0.5",
                "--data-dir", str(recorded))  # fmt: skip
    assert done.returncode == 0, done.stderr
    examples = _lines(tmp_path / "train.jsonl")
    assert all([m["role"] for m in e["messages"]] == ["system", "user", "assistant"] for e in examples)
    assert {"role": "user", "content": "What next?"} in [m for e in examples for m in e["messages"]]
    assert any("INPUT:" in e["messages"][-1]["content"] for e in examples)
    assert "1 outcome below --min-score" in done.stdout  # the judge rated builtin/b003's description 2 of 5
    assert "Poor?" not in (tmp_path / "train.jsonl").read_text()


def test_answer_aware_examples_never_show_the_answer_in_their_prompts(recorded: Path, tmp_path: Path) -> None:
    done = _pau("export", "sft", "aware", "--kind", "answer-aware", "--out", str(tmp_path), "--min-score", "0",
                "--data-dir", str(recorded))  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "train.jsonl").read_text()
    assert GOLD not in text and "You already know" not in text


def test_final_answers_are_the_gold_descriptions(recorded: Path, tmp_path: Path) -> None:
    done = _pau("export", "sft", "plain", "--kind", "final", "--out", str(tmp_path), "--data-dir", str(recorded))
    assert done.returncode == 0, done.stderr
    answers = {e["messages"][-1]["content"] for e in _lines(tmp_path / "train.jsonl")}
    assert GOLD in answers and len(answers) == 2


def test_a_run_of_the_wrong_kind_is_refused_with_what_would_do(recorded: Path, tmp_path: Path) -> None:
    aware = _pau("export", "sft", "aware", "--kind", "distill", "--out", str(tmp_path), "--data-dir", str(recorded))
    assert aware.returncode == 1 and "--kind answer-aware" in aware.stderr
    plain = _pau(
        "export", "sft", "plain", "--kind", "answer-aware", "--out", str(tmp_path), "--data-dir", str(recorded)
    )
    assert plain.returncode == 1 and "--answer-aware" in plain.stderr


def test_the_dataset_loads_with_hugging_face_datasets(recorded: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    done = _pau(
        "export", "sft", "plain", "--kind", "final", "--out", str(tmp_path), "--data-dir", str(recorded), process=True
    )
    assert done.returncode == 0, done.stderr
    loaded = datasets.load_dataset("json", data_files=str(tmp_path / "train.jsonl"), split="train")
    assert loaded.column_names == ["messages"] and len(loaded) == 2
    assert datasets.load_dataset(str(tmp_path), split="train")[0]["messages"][0]["role"] == "system"


def _reference_run(data: Path) -> None:
    """An interactive run under the reference protocol, its trajectory as the reference agent records it."""
    store = RunStore(data / "runs.db")
    config = {"agent": "paper", "model": "m", "suite": "builtin", "mode": "interactive", "protocol": "reference"}
    run_id = store.ensure_run("ref", kind="eval", config=config)
    store.plan_episodes(run_id, ["builtin/b001"])
    session = store.ensure_session(run_id, "ref-k", "http")
    submission = store.record_submission(session, "builtin/b001", "a poor description", None)
    store.record_score(submission, "judge", "scored", 1.0, "openai/j", {})  # no outcome filter: kept all the same

    def model(step: str, prompt: str, reply: str) -> dict[str, Any]:
        return {"kind": "model", "step": step, "prompt": prompt, "reply": reply}

    def result(status: str) -> dict[str, Any]:
        return {"kind": "tool_result", "structured": {"status": status}}

    trajectory = [
        model("reason", "R1", "Try one. [STOP] dropped after the stop"),
        model("act", "A1", "Suggested Input: (1,)"), {"kind": "tool_call"}, result("ok"),  # returned: not kept
        model("reflect", "F1", "NO\nSummary: maybe doubles"),
        model("reason", "R2", "word " * 300),  # 300 words: not kept
        model("act", "A2", "input: (0,)"), {"kind": "tool_call"}, result("error"),  # raised: kept, as coded there
        model("reflect", "F2", "YES, done"),  # no summary: not kept
    ]  # fmt: skip
    store.finish_episode(run_id, "builtin/b001", EpisodeResult(state="done", submission_id=submission,
                                                              trajectory=trajectory))  # fmt: skip


def test_distill_with_the_references_filter_keeps_its_warm_up_steps_as_its_prompts_alone(
    recorded: Path, tmp_path: Path
) -> None:
    _reference_run(recorded)
    done = _pau("export", "sft", "ref", "--kind", "distill", "--filter", "reference", "--out", str(tmp_path),
                "--data-dir", str(recorded))  # fmt: skip
    assert done.returncode == 0, done.stderr
    examples = [[(m["role"], m["content"]) for m in e["messages"]] for e in _lines(tmp_path / "train.jsonl")]
    assert examples == [
        [("user", "R1"), ("assistant", "Try one.\n[STOP]")],
        [("user", "F1"), ("assistant", "NO\nSummary: maybe doubles\n[STOP]")],
        [("user", "A2"), ("assistant", "input: (0,)\n[STOP]")],
    ]
    ours = _pau("export", "sft", "eval", "--kind", "distill", "--filter", "reference", "--out", str(tmp_path),
                "--data-dir", str(recorded))  # fmt: skip
    assert ours.returncode == 1 and "--protocol reference" in ours.stderr and "--filter outcome" in ours.stderr


def test_final_of_a_reference_run_is_its_in_context_prompt_answered_with_the_gold(
    recorded: Path, tmp_path: Path
) -> None:
    from fakereference import write_checkout

    from pau_mcp.prompts import import_reference

    _reference_run(recorded)
    import_reference(write_checkout(tmp_path / "checkout"), recorded)
    done = _pau("export", "sft", "ref", "--kind", "final", "--out", str(tmp_path), "--data-dir", str(recorded))
    assert done.returncode == 0, done.stderr
    ((user, assistant),) = [e["messages"] for e in _lines(tmp_path / "train.jsonl")]
    assert user == {
        "role": "user",
        "content": "\nINCONTEXT header=def test_func(arg0):\nprev=[\n  Input: (234,) => Output: 24, Error: None\n"
        "  Input: (57,) => Output: 35, Error: None\n]\nDescription: ",
    }
    assert assistant["content"] == ManifestStore(()).method("builtin/b001").description


def test_the_reference_warm_up_records_every_reply_cut_at_its_stop_marker_as_the_references_client_did() -> None:
    from pau_mcp.rl.sft import reference_step_kept

    # Runs recorded before replies were stored cut still hold what followed the marker.
    kept, act = reference_step_kept("act", "INPUT: (1,)\n[STOP]\nINPUT: (2,)", failed_call=True)
    assert kept and act == "INPUT: (1,)\n[STOP]"
    kept, reflection = reference_step_kept("reflect", "summary: adds one\n[STOP]\nsummary: again", failed_call=False)
    assert kept and reflection == "summary: adds one\n[STOP]"  # one summary before the marker: kept
