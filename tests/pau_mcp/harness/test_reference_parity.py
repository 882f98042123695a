"""Parity with the reference benchmark: a small PAU split through ``--protocol reference``, end to end.

The split is made the way the reference's ``creation.py`` makes its rows: inputs as written (``(7)``, a list
unpacked into arguments), the first initial example's output stored as a value and the second as repr text,
``all_examples`` listing them. Every expectation here is computed from the rows alone by the reference's rules,
written out independently in this file (its results list, its calling and parsing rules, its loop, its code
extraction and code-match rule, its ``fillna(1)`` and sample deviation), with the same scripted model, and
compared with what pau-mcp sent and recorded: every agent, judge and code-writer prompt byte for byte, every
score, the number of queries, and the aggregates. The reference's wording comes from the fake checkout
(tests/fakereference.py). A thinking model runs the split too: its client's way of reading a reply (the
reasoning field prepended, ``<think>`` text left in) and its token limits (thinking included) are written out
here as well.
"""

from __future__ import annotations

import ast
import json
import os
import re
import statistics
from collections import Counter
from typing import Any

import anyio
import pytest
from fakellm import FakeLLM, Reply
from fakereference import write_checkout
from pau_command import run_pau

from pau_mcp.config import Settings
from pau_mcp.harness import EvalConfig, run_eval
from pau_mcp.manifests import ManifestStore
from pau_mcp.manifests.importers import import_pau
from pau_mcp.prompts import import_reference
from pau_mcp.reports import build_report, load_runs
from pau_mcp.runstore import RunStore
from pau_mcp.scoring import Scorer
from pau_mcp.server.catalog import Exposed

MODEL = "openai/fake-model"
THINKING = "openai/Qwen3-8B"  # a model that thinks: this project's own protocol gives it room to think on top
SUITE = "parity"


def row(source: str, description: str, train: list[list[Any]], test: list[list[Any]]) -> dict[str, str]:
    """A PAU row as the reference's creation.py finishes it (its header, all_examples and direct_prompt columns)."""
    header = next(line.strip() for line in source.splitlines() if line.startswith("def test_func("))
    return {
        "test_func_validated": source,
        "description": description,
        "train_examples": json.dumps(train),
        "test_examples": json.dumps(test),
        "all_examples": json.dumps([[i, o, "None"] for i, o in train]),
        "direct_prompt": "(the reference's own; rebuilt below from the fake checkout's wording)",
        "interactive_starting_prompt": "...",
        "header": header,
    }


SPLIT = [
    # A pair: JSON stored it as a list, and once as repr text.
    row("def test_func(arg0):\n    return (arg0 + 1, -20)\n", "Returns the number after its argument and -20.",
        [["(7)", [8, -20]], ["(1)", "(2, -20)"]],
        [["(0)", [1, -20]], ["(5)", [6, -20]], ["(-3)", [-2, -20]], ["(10)", [11, -20]]]),
    row("def test_func(arg0, arg1):\n    return f'{arg0}-{arg1}'\n", "Joins its two arguments with a dash.",
        [["(4, 5)", "4-5"], ["('a', 'b')", "'a-b'"]],
        [["(0, 0)", "0-0"], ["(1, 'x')", "1-x"], ["('', '')", "-"], ["(3, 4)", "3-4"]]),
    # A list literal is the argument list.
    row("def test_func(arg0, arg1):\n    return arg0 * arg1\n", "Multiplies its two arguments.",
        [["[2, 3]", 6], ["[4, 5]", "20"]],
        [["[0, 9]", 0], ["[2, 2]", 4], ["[-1, 3]", -3], ["['a', 3]", "aaa"]]),
    row("def test_func(arg0):\n    return sorted(arg0)\n", "Sorts a list into ascending order.",
        [["([3, 1, 2],)", [1, 2, 3]], ["([],)", "[]"]],
        [["([2, 1],)", [1, 2]], ["([5],)", [5]], ["([1, 1, 0],)", [0, 1, 1]], ["([9, 8, 7],)", [7, 8, 9]]]),
]  # fmt: skip

#: The code the scripted code writer answers with, by a text its prompt's examples hold.
CODE = {
    "8, -20": "def test_func(arg0):\n    return (arg0 + 1, -20)",  # a tuple: never equal to JSON's list
    "4-5": "def test_func(arg0, arg1):\n    return f'{arg0}-{arg1}'",
    "=> Output: 6,": "def test_func(arg0, arg1):\n    return arg0 * arg1 if isinstance(arg0, int) else None",
    "[1, 2, 3]": "def test_func(arg0):\n    return sorted(arg0, reverse=True)",
}
JUDGED = {"Returns the number": "Close. Rating: 4 [STOP] Rating: 1", "Joins": "I cannot say.",
          "Multiplies": "rating:5", "Sorts": "Partly right; Rating: 2"}  # fmt: skip


def brain(body: dict[str, Any]) -> str:
    """The scripted model: one reply per kind of prompt (the fake checkout's markers), by the loop's iteration."""
    text = str(body["messages"][-1]["content"])
    iteration = text.count("=> Output:") - 2  # the results list before the call: two initial examples, then calls
    if text.startswith("\nREASON"):
        return "Try two small numbers. [STOP] dropped"
    if text.startswith("\nACT"):
        return ["Suggested Input: (2, 3)", "Let me see\ninput: [6]"][min(iteration, 1)]
    if text.startswith("\nREFLECT"):
        return (
            "NO\nSummary: It Might Add [STOP]" if iteration == 0 else "Hypothesis Conclusion: YES\nSummary: Both Args"
        )
    if text.startswith("\nINCONTEXT"):
        return "It transforms its inputs. [STOP] more"
    if text.startswith("\nJUDGE"):
        return next(reply for key, reply in JUDGED.items() if f"true={key}" in text)
    if text.startswith("\nCODER"):
        examples = text.split("examples=", 1)[1]
        code = next(code for key, code in CODE.items() if key in examples)
        return f"Reasoning: short\nCode:\n```python\n{code}\n```\n[STOP]"
    return "unexpected"


def thinker(body: dict[str, Any]) -> Reply:
    """The same model, thinking: its thinking comes back in the reasoning field, or as ``<think>`` text, and says
    other things than its answer (another input, another rating, other code)."""
    text = str(body["messages"][-1]["content"])
    said = brain(body)
    if text.startswith("\nACT") and text.count("=> Output:") == 2:
        return Reply(text="<think>\nInput: [1, 2]\n</think>\n" + said)
    if text.startswith("\nCODER") and "[1, 2, 3]" in text:
        thought = "```python\ndef test_func(arg0):\n    return sorted(arg0)\n```"
    else:
        thought = {"\nREASON": "small ones", "\nACT": "or maybe\ninput: (4)", "\nREFLECT": "weighing it",
                   "\nJUDGE": "a first guess, rating: 3", "\nCODER": "short"}[text.split(" ", 1)[0]]  # fmt: skip
    return Reply(text=said, reasoning=thought, reasoning_as="reasoning")


def model_of(body: dict[str, Any]) -> Reply | str:
    return thinker(body) if body.get("model") == THINKING.split("/", 1)[1] else brain(body)


# -- the reference's rules, written out -------------------------------------------------------------


def output_text(reasoning: str | None, content: str | None) -> str:
    """Its client's ``get_output_texts`` and ``get_output_final``: the reasoning field first, then the content."""
    text = ""
    if reasoning is not None:
        text = "Reasoning: " + reasoning
    if content is not None:
        if text != "":
            text += "\nResponse: "
        text = text + " " + content
    return text.strip().split("[STOP]")[0].strip()


def infer(prompt: str, model: str = MODEL) -> str:
    """The reference's ``model.infer``: the reply as its client reads it, cut at its first [STOP], stripped."""
    said = model_of({"model": model.split("/", 1)[1], "messages": [{"content": prompt}]})
    if isinstance(said, str):
        return output_text(None, said)
    return output_text(said.reasoning if said.reasoning_as == "reasoning" else None, said.text)


def listing(results: list[tuple[Any, Any, Any]], window: int | None = None) -> str:
    """Its ``get_prev_results_str``."""
    if not results:
        return "[]"
    shown = results[-window:] if window is not None else results
    return "[\n" + "".join(f"  Input: {i} => Output: {o}, Error: {e}\n" for i, o, e in shown) + "]"


def call(source: str, text: str) -> tuple[Any, Any]:
    """Its ``RunTestFunc.run_test_str``: a tuple or list is the argument list; an exception gives its message."""
    args = ast.literal_eval(text)
    args = args if isinstance(args, (tuple, list)) else (args,)
    scope: dict[str, Any] = {}
    exec(source, scope)  # the rows' own small functions, in this test's process
    try:
        return scope["test_func"](*args), None
    except Exception as exc:  # noqa: BLE001 - any error is the call's result, as there
        return None, str(exc)


def suggested(reply: str) -> str | None:
    """Its action parse: the first line with one ``input:``/``Input:`` and text after it, else ``(`` ... ``)``."""
    lines = reply.strip().split("\n")
    for line in lines:
        if line.count("input:") == 1 or line.count("Input:") == 1:
            part = line.split("input:" if line.count("input:") == 1 else "Input:")[1].strip()
            if part:
                return part
    for line in lines:
        if "(" in line and ")" in line[line.index("(") :]:
            return line[line.index("(") : line.rindex(")") + 1].strip()
    return None


def interactive(data: dict[str, str], model: str = MODEL) -> tuple[list[str], str, int, list[tuple[str, str, str]]]:
    """Its ``interactive`` loop: the prompts it sends, its description, its query count and its stored examples."""
    header, source = data["header"], data["test_func_validated"]
    prev: list[tuple[Any, Any, Any]] = [(i, o, None) for i, o in json.loads(data["train_examples"])]
    hypothesis, prompts, queries = "Not yet formed", [], 0
    for _ in range(20):
        listed = listing(prev, 10)
        prompts.append(f"\nREASON header={header} \nprev={listed}\nhyp={hypothesis}\nReasoning:")
        reasoning = infer(prompts[-1], model)
        prompts.append(
            f"\nACT header={header}\nprev={listed}\nhyp={hypothesis}\nwhy={reasoning}\n"
            "a literal {brace} and a [STOP] marker stay text\nSuggested Input:"
        )
        text = suggested(infer(prompts[-1], model))
        assert text is not None  # the script always gives one; the reference's message for none differs
        ret, err = call(source, text)
        queries += 1
        prev.append((text, ret, err))
        prompts.append(
            f"\nREFLECT header={header}\nprev={listed}\nhyp={hypothesis}\nwhy={reasoning}\nlast=Input: {text}\n"
            "Hypothesis Conclusion: "
        )
        reflection = infer(prompts[-1], model).lower()
        decision, hypothesis = (
            (part.strip() for part in reflection.split("summary:"))
            if reflection.count("summary:") == 1
            else ("no", reflection)
        )
        if "yes" in decision:
            break
    return prompts, hypothesis, queries, [(repr(i), repr(o), repr(e)) for i, o, e in prev]


def dataset_examples(data: dict[str, str]) -> list[tuple[Any, Any, Any]]:
    """Its dataset's ``all_examples`` column, as loaded."""
    return [tuple(e) for e in json.loads(data["all_examples"])]


def coder_prompt(data: dict[str, str], description: str, examples: list[tuple[Any, Any, Any]]) -> str:
    return f"\nCODER header={data['header']}\ndescription={description}\nexamples={listing(examples)}\nReasoning: "


def judge_prompt(data: dict[str, str], description: str) -> str:
    return f"\nJUDGE true={data['description']}\nhyp={description}\nExplanation (very short):"


def judge_score(prompt: str, model: str = MODEL) -> float | None:
    """Its ``parse_score``: the first ``rating: [1-5]`` of the lower-cased reply."""
    found = re.search(r"rating:\s*([1-5])", infer(prompt, model).strip().lower())
    return float(found.group(1)) if found else None


def code_score(data: dict[str, str], prompt: str, model: str = MODEL) -> float:
    """Its ``extract_code`` and ``evaluate_code_predictions``: the dataset's outputs (as JSON loaded them) ``==``
    what the code returns, None for any error."""
    part = infer(prompt, model).split("[STOP]")[0]
    code = part.split("```python")[1].split("```")[0].strip()
    tests: list[list[Any]] = json.loads(data["test_examples"])
    return sum(1 for inp, out in tests if out == call(code, inp)[0]) / len(tests)


# -- the run ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory, sandbox: Any) -> dict[str, Any]:
    """The split imported, run interactive and in-context under the reference protocol, and its gold scored."""
    root = tmp_path_factory.mktemp("parity")
    rows = root / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in SPLIT), encoding="utf-8")
    suites = root / "suites"
    report = import_pau(ManifestStore([suites]), sandbox, source=rows, suite=SUITE)
    assert report.imported == [_method(i) for i in range(len(SPLIT))], report.lines()
    import_reference(write_checkout(root / "checkout"), root)
    settings = Settings.from_options(
        data_dir=root, db=root / "runs.db", manifests=[suites], judge_model=MODEL, coder_model=MODEL,
        protocol="reference",
    )  # fmt: skip
    thinking = Settings.from_options(
        data_dir=root, db=root / "runs.db", manifests=[suites], judge_model=THINKING, coder_model=THINKING,
        protocol="reference",
    )  # fmt: skip
    requests: dict[str, list[str]] = {}
    with FakeLLM(responder=model_of) as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_BASE_URL", fake.base_url)
        patch.setenv("OPENAI_API_KEY", "test")
        for run, mode, model, scoring in [
            ("ref-interactive", "interactive", MODEL, settings),
            ("ref-incontext", "incontext", MODEL, settings),
            ("ref-thinking", "interactive", THINKING, thinking),
        ]:
            before = len(fake.requests)
            config = EvalConfig(run=run, model=model, suite=SUITE, mode=mode, concurrency=2, protocol="reference")

            async def go(config: EvalConfig = config, scoring: Settings = scoring) -> Any:
                scorer = Scorer.from_settings(scoring)
                try:
                    with anyio.fail_after(180):
                        return await run_eval(scoring, config, scorer, None)
                finally:
                    await scorer.aclose()

            progress = anyio.run(go)
            assert progress.failed == 0, progress.errors
            requests[run.removeprefix("ref-")] = fake.prompts()[before:]
            if model == THINKING:
                requests["thinking limits"] = [
                    f"{b['messages'][0]['content'].split(' ', 1)[0].strip()} {b.get('max_tokens')}"
                    for b in fake.requests[before:]
                ]
        before = len(fake.requests)
        env = {**os.environ, "PAU_MCP_DATA_DIR": str(root), "PAU_MCP_DB": str(root / "runs.db")}
        scored = run_pau(
            "score", "--gold", "--suite", SUITE, "--protocol", "reference", "--manifests", suites,
            "--coder-model", MODEL, "--run", "gold", "--no-cache", env=env,
        )  # fmt: skip
        assert scored.returncode == 0, scored.stderr
        requests["gold"] = fake.prompts()[before:]
    store = RunStore(root / "runs.db")
    episodes = {
        mode: {e.method_id: e for e in store.episodes(store.run_id(f"ref-{mode}"), with_trajectories=True)}
        for mode in ("interactive", "incontext", "thinking")
    }
    return {"store": store, "requests": requests, "episodes": episodes, "suites": suites}


def _method(index: int) -> str:
    return f"{SUITE}/t{index:04d}"


def test_every_agent_prompt_of_an_interactive_run_is_the_references_byte_for_byte(parity: dict[str, Any]) -> None:
    for index, data in enumerate(SPLIT):
        expected, _, queries, _ = interactive(data)
        episode = parity["episodes"]["interactive"][_method(index)]
        sent = [step["prompt"] for step in episode.trajectory if step["kind"] == "model"]
        assert sent == expected, _method(index)
        steps = [step["step"] for step in episode.trajectory if step["kind"] == "model"]
        assert steps == ["reason", "act", "reflect"] * 2  # tagged for the reference's warm-up export
        # Every call the loop made ran and counted: a call of the wrong arity too, with Python's TypeError shown.
        assert episode.queries == queries == 2
    first = parity["episodes"]["interactive"][_method(0)].trajectory[0]["prompt"]
    assert "Input: (7) => Output: [8, -20], Error: None\n  Input: (1) => Output: (2, -20), Error: None" in first


def test_an_in_context_prompt_is_the_datasets_direct_prompt(parity: dict[str, Any]) -> None:
    for index, data in enumerate(SPLIT):
        direct = f"\nINCONTEXT header={data['header']}\nprev={listing(dataset_examples(data))}\nDescription: "
        episode = parity["episodes"]["incontext"][_method(index)]
        assert [step["prompt"] for step in episode.trajectory if step["kind"] == "model"] == [direct]
        assert episode.queries == 0


def test_the_judge_and_the_code_writer_get_the_references_prompts_in_every_kind_of_run(parity: dict[str, Any]) -> None:
    expected: dict[str, Counter[str]] = {"interactive": Counter(), "incontext": Counter(), "gold": Counter()}
    for data in SPLIT:
        _, hypothesis, _, stored = interactive(data)
        expected["interactive"].update([judge_prompt(data, hypothesis), coder_prompt(data, hypothesis, stored)])
        described = infer(f"\nINCONTEXT header={data['header']}\nprev={listing(dataset_examples(data))}\nDescription: ")
        # An in-context run's and the gold description's code writer get the dataset's own list, unquoted.
        expected["incontext"].update(
            [judge_prompt(data, described), coder_prompt(data, described, dataset_examples(data))]
        )
        expected["gold"].update([coder_prompt(data, data["description"], dataset_examples(data))])
    for kind, prompts in expected.items():
        sent = Counter(p for p in parity["requests"][kind] if p.startswith(("\nJUDGE", "\nCODER")))
        assert sent == prompts, kind


def test_every_score_and_every_aggregate_is_the_references(parity: dict[str, Any]) -> None:
    store: RunStore = parity["store"]
    judged, matched = [], []
    for index, data in enumerate(SPLIT):
        _, hypothesis, _, stored = interactive(data)
        episode = parity["episodes"]["interactive"][_method(index)]
        judge = judge_score(judge_prompt(data, hypothesis))
        assert episode.scores["judge"].value == judge, _method(index)
        code = code_score(data, coder_prompt(data, hypothesis, stored))
        assert episode.scores["codematch"].value == pytest.approx(code), _method(index)
        judged.append(1.0 if judge is None else judge)  # its fillna(1)
        matched.append(code)
    assert judged == [4.0, 1.0, 5.0, 2.0] and matched == [0.0, 1.0, 0.75, 0.25]
    (summary,) = build_report(load_runs(store, ["ref-interactive"]), resamples=10).summaries
    assert summary.judge.mean == pytest.approx(statistics.mean(judged))
    assert summary.judge.std == pytest.approx(statistics.stdev(judged))  # pandas' std: the sample's
    assert summary.codematch.mean == pytest.approx(statistics.mean(matched))
    assert summary.codematch.std == pytest.approx(statistics.stdev(matched))
    gold = {s.method_id: s for s in store.submissions(store.run_id("gold"))}
    for index, data in enumerate(SPLIT):
        scores = {row.kind: row for row in store.scores(gold[_method(index)].id)}
        expected = code_score(data, coder_prompt(data, data["description"], dataset_examples(data)))
        assert scores["codematch_gold"].value == pytest.approx(expected)
        assert scores["codematch_gold"].detail["with_examples"] is True  # the reference's default


def test_this_projects_protocol_shows_the_sandboxs_examples_whatever_the_dataset_wrote(parity: dict[str, Any]) -> None:
    method = ManifestStore([parity["suites"]]).method(_method(0))
    assert [case.original.input if case.original else None for case in method.examples] == ["(7)", "(1)"]
    exposed = Exposed(method, "fn_x")
    assert exposed.example_lines() == ["test_func(7) -> (8, -20)", "test_func(1) -> (2, -20)"]
    assert "[8, -20]" not in exposed.description(20) and "[8, -20]" not in exposed.prompt_text(20)


def test_a_thinking_models_replies_are_read_whole_within_the_references_token_limits(parity: dict[str, Any]) -> None:
    store: RunStore = parity["store"]
    for index, data in enumerate(SPLIT):
        expected, hypothesis, queries, stored = interactive(data, THINKING)
        episode = parity["episodes"]["thinking"][_method(index)]
        sent = [step["prompt"] for step in episode.trajectory if step["kind"] == "model"]
        assert sent == expected, _method(index)
        assert episode.queries == queries == 2
        # The first input of the whole reply ran: inside <think>, then in the reasoning field.
        assert [s["arguments"]["args"] for s in episode.trajectory if s["kind"] == "tool_call"] == [
            "(1, 2)",
            "(4,)",
        ]
        judge = judge_score(judge_prompt(data, hypothesis), THINKING)
        assert judge == 3.0 and episode.scores["judge"].value == judge  # the rating in its reasoning
        code = code_score(data, coder_prompt(data, hypothesis, stored), THINKING)
        assert episode.scores["codematch"].value == pytest.approx(code), _method(index)
    sorting = parity["episodes"]["thinking"][_method(3)].scores["codematch"].value
    assert sorting == 1.0  # the code in its reasoning, where its answer's sorts the wrong way round
    assert store.run_config(store.run_id("ref-thinking"))["protocol"] == "reference"
    # Each request's limit is the whole reply's, thinking included: 300 for each step and the judge, 600 for the
    # code writer (this project's protocol adds 8,192 tokens of room to each for this model).
    assert Counter(parity["requests"]["thinking limits"]) == Counter(
        {"REASON 300": 8, "ACT 300": 8, "REFLECT 300": 8, "JUDGE 300": 4, "CODER 600": 4}
    )
