"""`pau-mcp sweep FILE`: a whole comparison from one TOML file, resumable, ending with the report. The command runs\nin the test's process (`run_pau`), and a whole sweep once in a process of its own."""

from __future__ import annotations

import os
import resource
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fakellm import FakeLLM
from pau_command import Ran, run_pau, run_pau_process
from tasksuite import make_task_suite
from test_eval import brain
from test_task_mode import KEY as TASK_KEY
from test_task_mode import brain as task_brain

from pau_mcp.cli import main

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
suites = ["builtin"]
agents = ["probe"]
modes = ["interactive", "incontext"]
methods = ["builtin/b001", "builtin/b002"]
"""


def _sweep(
    tmp_path: Path, text: str, *extra: str | os.PathLike[str], env: dict[str, str] | None = None, process: bool = False
) -> Ran:
    """``pau-mcp sweep`` on TEXT: in this process, or in a process of its own."""
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_"))}
    return (run_pau_process if process else run_pau)(
        "sweep", path, "--data-dir", tmp_path, "--workers", "1", *extra,
        env=plain | {"COLUMNS": "250"} | (env or {}), cwd=ROOT,
    )  # fmt: skip


def _invoke(tmp_path: Path, text: str, *extra: str) -> Result:
    """The command in this process, for what ends before any run starts."""
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    runner = CliRunner()
    return runner.invoke(main, ["sweep", str(path), "--data-dir", str(tmp_path), *extra], env={"COLUMNS": "250"})


def _attempts(tmp_path: Path) -> dict[tuple[str, str], int]:
    rows = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT r.name, e.method_id, e.attempts FROM episodes e JOIN runs r ON e.run_id = r.id"
    )
    return {(run, method): attempts for run, method, attempts in rows}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PROBE + "limt = 3\n", "limt: unknown key"),
        (PROBE.replace("agents = [\"probe\"]", "agents = [\"paper\"]") + '[[models]]\nmodel = "gpt-4o"\n', "models[0].model"),
        (PROBE.replace("agents = [\"probe\"]", "agents = [\"paper\"]") + '[[models]]\nmodel = "openai/m"\ntemprature = 1\n', "models[0].temprature: unknown key"),
        (PROBE.replace("agents = [\"probe\"]", "agents = [\"paper\"]"), "the paper agent needs at least one [[models]]"),
        (PROBE.replace('"incontext"', '"in-context"'), "modes[1]"),
        (PROBE + "concurrency = 0\n", "concurrency"),
        ("suites = [\n", "not valid TOML"),
        (PROBE.replace('"interactive", "incontext"', '"tasks"'), 'task mode is answered by the tools agent: add "tools"'),
        (PROBE + 'docs = ["gold"]\n', 'docs chooses how the tools are documented in task mode: add "tasks" to modes'),
        (PROBE.replace('"incontext"', '"tasks"').replace('"probe"', '"tools"') + 'docs = ["none", "none"]\n[[models]]\nmodel = "openai/m"\n', "docs lists the same value twice"),
    ],
)  # fmt: skip
def test_a_bad_sweep_file_is_refused_before_anything_runs_saying_where(
    tmp_path: Path, text: str, expected: str
) -> None:
    done = _invoke(tmp_path, text)
    assert done.exit_code == 2, done.output
    assert expected in done.output and "sweep.toml" in done.output
    assert not (tmp_path / "runs.db").exists()


def test_two_entries_that_would_share_a_run_name_are_refused_with_the_fix(tmp_path: Path) -> None:
    text = PROBE.replace('agents = ["probe"]', 'agents = ["paper"]')
    text += '[[models]]\nmodel = "openai/m"\ntemperature = 0\n[[models]]\nmodel = "openai/m"\ntemperature = 1\n'
    done = _invoke(tmp_path, text)
    assert done.exit_code == 2
    assert "builtin-paper-interactive-openai-m" in done.output and "label" in done.output


def test_a_dry_run_lists_each_run_by_the_name_eval_gives_it(tmp_path: Path) -> None:
    text = PROBE.replace('agents = ["probe"]', 'agents = ["paper", "probe"]')
    text += '[[models]]\nmodel = "openai/m-1"\n[[models]]\nmodel = "anthropic/claude-x"\nlabel = "claude"\n'
    done = _invoke(tmp_path, text, "--dry-run")
    assert done.exit_code == 0, done.output
    names = [line.split()[0] for line in done.output.splitlines() if line.startswith("builtin-")]
    assert names == [
        "builtin-paper-interactive-openai-m-1", "builtin-paper-incontext-openai-m-1",
        "builtin-paper-interactive-claude", "builtin-paper-incontext-claude",
        "builtin-probe-interactive-none", "builtin-probe-incontext-none",
    ]  # fmt: skip
    assert not (tmp_path / "runs.db").exists() or not _attempts(tmp_path)


def test_a_probe_sweep_runs_every_run_and_ends_with_the_report_over_them(tmp_path: Path) -> None:
    done = _sweep(tmp_path, PROBE, process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run builtin-probe-interactive-none: 2 episodes finished now" in done.stdout
    assert "run builtin-probe-incontext-none: 2 episodes finished now" in done.stdout
    report = done.stdout.split("run builtin-probe-incontext-none")[1]
    assert "builtin-probe-interactive-none" in report and "builtin-probe-incontext-none" in report
    assert "Code match" in report or "code match" in report.lower()
    assert set(_attempts(tmp_path).values()) == {1} and len(_attempts(tmp_path)) == 4


def test_a_resumed_sweep_skips_finished_runs_and_runs_only_the_new_ones(tmp_path: Path) -> None:
    first = _sweep(tmp_path, PROBE.replace('"interactive", "incontext"', '"interactive"'))
    assert first.returncode == 0, first.stderr[-3000:]
    before = _attempts(tmp_path)

    again = _sweep(tmp_path, PROBE)

    assert again.returncode == 0, again.stderr[-3000:]
    assert "builtin-probe-interactive-none" in again.stdout and "skip: finished" in again.stdout
    assert "run builtin-probe-interactive-none:" not in again.stdout
    assert "run builtin-probe-incontext-none: 2 episodes finished now" in again.stdout
    after = _attempts(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing finished ran again
    assert len(after) == 4


def test_a_sweep_whose_run_exists_with_other_options_stops_before_running_anything(tmp_path: Path) -> None:
    first = _sweep(tmp_path, PROBE.replace('"interactive", "incontext"', '"incontext"') + "budget = 5\n")
    assert first.returncode == 0, first.stderr[-3000:]
    before = _attempts(tmp_path)
    other = _sweep(tmp_path, PROBE + "budget = 7\n")
    assert other.returncode == 2
    assert "builtin-probe-incontext-none" in other.stderr and "budget" in other.stderr
    assert _attempts(tmp_path) == before


def test_a_paper_agent_sweep_gives_each_model_its_own_settings(tmp_path: Path) -> None:
    text = """
suites = ["builtin"]
agents = ["paper"]
modes = ["interactive"]
methods = ["builtin/b001", "builtin/b002"]
judge_model = "openai/fake-judge"
coder_model = "openai/fake-judge"

[[models]]
model = "openai/fake-a"
temperature = 0.5
concurrency = 1

[[models]]
model = "openai/fake-b"
max_tokens = 123
"""
    with FakeLLM(responder=brain) as fake:
        done = _sweep(tmp_path, text, env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"})
        requests = list(fake.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    agent = [r for r in requests if r.get("model") in ("fake-a", "fake-b") and "messages" in r]
    assert {r.get("temperature") for r in agent if r["model"] == "fake-a"} == {0.5}
    assert {r.get("max_tokens") or r.get("max_completion_tokens") for r in agent if r["model"] == "fake-b"} >= {123}
    assert "run builtin-paper-interactive-openai-fake-a: 2 episodes finished now" in done.stdout
    assert "run builtin-paper-interactive-openai-fake-b: 2 episodes finished now" in done.stdout
    judged = sqlite3.connect(tmp_path / "runs.db").execute("SELECT COUNT(*) FROM scores WHERE kind = 'judge'")
    assert judged.fetchone()[0] == 4
    # The fake models have no price: each run's summary says so, as eval's does.
    assert done.stdout.count("no price for openai/fake-a, openai/fake-judge") == 1
    assert done.stdout.count("no price for openai/fake-b, openai/fake-judge") == 1


# -- a sweep file that is not what it seems ------------------------------------------------------------------------


def _guarded(tmp_path: Path, file: Path) -> Ran:
    """A dry run in a process of its own with 2 GB of memory and a minute: what once read /dev/zero or waited on a
    FIFO fails here, instead of the machine running out of memory or the test waiting forever."""
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_"))}
    return run_pau_process(
        "sweep", file, "--dry-run", "--data-dir", tmp_path, env=plain | {"COLUMNS": "250"}, cwd=ROOT, timeout=60,
        memory_limit=2 << 30,
    )  # fmt: skip


def _error_lines(done: Ran) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("Error:") or line.startswith("  ")]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory", "oversized"])
def test_a_sweep_file_that_is_not_a_regular_file_of_sensible_size_is_refused_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "sweep.toml"
    expected = {"fifo": "is a FIFO", "/dev/zero": "is a character device", "directory": "is a directory"}
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path = Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text(PROBE + "# padding\n" * 500_000)
    done = _guarded(tmp_path, path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = _error_lines(done)
    assert len(lines) == 1 and str(path) in lines[0] and expected.get(kind, "bytes long; at most") in lines[0], lines


def test_a_sweep_file_nested_100000_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text('agents = ["probe"]\nsuites = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    done = _guarded(tmp_path, path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert _error_lines(done) == [f"Error: {path} nests deeper than TOML's parser goes; a sweep file's lists are flat"]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ("".join(f'[[models]]\nmodel = "openai/m{i}"\n' for i in range(20_000)), "models: List should have at most 1000"),
        ('[[models]]\nmodel = "nope"\n' * 20_000, "models: List should have at most 1000"),
        ("methods = [" + ",".join(f'"b/{i}"' for i in range(100_001)) + "]\n", "methods: List should have at most"),
    ],
    ids=["20,000 models", "20,000 bad models", "100,001 methods"],
)  # fmt: skip
def test_a_sweep_file_with_too_many_entries_is_refused_quickly_in_a_few_lines(
    tmp_path: Path, entries: str, expected: str
) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text('suites = ["builtin"]\nagents = ["paper"]\n' + entries)
    # "Quickly" is the refusal's CPU, not its wall time (which a busy machine stretches): the dry run's process is
    # waited for, so its CPU is in this process's children's.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = _guarded(tmp_path, path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert spent < 6, f"{spent:.1f} s of CPU"  # measured: 1.3-1.4 s, most of it the interpreter's start-up
    lines = _error_lines(done)
    assert len(lines) == 2 and expected in lines[1] and len(lines[1]) < 300, lines


def test_a_sweep_that_expands_to_more_runs_than_one_sweep_runs_is_refused_with_how_to_split_it(tmp_path: Path) -> None:
    models = "".join(f'[[models]]\nmodel = "openai/m{i}"\n' for i in range(600))
    text = 'suites = ["builtin"]\nagents = ["paper", "tools"]\nmodes = ["interactive", "incontext"]\n' + models
    done = _invoke(tmp_path, text, "--dry-run")
    assert done.exit_code == 2 and "expands to 2,400 runs, more than one sweep runs (2,000)" in done.output
    assert "split it into several files" in done.output


def test_many_problems_are_named_up_to_twenty_and_the_rest_counted(tmp_path: Path) -> None:
    text = 'suites = ["builtin"]\nagents = ["paper"]\n' + '[[models]]\nmodel = "nope"\n' * 50
    done = _invoke(tmp_path, text)
    assert done.exit_code == 2 and done.output.count("models[") == 20 and "and 30 more problems" in done.output


def test_a_model_listed_twice_with_the_same_settings_is_named_as_a_duplicate(tmp_path: Path) -> None:
    done = _invoke(tmp_path, PROBE.replace('["probe"]', '["paper"]') + '[[models]]\nmodel = "openai/m"\n' * 2)
    assert done.exit_code == 2 and "is listed twice" in done.output and "openai/m appears twice" in done.output


TASKS = """
suites = ["mini"]
agents = ["tools", "probe"]
modes = ["incontext", "tasks"]
docs = ["none", "gold"]
budget = 3
concurrency = 1
score = false

[[models]]
model = "openai/fake-answerer"
"""


def test_a_task_sweep_answers_the_tasks_once_per_documentation_source_and_reports_accuracy_by_source(
    tmp_path: Path,
) -> None:
    make_task_suite(tmp_path / "manifests")
    manifests = ("--manifests", tmp_path / "manifests")
    assert run_pau("manifests", "freeze", *manifests, "--suite", "mini").returncode == 0
    planned = _invoke(tmp_path, TASKS, "--manifests", str(tmp_path / "manifests"), "--dry-run")
    assert planned.exit_code == 0, planned.output
    # Task mode is the tools agent's, one run per documentation source, named as `eval --mode tasks --docs` names it.
    assert [line.split()[:3] for line in planned.output.splitlines() if line.startswith("mini-")] == [
        ["mini-tools-incontext-openai-fake-answerer", "5", "methods"],
        ["mini-tools-tasks-none-openai-fake-answerer", "3", "tasks"],
        ["mini-tools-tasks-gold-openai-fake-answerer", "3", "tasks"],
        ["mini-probe-incontext-none", "5", "methods"],
    ]
    with FakeLLM(responder=task_brain) as fake:
        env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test", "PAU_MCP_TOOL_KEY": TASK_KEY}
        done = _sweep(
            tmp_path, TASKS.replace('"incontext", ', "").replace('"tools", "probe"', '"tools"'), *manifests, env=env
        )
    assert done.returncode == 0, done.stderr[-3000:]
    for source in ("none", "gold"):
        assert f"run mini-tools-tasks-{source}-openai-fake-answerer: 3 episodes finished now" in done.stdout
    assert done.stdout.count("task accuracy 0.667 (2 of 3 correct)") == 2
    # The report that ends the sweep sets the two documentation sources side by side.
    by_docs = done.stdout.split("Tasks by documentation")[1]
    assert (
        "mini-tools-tasks-none-openai-fake-answerer" in by_docs
        and "mini-tools-tasks-gold-openai-fake-answerer" in by_docs
    )
    assert set(_attempts(tmp_path).values()) == {1} and len(_attempts(tmp_path)) == 6
